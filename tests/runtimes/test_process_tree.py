"""Nothing a tool starts outlives its call: groups, escaped sessions, timeouts, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import ESCAPES, alive, read_pid, wait_until

# Every test here runs twice: through the Linux backend and through the portable one, unconfined (the process
# helper's own search: see the fixture).
pytestmark = [pytest.mark.usefixtures("process_backend", "unconfined"), pytest.mark.launch_modes]  # cold and warm calls

LEAVES_CHILD = """#!/usr/bin/env bash
# @describe Start a child that ignores SIGTERM and keeps our stdout open, then return.
main() {
    bash -c 'trap "" TERM; echo $$ > "$LLM_TOOL_CACHE_DIR/child.pid"; exec sleep 1000' &
    while [ ! -s "$LLM_TOOL_CACHE_DIR/child.pid" ]; do :; done
    echo "started" >>"$LLM_OUTPUT"
}
"""


def test_background_child_in_the_group_is_killed(project: Project) -> None:
    project.tool("leaves.sh", LEAVES_CHILD)
    result = project.executor().call("leaves", {})
    assert (result.ok, result.output) == (True, "started\n")
    assert not alive(read_pid(project.root / "functions" / "cache" / "leaves" / "child.pid"))


def test_escaped_grandchild_is_killed_after_a_normal_return(project: Project) -> None:
    """Under ``sandbox: off`` (this module's), cold and warm alike: the escapee (a bare fork, then setsid: it runs no
    program, so a warm one shows its server's environment, where the call's process wrote the call's marker) is
    found after the tool returned, killed and counted. Under the baseline the kernel ends it with the call's PID
    namespace and no note says so, cold or warm (tests/runtimes/test_baseline.py)."""
    project.tool("escapes.py", ESCAPES)
    result = project.executor().call("escapes", {"then_wait": False})
    assert (result.ok, result.output) == (True, "returned")
    assert result.notes == ("killed 1 process(es) the tool left running outside its process group",)
    assert not alive(read_pid(project.root / "functions" / "cache" / "escapes" / "escaped.pid"))


def test_timeout_kills_the_whole_tree_and_keeps_partial_output(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    result = project.executor().call("escapes", {}, timeout=2)
    assert (result.ok, result.status, result.exit_code) == (False, "timeout", 124)
    assert result.tool_call_error == "Tool call 'escapes' timed out after 2s"
    assert result.output == "partial output\n"
    assert result.signal == signal.SIGKILL  # it ignored SIGTERM, so the grace period ended in SIGKILL
    assert not alive(read_pid(project.root / "functions" / "cache" / "escapes" / "escaped.pid"))


def test_sigterm_to_toolexec_cancels_and_still_prints_a_result(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    config = project.configure()
    pid_file = project.root / "functions" / "cache" / "escapes" / "escaped.pid"
    child = subprocess.Popen(
        [sys.executable, "-m", "toolexec", "--config", str(config), "run", "escapes", "{}", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def ready() -> bool:  # the tool has printed and ignores SIGTERM
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        return pid_file.with_suffix(".pid.ready").exists()

    wait_until(ready, "the tool to be ready")
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=60)
    result = json.loads(out)
    assert (child.returncode, result["status"], result["exit_code"]) == (130, "cancelled", 130)
    assert result["tool_call_error"] == "Tool call 'escapes' was cancelled"
    assert not alive(read_pid(pid_file))


def test_an_exception_inside_the_loop_leaks_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from toolexec.runtimes import process

    def explode(self: process.Capture, data: bytes) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(process.Capture, "add", explode)
    descriptors, threads = sorted(os.listdir("/proc/self/fd")), threading.enumerate()
    launch = process.Launch(
        argv=["bash", "-c", "echo $$ > pid; echo out; exec sleep 1000"], env=dict(os.environ), cwd=str(tmp_path)
    )
    with pytest.raises(RuntimeError, match="injected"):
        process.run_process(launch)
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert threading.enumerate() == threads  # the portable backend's waiting thread is joined
    assert not alive(read_pid(tmp_path / "pid"))


def test_a_cancel_inside_a_cancel_on_the_same_thread_returns() -> None:
    """A signal handler that cancels can interrupt the thread inside cancel() itself (a second signal during the
    first one's handler); the call runs on that thread now, so the control's lock must be re-entrant."""
    from toolexec.runtimes.process import CallControl

    control = CallControl()
    done = threading.Event()

    def nested() -> None:
        with control._lock:  # where an interrupted cancel() holds it
            control.cancel()
        done.set()

    worker = threading.Thread(target=nested, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert done.is_set() and control.cancelled
    control.close()


def test_an_escapee_killed_at_a_timeout_is_not_left_a_zombie_of_this_process(project: Project) -> None:
    """A warm call's escapee is killed while the call that left it still runs; it comes here (the subreaper) only once
    that call has ended, and must be collected then, not left a zombie."""
    project.tool("escapes.py", ESCAPES)
    with project.executor() as executor:
        assert executor.call("escapes", {}, timeout=2).status == "timeout"
    escapee = read_pid(project.root / "functions" / "cache" / "escapes" / "escaped.pid")
    try:
        fields = Path(f"/proc/{escapee}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        fields = ["gone", "0"]
    assert not (fields[0] == "Z" and int(fields[1]) == os.getpid())
