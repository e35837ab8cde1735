"""Calls on Celery workers (``toolexec.celery``): a real Redis broker (Debian's ``redis-server`` on loopback) and
two real workers; results as local calls return them, and no tool process outlives a killed worker or a timeout."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from toolexec import Executor

celery = pytest.importorskip("celery")
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
pytestmark = [
    pytest.mark.skipif(not os.path.exists(REDIS), reason="needs redis-server (Debian's package; make .venv/.test installs it)"),
    pytest.mark.slow,
]
WAIT = 60.0

ECHO = '#!/usr/bin/env bash\n# @describe Echo.\n# @option --text! The text.\nmain() {\n    printf "%s" "$argc_text" >>"$LLM_OUTPUT"\n}\n'
NAP = """#!/usr/bin/env bash
# @describe Start a child, note both pids, then wait.
# @meta idempotent
# @option --pids! Where to write the pids.
main() {
    sleep 300 &
    printf '%s %s\\n' "$$" "$!" > "$argc_pids.tmp"
    mv "$argc_pids.tmp" "$argc_pids"
    wait
}
"""
APP = """
import os
from celery import Celery
from toolexec.celery import register

app = Celery("tools", broker=os.environ["TEST_BROKER"], backend=os.environ["TEST_BROKER"])
app.conf.update(
    worker_prefetch_multiplier=1,
    result_extended=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
register(app, config=os.environ["TEST_TOOLEXEC_CONFIG"])
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(check: Any, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    assert wait_until(listening, 10)
    yield f"redis://127.0.0.1:{port}/0"
    server.terminate()
    server.wait(timeout=10)


class Workers:
    """Two ``celery worker`` processes (prefork, one child each) serving the app in ``APP``."""

    def __init__(self, root: Path, broker: str, config: Path) -> None:
        (root / "tools_app.py").write_text(APP)
        self.env = {**os.environ, "TEST_BROKER": broker, "TEST_TOOLEXEC_CONFIG": str(config), "PYTHONPATH": str(root)}
        self.logs = [(root / f"worker{i}.log").open("w") for i in (1, 2)]
        self.procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "tools_app",
                    "worker",
                    "--pool=prefork",
                    "--concurrency=1",
                    "-n",
                    f"w{i}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "-l",
                    "WARNING",
                ],
                cwd=root,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            for i, log in zip((1, 2), self.logs, strict=True)
        ]
        sys.path.insert(0, str(root))
        os.environ.update({"TEST_BROKER": broker, "TEST_TOOLEXEC_CONFIG": str(config)})
        import tools_app

        self.app = tools_app.app
        assert wait_until(lambda: len(self.app.control.ping(timeout=0.5) or []) == 2), "the workers did not start"

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self.logs:
            log.close()
        sys.path.remove(str(self.logs[0].name.rsplit("/", 1)[0]))
        sys.modules.pop("tools_app", None)
        for name in ("TEST_BROKER", "TEST_TOOLEXEC_CONFIG"):
            os.environ.pop(name, None)


@pytest.fixture
def workers(project: Project, redis: str) -> Iterator[Workers]:
    project.tool("echo.sh", ECHO)
    project.tool("nap.sh", NAP)
    running = Workers(project.root, redis, project.configure())
    yield running
    running.stop()


def comparable(result: Any) -> dict[str, Any]:
    return {k: v for k, v in result.to_dict().items() if k not in ("duration_ms", "tool_call_id")}


def test_fifty_calls_through_two_workers_match_local_calls(project: Project, workers: Workers) -> None:
    from toolexec.celery import submit

    arguments = [{"text": f"call {i} " + "x" * i} for i in range(48)] + [{}, {"text": 5}]
    sent = [submit(workers.app, "echo", a, call_id=f"c{i}") for i, a in enumerate(arguments)]
    remote = [call.get(timeout=WAIT) for call in sent]
    with Executor(project.config) as ex:
        local = [ex.call("echo", a, call_id=f"c{i}") for i, a in enumerate(arguments)]
    assert [comparable(r) for r in remote] == [comparable(r) for r in local]
    assert [r.tool_call_id for r in remote] == [f"c{i}" for i in range(50)]
    assert (remote[0].output, remote[48].reason) == ("call 0 ", "invalid_arguments")
    assert {call.async_result.worker.split("@")[0] for call in sent} == {"w1", "w2"}  # both workers took calls


def test_a_killed_worker_leaves_no_tool_process(project: Project, workers: Workers) -> None:
    from toolexec.celery import submit

    pids = project.root / "pids"
    submit(workers.app, "nap", {"pids": str(pids)}, idempotent=False)
    assert wait_until(pids.exists), "the tool did not start"
    tool, child = (int(p) for p in pids.read_text().split())
    worker_child = int(Path(f"/proc/{tool}/stat").read_text().rsplit(")", 1)[1].split()[1])  # the tool's parent
    assert worker_child in {c for p in workers.procs for c in _children(p.pid)}
    os.kill(worker_child, signal.SIGKILL)
    assert wait_until(lambda: not alive(tool) and not alive(child), 15), "a tool process outlived its worker"


def _children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(c) for c in (task / "children").read_text().split()}
    return found


def test_a_timeout_on_the_worker_kills_the_tree(project: Project, workers: Workers) -> None:
    from toolexec.celery import CALL_IDEMPOTENT, submit

    pids = project.root / "pids"
    with Executor(project.config) as ex:
        call = submit(workers.app, "nap", {"pids": str(pids)}, timeout=1.0, executor=ex)  # idempotent: by its annotation
    result = call.get(timeout=WAIT)
    assert (result.status, result.reason) == ("timeout", "timeout")
    tool, child = (int(p) for p in pids.read_text().split())
    assert not alive(tool) and not alive(child)
    assert call.async_result.name == CALL_IDEMPOTENT
