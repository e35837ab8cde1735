"""Operating ``toolexec mcp``: ``/healthz``, the answers to a wrong token, Host or Origin, no server path in anything a
client is told, the working directory of calls (``mcp.cwd``), the line on a terminal, the MCP Inspector with
``--config``."""

from __future__ import annotations

import json
import os
import pty
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, Project
from tests.executor.mcp_http_server import ACCEPT, INITIALIZE, WAIT, wait_for
from tests.executor.mcp_http_server import Server as HttpServer

pytest.importorskip("mcp")

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

TOKEN = "s3cret-token-for-tests"
GREET = 'def run(name: str) -> str:\n    """Greet someone."""\n    return f"hello {name}"\n'
WHERE = 'import os\n\n\ndef run() -> str:\n    """Say where the call runs."""\n    return os.getcwd()\n'
# One tool per way a call can fail, each failure's text written by toolexec (not by the tool).
FAILING = {
    "boom.py": 'def run(x: int) -> str:\n    """Fail with a traceback."""\n    raise ValueError("boom")\n',
    "slow.sh": "#!/usr/bin/env bash\n# @describe Sleep past its timeout.\n# @meta timeout 1\nmain() { sleep 30; }\n"
    'eval "$(argc --argc-eval "$0" "$@")"\n',
    "big.sh": "#!/usr/bin/env bash\n# @describe Write more than max_output_bytes.\n"
    "main() { head -c 5000 /dev/zero | tr '\\0' a >> \"$LLM_OUTPUT\"; }\n"
    'eval "$(argc --argc-eval "$0" "$@")"\n',
    "nointerp.ts": '#!/usr/bin/env no-such-interpreter-anywhere\n/**\n * Need a missing interpreter.\n */\nexport function run(): string {\n  return "x";\n}\n',
    "greet.py": GREET,
    "off.py": 'def run() -> str:\n    """Visible, not enabled."""\n    return "off"\n',
}


class Server(HttpServer):
    """The server with a static token (``MCP_TOKEN``)."""

    def __init__(self, project: Project) -> None:
        super().__init__(project, "--token-env", "MCP_TOKEN", env={"MCP_TOKEN": TOKEN})

    def health(self) -> dict[str, Any]:
        with httpx2.Client(timeout=WAIT) as client:
            answer = client.get(f"{self.base}/healthz")
        assert answer.status_code == 200
        return answer.json()


@pytest.fixture
def failing(project: Project) -> Project:
    for file, source in FAILING.items():
        project.tool(file, source)
    project.tool("hidden.py", GREET)  # on disk, not visible
    project.configure([*FAILING], max_output_bytes=1000, enabled_tools=[Path(f).stem for f in FAILING if f != "off.py"])
    return project


@pytest.fixture
def served(failing: Project) -> Iterator[Server]:
    server = Server(failing)
    yield server
    assert server.stop() == 0


def test_healthz_needs_no_token_and_mcp_refusals_are_as_documented(served: Server) -> None:
    with httpx2.Client(timeout=WAIT) as client:
        health = client.get(f"{served.base}/healthz", headers={"Host": "10.1.2.3:8000"})  # a probe names the pod's IP
        missing = client.get(served.url)  # the GET a health check used to make: answered, not held open
        wrong = client.post(served.url, json=INITIALIZE, headers={**ACCEPT, "Authorization": "Bearer nope"})
        good = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
        host = client.post(served.url, json=INITIALIZE, headers={**good, "Host": "evil.example:80"})
        origin = client.post(served.url, json=INITIALIZE, headers={**good, "Origin": "http://evil.example"})
    body = health.json()
    assert body["catalog"].pop("built_seconds_ago") >= 0
    assert (health.status_code, body) == (
        200,
        {"status": "ok", "ready": True, "tools": 5, "catalog": {"fresh": True, "watching": True}},
    )
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, 'Bearer realm="toolexec"')
    assert (wrong.status_code, wrong.headers["www-authenticate"]) == (401, 'Bearer realm="toolexec", error="invalid_token"')
    assert (host.status_code, origin.status_code) == (421, 403)
    # Only the public paths themselves are public: dot segments (sent raw: clients collapse them) get no further.
    port = int(served.base.rsplit(":", 1)[1])
    for path in ("/healthz/../mcp", "/.well-known/oauth-protected-resource/../../mcp", "/healthz/"):
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as raw:
            raw.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            assert raw.recv(64).split(b"\r\n", 1)[0] == b"HTTP/1.1 401 Unauthorized", path


def _texts(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.slow
def test_no_error_a_client_is_told_carries_a_server_path(failing: Project, served: Server) -> None:
    """Every way a call fails, over HTTP: the texts are whole, and none names where the server keeps anything."""
    told: dict[str, str] = {}

    async def session() -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=WAIT) as http,
            Client(streamable_http_client(served.url, http_client=http), mode="2026-07-28") as client,
        ):
            for label, name, arguments in [
                ("traceback", "boom", {"x": 1}),
                ("bad arguments", "boom", {"x": "one"}),
                ("timeout", "slow", {}),
                ("missing interpreter", "nointerp", {}),
                ("spilled output", "big", {}),
            ]:
                result = await client.call_tool(name, arguments)
                told[label] = _texts(result)[-600:] if label == "spilled output" else _texts(result)
            for label, name in [("unknown tool", "nope"), ("hidden tool", "hidden"), ("not enabled", "off")]:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(name, {})
                told[label] = refused.value.error.message
            failing.tool("greet.py", 'def run(name: str) -> str:\n    """Greet."""\n    return (\n')  # a broken edit
            await anyio.to_thread.run_sync(wait_for, lambda: "greet.py" in served.log.read_text())
            told["last good"] = _texts(await client.call_tool("greet", {"name": "Ada"}))
            failing.config.write_text("visible_tools: [greet.py\n", encoding="utf-8")  # a config that does not load
            await anyio.to_thread.run_sync(wait_for, lambda: not served.health()["catalog"]["fresh"])
            told["stale catalog"] = json.dumps(served.health())
            told["after a bad reload"] = _texts(await client.call_tool("boom", {"x": 2}))

    anyio.run(session)
    with httpx2.Client(timeout=WAIT) as client:
        told["no token"] = client.post(served.url, json=INITIALIZE, headers=ACCEPT).text
        told["bad body"] = client.post(served.url, content=b"{", headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"}).text
    assert told["traceback"] == "Tool call 'boom' exited with code 1: ValueError: boom"
    assert told["timeout"] == "Tool call 'slow' timed out after 1s"
    assert told["unknown tool"] == "unknown tool 'nope'"
    assert "is not listed under visible_tools in config.yaml" in told["hidden tool"]
    assert re.search(r"all of it is in functions/cache/\.outputs/\S+\.output\]$", told["spilled output"]), told["spilled output"]
    assert told["last good"] == (
        "hello Ada\n[toolexec note: greet: the file no longer builds (tools/greet.py:1:1: syntax error: unexpected text "
        "near 'def run(name: str) -> str:'); ran its last good version]"
    )
    assert json.loads(told["stale catalog"])["catalog"]["problem"] == (
        "the config or the tools could not be reloaded: serving the previous tools (see the server's log)"
    )
    private = [str(failing.root), str(failing.root.resolve()), str(Path.home()), str(REPO), sys.prefix]
    assert {label: [p for p in private if p in text] for label, text in told.items()} == {label: [] for label in told}
    log = served.log.read_text()
    assert str(failing.config) in log  # the server's log keeps the whole story
    assert len(told) == 13


def test_calls_start_in_mcp_cwd_whatever_folder_the_client_started_the_server_in(project: Project, tmp_path: Path) -> None:
    project.tool("where.py", WHERE)
    work = project.root / "work"
    work.mkdir()
    project.configure(["where.py"], mcp={"cwd": "work"})
    relative = os.path.relpath(project.config, "/")

    async def call(config: str) -> str:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "toolexec", "--config", config, "mcp"], env=dict(os.environ), cwd="/"
        )
        async with Client(stdio_client(params), mode="legacy") as client:
            return _texts(await client.call_tool("where", {}))

    assert anyio.run(call, relative) == str(work.resolve())  # a config named relative to / still reloads from there
    project.configure(["where.py"])
    assert anyio.run(call, str(project.config)) == "/"  # without mcp.cwd: where the client started it


def test_a_person_starting_it_on_a_terminal_is_told_what_it_waits_for(project: Project) -> None:
    project.tool("greet.py", GREET)
    project.configure(["greet.py"])
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolexec", "--config", str(project.config), "mcp", "--no-reload"],
        stdin=follower,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(follower)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        os.write(leader, b"\x04")  # Ctrl-D, as the line says: end of input, the server exits 0
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
        proc.stderr.close()
    assert line == (
        "toolexec mcp: serving MCP over stdin/stdout: it waits for a client's JSON-RPC messages (Ctrl-D or Ctrl-C ends it; "
        "--http PORT serves HTTP; see docs/mcp.md)\n"
    )
    piped = subprocess.run(
        [sys.executable, "-m", "toolexec", "--config", str(project.config), "mcp", "--no-reload"],
        input=b"",
        capture_output=True,
        timeout=WAIT,
    )
    assert (piped.returncode, piped.stderr) == (0, b"")  # started by a client: nothing on stderr


INSPECTOR = REPO / ".venv" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


@pytest.mark.slow
@pytest.mark.skipif(not INSPECTOR.exists(), reason="the MCP Inspector is installed by `make .venv/.test`")
def test_the_inspector_serves_a_config_named_after_the_separator_as_documented(project: Project) -> None:
    project.tool("greet.py", GREET)
    project.configure(["greet.py"])
    page = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    documented = "npx @modelcontextprotocol/inspector --cli --method tools/list -- toolexec --config /path/to/config.yaml mcp"
    assert documented in page
    server = [sys.executable, "-m", "toolexec", "--config", str(project.config), "mcp", "--no-reload"]
    done = subprocess.run(
        [str(INSPECTOR), "--cli", "--method", "tools/list", "--", *server], capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert done.returncode == 0, done.stderr
    assert [t["name"] for t in json.loads(done.stdout)["tools"]] == ["greet"]
    eaten = subprocess.run(
        [str(INSPECTOR), "--cli", *server, "--method", "tools/list"], capture_output=True, text=True, timeout=120
    )
    assert "--config cannot be combined" in eaten.stdout + eaten.stderr  # why the separator is needed


def test_the_documented_cwd_and_oauth_settings_load(project: Project) -> None:
    from toolexec.config import load_config

    snippets = [b.split("```", 1)[0] for b in (REPO / "docs" / "mcp.md").read_text(encoding="utf-8").split("```yaml\n")[1:]]
    auth = next(yaml.safe_load(s) for s in snippets if "jwks_uri" in s)
    project.configure([], **auth)
    loaded = load_config(project.config).mcp.auth
    assert loaded is not None
    assert (loaded.audience, loaded.required_scopes) == ("https://tools.example.com/mcp", ("mcp:tools",))
