"""Tasks across replicas: two ``toolexec mcp --http`` instances behind nginx (docs/scale-out.md) sharing a task store,
once a directory and once a real Redis. A task started on one instance is polled and its result fetched through the
other; another is cancelled through the other and its whole tree ends on the first (read from /proc); a 2026-07-28
SDK client polls its task through nginx, whichever instance answers; an instance with another token, sharing the
store, finds none of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from tests.conftest import Project
from tests.executor.tasks_client import TasksExtension, free_port, redis_server
from tests.executor.test_scale_out import NGINX_CONF, mcp_http_available, nginx, wait_for_port
from tests.helpers import alive, host_pids, wait_until

pytestmark = pytest.mark.slow
TOKEN = "a-token-of-the-fleet"
OTHER = "a-token-of-someone-else"
SLOW = '''
import os, time

def run(seconds: float) -> str:
    """Sleep, then say which instance ran it.

    Task: optional

    Args:
        seconds: How long to sleep.
    """
    time.sleep(seconds)
    return f"slept {seconds} on {os.environ['TOOLEXEC_INSTANCE']}"
'''
TREE = '''
import os, subprocess, time

def run(pid_file: str) -> str:
    """Run long with a grandchild; record both pids.

    Task: required

    Args:
        pid_file: Where to write the pids.
    """
    child = subprocess.Popen(["sleep", "300"])
    with open(pid_file + ".tmp", "w") as out:
        out.write(f"{os.readlink('/proc/self/ns/pid')} {os.getpid()} {child.pid}")
    os.rename(pid_file + ".tmp", pid_file)
    time.sleep(300)
    return "woke"
'''


class Fleet:
    """The ports: ``front`` (nginx), ``first`` and ``second`` (the instances), ``stranger`` (another token)."""

    def __init__(self, front: int, first: int, second: int, stranger: int, processes: list[subprocess.Popen[bytes]]) -> None:
        self.front, self.first, self.second, self.stranger = front, first, second, stranger
        self.processes = processes  # the instances (first, second, stranger), then nginx


@pytest.fixture(params=["dir", "redis"])
def fleet(request: pytest.FixtureRequest, project: Project, tmp_path: Path) -> Iterator[Fleet]:
    if not mcp_http_available():
        pytest.skip("`toolexec mcp --http` does not exist")
    program = nginx()
    if program is None:
        if os.environ.get("CI"):
            pytest.fail("nginx is missing: `make test` installs Debian's nginx")
        pytest.skip("nginx is not installed (`make .venv/.nginx` installs it)")
    with redis_server(tmp_path) if request.param == "redis" else contextlib.nullcontext() as url:
        store = url or "dir:shared-tasks"  # relative to the config file: the volume the replicas share
        project.tool("slow.py", SLOW)
        project.tool("tree.py", TREE)
        config = project.configure(["slow.py", "tree.py"])
        data = yaml.safe_load(config.read_text())
        data["mcp"] = {"task_store": store}
        config.write_text(yaml.safe_dump(data))
        ports = [free_port() for _ in range(4)]
        processes: list[subprocess.Popen[bytes]] = []
        try:
            for n, port in enumerate(ports[1:]):
                token = OTHER if n == 2 else TOKEN
                env = {**os.environ, "TOOLEXEC_INSTANCE": f"instance-{n}", "TOOLEXEC_MCP_TOKEN": token}
                command = ["-m", "toolexec", "--config", str(config), "mcp", "--http", f"127.0.0.1:{port}"]
                with (tmp_path / f"instance-{n}.log").open("wb") as log:
                    processes.append(
                        subprocess.Popen(
                            [sys.executable, *command, "--token-env", "TOOLEXEC_MCP_TOKEN"],
                            env=env,
                            stdout=subprocess.DEVNULL,
                            stderr=log,
                        )
                    )
                wait_for_port(port, processes[-1])
            text = NGINX_CONF.read_text().replace("127.0.0.1:8001", f"127.0.0.1:{ports[1]}")
            text = text.replace("127.0.0.1:8002", f"127.0.0.1:{ports[2]}").replace(
                "listen 127.0.0.1:8000", f"listen 127.0.0.1:{ports[0]}"
            )
            runtime = tmp_path / "nginx"
            runtime.mkdir()
            prelude = f"daemon off;\nerror_log {runtime}/error.log;\npid {runtime}/nginx.pid;\nevents {{}}\n"
            conf = tmp_path / "nginx.conf"
            conf.write_text(prelude + f"http {{\naccess_log {runtime}/access.log;\nclient_body_temp_path {runtime};\n{text}}}\n")
            processes.append(subprocess.Popen([program, "-c", str(conf), "-p", str(runtime)], stderr=subprocess.DEVNULL))
            wait_for_port(ports[0], processes[-1])
            yield Fleet(*ports, processes)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(timeout=60)


def rpc(port: int, method: str, params: dict[str, Any] | None = None, *, token: str = TOKEN) -> dict[str, Any]:
    """One 2025-11-25 JSON-RPC request over Streamable HTTP (stateless: no session); the response object."""
    import httpx2

    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, **({"params": params} if params is not None else {})}
    with httpx2.Client(timeout=120) as client:
        answer = client.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    if answer.headers.get("content-type", "").startswith("application/json"):
        return answer.json()  # type: ignore[no-any-return]
    (data,) = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return data  # type: ignore[no-any-return]


def test_a_task_is_polled_fetched_and_cancelled_through_another_instance(fleet: Fleet, tmp_path: Path) -> None:
    started = rpc(fleet.first, "tools/call", {"name": "slow", "arguments": {"seconds": 0.5}, "task": {"ttl": 60000}})
    task_id = started["result"]["task"]["taskId"]
    assert rpc(fleet.second, "tasks/get", {"taskId": task_id})["result"]["status"] in ("working", "completed")
    fetched = rpc(fleet.second, "tasks/result", {"taskId": task_id})["result"]
    assert fetched["content"] == [{"type": "text", "text": "slept 0.5 on instance-0"}]  # ran on the first instance
    assert fetched["_meta"] == {"io.modelcontextprotocol/related-task": {"taskId": task_id}}
    for port in (fleet.front, fleet.front, fleet.first):  # nginx alternates: either instance answers the same
        assert rpc(port, "tasks/get", {"taskId": task_id})["result"]["status"] == "completed"

    pid_file = tmp_path / "pids"
    tree = rpc(fleet.first, "tools/call", {"name": "tree", "arguments": {"pid_file": str(pid_file)}, "task": {}})
    tree_id = tree["result"]["task"]["taskId"]
    pids = written_pids(pid_file)
    assert all(alive(pid) for pid in pids)

    for method in ("tasks/get", "tasks/cancel", "tasks/result"):  # another token, the same store: no such task
        refused = rpc(fleet.stranger, method, {"taskId": tree_id}, token=OTHER)
        assert refused["error"]["code"] == -32602 and "Task not found" in refused["error"]["message"]
    assert rpc(fleet.stranger, "tasks/list", token=OTHER)["result"]["tasks"] == []
    assert all(alive(pid) for pid in pids)

    cancelled = rpc(fleet.second, "tasks/cancel", {"taskId": tree_id})["result"]
    assert cancelled["taskId"] == tree_id
    wait_until(lambda: not any(alive(pid) for pid in pids), "the cancelled task's tree ended on the first instance")
    wait_until(lambda: rpc(fleet.front, "tasks/get", {"taskId": tree_id})["result"]["status"] == "cancelled", "cancelled")
    assert [t["taskId"] for t in rpc(fleet.second, "tasks/list")["result"]["tasks"]] == [task_id, tree_id]


def written_pids(path: Path) -> list[int]:
    """The pids the tree tool wrote, as this process knows them (the tool may run in a PID namespace of its own)."""
    namespace, *pids = wait_until_text(path).split()
    return host_pids(namespace, [int(pid) for pid in pids])


def wait_until_text(path: Path) -> str:
    wait_until(lambda: path.exists() and path.read_text(), f"{path} written")
    return path.read_text()


def test_a_2026_client_polls_its_task_through_nginx(fleet: Fleet) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def scenario() -> tuple[list[str], list[str]]:
        extension = TasksExtension()
        async with (
            httpx2.AsyncClient(timeout=httpx2.Timeout(120.0), headers={"Authorization": f"Bearer {TOKEN}"}) as session,
            Client(
                streamable_http_client(f"http://127.0.0.1:{fleet.front}/mcp", http_client=session),
                mode="2026-07-28",
                extensions=[extension],
            ) as client,
        ):
            answers = []
            for _ in range(4):
                result = await client.call_tool("slow", {"seconds": 0.3})
                answers.append("".join(c.text for c in result.content if c.type == "text"))
            return answers, extension.created

    answers, created = anyio.run(scenario)
    # Each call is the tools/call and at least one tasks/get (the tool outlasts the first poll interval): nginx's
    # round robin sends the poll to the other instance than the call, whichever that was.
    assert len(created) == 4
    assert {a.rsplit(" on ", 1)[0] for a in answers} == {"slept 0.3"}
    assert {a.rsplit(" ", 1)[1] for a in answers} <= {"instance-0", "instance-1"}


def test_the_tasks_of_an_instance_that_died_are_reported_failed_by_another(fleet: Fleet, tmp_path: Path) -> None:
    """SIGKILL the instance running a task: its tool's tree ends (the parent-death guard) and the other instance,
    seeing the dead one's heartbeat gone from the store, answers the task as failed."""
    import signal

    pid_file = tmp_path / "pids"
    tree = rpc(fleet.first, "tools/call", {"name": "tree", "arguments": {"pid_file": str(pid_file)}, "task": {}})
    task_id = tree["result"]["task"]["taskId"]
    pids = written_pids(pid_file)
    fleet.processes[0].send_signal(signal.SIGKILL)
    fleet.processes[0].wait(timeout=30)
    wait_until(lambda: not any(alive(pid) for pid in pids), "the dead instance's tool tree ended")
    wait_until(lambda: rpc(fleet.second, "tasks/get", {"taskId": task_id})["result"]["status"] == "failed", "failed", timeout=60)
    task = rpc(fleet.second, "tasks/get", {"taskId": task_id})["result"]
    assert task["statusMessage"] == "the toolexec mcp instance running this task stopped before it ended; start the call again"
    ended = rpc(fleet.second, "tasks/result", {"taskId": task_id})
    assert ended["error"]["code"] == -32603 and ended["error"]["message"] == task["statusMessage"]
