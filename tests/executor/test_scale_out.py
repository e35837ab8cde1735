"""Scale-out: two stateless ``toolexec mcp --http`` instances behind nginx (docs/scale-out.md).

The test starts both instances and nginx on loopback, drives calls through nginx with the MCP
SDK client, and shows that both instances served calls and that a tool list change on disk
reaches the clients of both. It skips until ``toolexec mcp --http`` exists (another issue
adds the MCP server); nginx is Debian's package, installed by ``make test``.
"""

from __future__ import annotations

import json
import os
import shlex
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


TOKEN = "a-test-token-for-the-fleet"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "scale-out.md"


def documented_instances() -> list[list[str]]:
    """The commands starting the two instances, as docs/scale-out.md shows them (the token exported before)."""
    block = PAGE.read_text(encoding="utf-8").split("```sh\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    assert lines[0] == "export TOOLEXEC_MCP_TOKEN=$(openssl rand -hex 32)"
    return [shlex.split(line.removesuffix("&")) for line in lines[1:]]


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
        for n, (port, command) in enumerate(zip(ports, documented_instances(), strict=True)):
            env = {**os.environ, "TOOLEXEC_INSTANCE": f"instance-{n}", "TOOLEXEC_MCP_TOKEN": TOKEN}
            command = [arg.replace("/srv/tools/config.yaml", str(config)).replace(f":{8001 + n}", f":{port}") for arg in command]
            processes.append(
                subprocess.Popen([sys.executable, "-m", *command], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
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
            httpx2.AsyncClient(timeout=httpx2.Timeout(30.0), headers={"Authorization": f"Bearer {TOKEN}"}) as session,
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


def test_the_kubernetes_manifest_starts_and_serves_clients_by_the_service_name(project: Project, tmp_path: Path) -> None:
    """The container's arguments and environment, the Secret and the config.yaml of docs/scale-out.md, run as
    shown (the volume is the project folder, the port a free one): the instance starts, requires the token, and
    answers a client that names it by the Service's name."""
    import httpx2
    import yaml

    page = PAGE.read_text(encoding="utf-8")
    blocks = page.split("```yaml\n")[1:]
    config_text = next(b.split("```", 1)[0] for b in blocks if "allowed_hosts" in b)
    manifests = list(yaml.safe_load_all(next(b.split("```", 1)[0] for b in blocks if "kind: Deployment" in b)))
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    service = next(m for m in manifests if m["kind"] == "Service")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (env,) = container["env"]
    secret = env["valueFrom"]["secretKeyRef"]
    assert f"kubectl create secret generic {secret['name']} --from-literal={secret['key']}=" in page
    mount = container["volumeMounts"][0]["mountPath"]
    port = container["ports"][0]["containerPort"]
    assert service["spec"]["ports"][0]["targetPort"] == port
    # The command line as toolexec's own parser reads it, and the config as its own loader does.
    from toolexec.cli import _parser
    from toolexec.config import from_mapping

    assert container["command"] == ["toolexec"]
    parsed = _parser().parse_args(container["args"])
    assert (parsed.command, parsed.http, parsed.token_env, parsed.no_token) == ("mcp", f"0.0.0.0:{port}", None, False)
    assert Path(parsed.config).parent == Path(mount)
    read = from_mapping(yaml.safe_load(config_text), Path(parsed.config))
    assert read.mcp.token_env == env["name"]  # the token the Secret holds is the one the server requires
    assert {"toolexec", service["metadata"]["name"]} <= set(read.mcp.allowed_hosts)
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": port}

    project.tool("whoami.sh", NOOP_SH)
    (project.root / "config.yaml").write_text(config_text, encoding="utf-8")
    listen = free_port()
    args = [arg.replace(mount, str(project.root)).replace(f"0.0.0.0:{port}", f"0.0.0.0:{listen}") for arg in container["args"]]
    server = subprocess.Popen(
        [sys.executable, "-m", "toolexec", *args],
        env={**os.environ, env["name"]: TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(listen, server)
        host = {"Host": service["metadata"]["name"], "Accept": "application/json, text/event-stream"}
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        }
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        url = f"http://127.0.0.1:{listen}/mcp"
        with httpx2.Client(timeout=30) as client:
            probe = client.get(f"http://127.0.0.1:{listen}/healthz", headers={"Host": f"10.1.2.3:{port}"})  # the kubelet's
            assert (probe.status_code, probe.json()["ready"]) == (200, True)
            assert client.post(url, json=initialize, headers=host).status_code == 401
            authorized = {**host, "Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": "2025-11-25"}
            assert client.post(url, json=initialize, headers=authorized).status_code == 200
            listed = client.post(url, json=listing, headers=authorized)
        assert listed.status_code == 200
        (data,) = [json.loads(line[5:]) for line in listed.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        assert [tool["name"] for tool in data["result"]["tools"]] == ["whoami"]
    finally:
        server.terminate()
        assert server.wait(timeout=30) == 0
