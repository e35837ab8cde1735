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
NGINX_CONF = Path(__file__).resolve().parent.parent / "docs" / "scale-out.nginx.conf"
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

    mcp = pytest.importorskip("mcp")
    from mcp.client.streamable_http import streamablehttp_client

    port, project = fleet
    url = f"http://127.0.0.1:{port}/mcp"

    async def session_calls(count: int) -> tuple[list[str], list[str]]:
        async with streamablehttp_client(url) as (read, write, _), mcp.ClientSession(read, write) as session:
            await session.initialize()
            served = []
            for _ in range(count):
                result = await session.call_tool("whoami", {})
                served.append(result.content[0].text)
            tools = await session.list_tools()
            return served, [t.name for t in tools.tools]

    served: list[str] = []
    for _ in range(4):  # round robin: each new session may land on either instance
        calls, names = anyio.run(session_calls, 3)
        served += calls
        assert names == ["whoami"]
    assert set(served) == {"instance-0", "instance-1"}
    project.tool("added.sh", NOOP_SH.replace("Say which", "Also say which"))
    project.configure()
    seen = set()
    for _ in range(4):
        calls, names = anyio.run(session_calls, 1)
        seen.update(calls)
        assert names == ["added", "whoami"] or names == ["whoami", "added"]
    assert seen == {"instance-0", "instance-1"}


def test_the_documented_nginx_config_is_the_tested_one() -> None:
    page = (NGINX_CONF.parent / "scale-out.md").read_text(encoding="utf-8")
    shown = page.split("```nginx\n", 1)[1].split("```", 1)[0]
    tested = "".join(line for line in NGINX_CONF.read_text().splitlines(keepends=True) if not line.startswith("#"))
    assert shown == tested.lstrip("\n")
