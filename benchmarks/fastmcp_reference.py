"""The reference servers of the MCP load rows: FastMCP (the MCP SDK's ``MCPServer``, FastMCP's name since mcp 2.0)
serving what toolexec serves, the way its documentation shows.

    python fastmcp_reference.py stdio-bash SCRIPT       # noop_sh: SCRIPT's main() in bash, per call
    python fastmcp_reference.py http PORT TOOL.py       # noop_py: TOOL.py's run() called in-process; 3 more no-ops

``noop_sh`` runs the Bash script with ``asyncio.create_subprocess_exec`` in a session of its own, its argument in
the environment (as argc would set it) and a private output file it appends to, read back and removed: the work a
toolexec Bash call does, without the checks and bounds around it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from mcp.server.mcpserver import MCPServer


def stdio_bash(script: str) -> None:
    server = MCPServer("reference")

    @server.tool()
    async def noop_sh(text: str = "") -> str:
        """Return the text."""
        fd, path = tempfile.mkstemp(prefix="reference-", suffix=".out")
        os.close(fd)
        try:
            process = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                'source "$0"; main',
                script,
                env={**os.environ, "argc_text": text, "LLM_OUTPUT": path},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            await process.communicate()
            return Path(path).read_text()
        finally:
            os.unlink(path)

    server.run("stdio")


def http(port: int, tool_file: str) -> None:
    spec = importlib.util.spec_from_file_location("reference_tool", tool_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = MCPServer("reference")
    server.tool(name="noop_py")(module.run)
    for name in ("noop_sh", "noop_ts", "noop_js"):  # as many tools as toolexec's project lists

        def other(text: str = "") -> str:
            """Return the text."""
            return text

        server.tool(name=name)(other)
    server.run("streamable-http", host="127.0.0.1", port=port, stateless_http=True)


if __name__ == "__main__":
    if sys.argv[1] == "stdio-bash":
        stdio_bash(sys.argv[2])
    else:
        http(int(sys.argv[2]), sys.argv[3])
