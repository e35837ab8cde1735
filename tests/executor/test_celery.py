"""Calls on Celery workers (``toolexec.celery``): a real Redis broker (Debian's ``redis-server`` on loopback) and
two real workers; results as local calls return them, and no tool process outlives a killed worker or a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.executor.tasks_client import redis_server
from tests.helpers import alive, host_pids, in_pid_namespace, wait_until
from toolexec import Executor

celery = pytest.importorskip("celery")
pytestmark = pytest.mark.slow
WAIT = 60.0

ECHO = '#!/usr/bin/env bash\n# @describe Echo.\n# @option --text! The text.\nmain() {\n    printf "%s" "$argc_text" >>"$LLM_OUTPUT"\n}\n'
NAP = """#!/usr/bin/env bash
# @describe Start a child, note both pids, then wait.
# @meta idempotent
# @option --pids! Where to write the pids.
main() {
    sleep 300 &
    printf '%s %s %s\\n' "$(readlink /proc/self/ns/pid)" "$$" "$!" > "$argc_pids.tmp"
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


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path) as url:
        yield url


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
        wait_until(lambda: len(self.app.control.ping(timeout=0.5) or []) == 2, "both workers to answer a ping", WAIT)

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
    wait_until(pids.exists, "the tool to start", WAIT)
    tool, child = _pids(pids)
    # the worker's child running the call: the tool's parent, or (the call in a PID namespace of its own) an ancestor
    worker_children = {c for p in workers.procs for c in _children(p.pid)}
    worker_child = _parent(tool)
    while worker_child not in worker_children and worker_child > 1:
        worker_child = _parent(worker_child)
    assert worker_child in worker_children
    os.kill(worker_child, signal.SIGKILL)
    wait_until(lambda: not alive(tool) and not alive(child), "the tool's processes to end with their worker", 15)


def _pids(path: Path) -> tuple[int, int]:
    """The tool's pid and its child's, as this process knows them (the call may run in a PID namespace of its own)."""
    namespace, tool, child = path.read_text().split()
    found = host_pids(namespace, [int(tool), int(child)])
    return found[0], found[1]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


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
    namespace, tool, child = pids.read_text().split()
    if namespace == os.readlink("/proc/self/ns/pid"):
        assert not alive(int(tool)) and not alive(int(child))
    else:  # its processes ended with their namespace
        wait_until(lambda: in_pid_namespace(namespace) == [], "the kernel to end the call's namespace", 10)
    assert call.async_result.name == CALL_IDEMPOTENT
