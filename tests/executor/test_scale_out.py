"""Scale-out: two stateless ``toolexec mcp --http`` instances behind nginx (docs/scale-out.md).

The test starts both instances and nginx on loopback, drives calls through nginx with the MCP
SDK client, and shows that both instances served calls and that a tool list change on disk
reaches the clients of both. It skips until ``toolexec mcp --http`` exists (another issue
adds the MCP server); nginx is Debian's package, installed by ``make test``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow
NGINX_CONF = Path(__file__).resolve().parents[2] / "docs" / "scale-out.nginx.conf"
NOOP_SH = (
    "#!/usr/bin/env bash\n# @describe Say which instance ran the call.\n"
    'main() {\n    printf "%s" "$TOOLEXEC_INSTANCE" >>"$LLM_OUTPUT"\n}\n'
)


def mcp_http_available() -> bool:
    done = subprocess.run([sys.executable, "-m", "toolexec", "mcp", "--help"], capture_output=True, text=True)
    return done.returncode == 0 and "--http" in done.stdout


def nginx() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Bounded wait until something accepts on ``port`` (fails if the process ends first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{process.args} exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port} after {timeout} s")


@pytest.fixture
def fleet(project: Project, tmp_path: Path) -> Iterator[tuple[int, Project]]:
    """Two instances and nginx in front of them; yields nginx's port."""
    if not mcp_http_available():
        pytest.skip("MCP server not available: `toolexec mcp --http` does not exist yet")
    program = nginx()
    if program is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is missing: `make test` installs Debian's nginx")
        pytest.skip("nginx is not installed (`make .venv/.nginx` installs it)")
    project.tool("whoami.sh", NOOP_SH)
    config = project.configure()
    ports = [free_port(), free_port()]
    front = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for n, port in enumerate(ports):
            env = {**os.environ, "TOOLEXEC_INSTANCE": f"instance-{n}"}
            command = [sys.executable, "-m", "toolexec", "--config", str(config), "mcp", "--http", f"127.0.0.1:{port}"]
            processes.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_for_port(port, processes[-1])
        conf = tmp_path / "nginx.conf"
        text = NGINX_CONF.read_text()
        text = text.replace("127.0.0.1:8001", f"127.0.0.1:{ports[0]}").replace("127.0.0.1:8002", f"127.0.0.1:{ports[1]}")
        text = text.replace("listen 127.0.0.1:8000", f"listen 127.0.0.1:{front}")
        runtime = tmp_path / "nginx"
        runtime.mkdir()
        prelude = f"daemon off;\nerror_log {runtime}/error.log;\npid {runtime}/nginx.pid;\nevents {{}}\n"
        conf.write_text(
            prelude + "http {\n" + f"access_log {runtime}/access.log;\nclient_body_temp_path {runtime};\n" + text + "}\n"
        )
        processes.append(subprocess.Popen([program, "-c", str(conf), "-p", str(runtime)], stderr=subprocess.DEVNULL))
        wait_for_port(front, processes[-1])
        yield front, project
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def test_two_instances_behind_nginx_serve_calls_and_see_tool_changes(fleet: tuple[int, Project]) -> None:
    import anyio

    pytest.importorskip("mcp")
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    port, project = fleet
    url = f"http://127.0.0.1:{port}/mcp"

    def text(result: types.CallToolResult) -> str:
        return "".join(c.text for c in result.content if isinstance(c, types.TextContent))

    async def scenario() -> None:
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(30.0)) as session,
            Client(streamable_http_client(url, http_client=session), mode="legacy") as client,
        ):
            assert [t.name for t in (await client.list_tools()).tools] == ["whoami"]
            served = {text(await client.call_tool("whoami", {})) for _ in range(6)}
            assert served == {"instance-0", "instance-1"}  # nginx spread the calls over both
            project.tool("added.sh", NOOP_SH.replace("Say which", "Also say which"))
            project.configure(["whoami.sh", "added.sh"])
            with anyio.fail_after(30):  # each instance reloads on its own: wait until every answer has the new tool
                seen = 0
                while seen < 6:
                    names = [t.name for t in (await client.list_tools()).tools]
                    seen = seen + 1 if names == ["whoami", "added"] else 0
                    await anyio.sleep(0.05 if seen == 0 else 0)
            added = {text(await client.call_tool("added", {})) for _ in range(6)}
            assert added == {"instance-0", "instance-1"}

    anyio.run(scenario)


def test_the_documented_nginx_config_is_the_tested_one() -> None:
    page = (NGINX_CONF.parent / "scale-out.md").read_text(encoding="utf-8")
    shown = page.split("```nginx\n", 1)[1].split("```", 1)[0]
    tested = "".join(line for line in NGINX_CONF.read_text().splitlines(keepends=True) if not line.startswith("#"))
    assert shown == tested.lstrip("\n")
