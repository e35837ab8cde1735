"""The starter thread (toolexec.runtimes.starter): a process meant to outlive its caller's thread does, even under a
death signal that follows the thread that started it (bwrap's --die-with-parent is PR_SET_PDEATHSIG)."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from tests.helpers import alive
from toolexec.runtimes import baseline, sandbox
from toolexec.runtimes.starter import lasting

pytestmark = pytest.mark.skipif(not baseline.usable(), reason="needs bwrap's PID namespace (as a warm server's)")


def _sleeper() -> subprocess.Popen[bytes]:
    """A process started as an isolated warm server is: bwrap's PID namespace, --die-with-parent."""
    binary = sandbox.bwrap()
    assert binary is not None
    return subprocess.Popen([*baseline._namespaces(binary), "sleep", "60"])


def _started_on_a_thread_that_ends(start: object) -> subprocess.Popen[bytes]:
    started: list[subprocess.Popen[bytes]] = []

    def starts() -> None:
        started.append(start())  # type: ignore[operator]
        time.sleep(0.3)  # as a caller that waits for its server to load: bwrap has set its death signal by then

    thread = threading.Thread(target=starts)
    thread.start()
    thread.join(10)
    return started[0]


def _alive_after_a_while(proc: subprocess.Popen[bytes]) -> bool:
    time.sleep(0.3)  # the death signal comes at once when the thread ends: long enough for bwrap to die of it
    return alive(proc.pid)


def test_a_process_started_through_the_starter_outlives_the_calling_thread() -> None:
    proc = _started_on_a_thread_that_ends(lambda: lasting(_sleeper))
    try:
        assert _alive_after_a_while(proc)
    finally:
        proc.kill()
        proc.wait()


def test_without_it_the_process_dies_with_the_thread() -> None:
    """The control: what the starter is for (so the test above can fail)."""
    proc = _started_on_a_thread_that_ends(_sleeper)
    try:
        assert not _alive_after_a_while(proc)
    finally:
        proc.kill()
        proc.wait()


def test_what_the_start_raises_is_raised_to_the_caller() -> None:
    def fails() -> None:
        raise OSError(2, "No such file or directory")

    with pytest.raises(OSError, match="No such file"):
        lasting(fails)
    assert lasting(lambda: 42) == 42  # the thread goes on serving
