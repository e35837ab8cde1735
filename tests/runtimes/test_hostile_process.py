"""Hostile tools against the process tree: nothing escapes or outlives a call (issue 10).

Every row runs through both process backends where the backend can do it; after each: no
process of the call alive, no descriptor and no temporary file left.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import boot_clock, close_warm, in_pid_namespace, marked_processes, wait_until, zombies_of
from toolexec.runtimes import baseline

# The process helper's own search (see the fixture); every call here runs cold, then warm (tests/conftest.py).
pytestmark = [pytest.mark.usefixtures("unconfined"), pytest.mark.launch_modes]

SETSID_ENV_I = """# @describe Leave a child in its own session with an empty environment.
main() {
    readlink /proc/self/ns/pid >"$LLM_TOOL_CACHE_DIR/ns"
    setsid env -i /bin/sh -c 'echo $$ > "$0"; trap "" TERM HUP; exec sleep 1000' "$LLM_TOOL_CACHE_DIR/pid" &
    while [ ! -s "$LLM_TOOL_CACHE_DIR/pid" ]; do :; done
    echo started >>"$LLM_OUTPUT"
}
"""
FORKER = """# @describe Leave an escapee that keeps forking sleepers, with an empty environment.
main() {
    readlink /proc/self/ns/pid >"$LLM_TOOL_CACHE_DIR/ns"
    setsid env -i /bin/bash -c 'echo $$ > "$0"; while :; do (sleep 1000 &) ; done' "$LLM_TOOL_CACHE_DIR/pid" &
    while [ ! -s "$LLM_TOOL_CACHE_DIR/pid" ]; do :; done
    echo started >>"$LLM_OUTPUT"
}
"""
DAEMON = """# @describe Double-fork a daemon into its own session, then return at once.
main() {
    readlink /proc/self/ns/pid >"$LLM_TOOL_CACHE_DIR/ns"
    ( setsid env -i /bin/sh -c 'echo $$ > "$0"; exec sleep 1000' "$LLM_TOOL_CACHE_DIR/pid" & )
    while [ ! -s "$LLM_TOOL_CACHE_DIR/pid" ]; do :; done
    echo started >>"$LLM_OUTPUT"
}
"""
THREAD = '''import threading, time

def run() -> str:
    """Return while a non-daemon thread sleeps on.

    Timeout: 60
    """
    threading.Thread(target=time.sleep, args=(1000,)).start()
    return "returned"
'''
TIMER_JS = """/**
 * Return while a timer is pending.
 * @timeout 60
 */
export function run() {
  setTimeout(() => {}, 1000000);
  return "returned";
}
"""
EXIT_THREAD = '''import sys, threading, time

def run() -> str:
    """Exit with 3 while a non-daemon thread sleeps on.

    Timeout: 60
    """
    threading.Thread(target=time.sleep, args=(1000,)).start()
    sys.exit(3)
'''


def everyone(root: Path) -> list[int]:
    """Live processes whose pid one of the tools wrote, or that have them as an ancestor's session."""
    pids = []
    for pid_file in root.rglob("pid"):
        pid = int(pid_file.read_text().strip())
        pids.append(pid)
        for name in os.listdir("/proc"):
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] not in ("Z", "X") and int(fields[3]) == pid:  # in the escapee's session
                pids.append(int(name))
    return [pid for pid in pids if _alive(pid)]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


# No marker left to find them by, nor anything else to tell them from the host's own: only the baseline's PID
# namespace ends them (the kernel does, through either backend), and their pids are the namespace's.
NAMESPACED = {"setsid-env-i", "keeps-forking", "double-fork-daemon"}
ROWS = [
    ("setsid-env-i", "escape.sh", SETSID_ENV_I, "ok", 0, "started\n"),
    ("keeps-forking", "forker.sh", FORKER, "ok", 0, "started\n"),
    ("double-fork-daemon", "daemon.sh", DAEMON, "ok", 0, "started\n"),
    ("python-non-daemon-thread", "thread.py", THREAD, "ok", 0, "returned"),
    ("javascript-pending-timer", "timer.js", TIMER_JS, "ok", 0, "returned"),
    ("python-sys-exit-with-thread", "exits.py", EXIT_THREAD, "error", 3, ""),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r[0])
def test_nothing_outlives_the_call(row: tuple, project: Project, private_tmpdir: Path, process_backend: str) -> None:
    case, file, source, status, code, output = row
    if case in NAMESPACED and not baseline.usable():
        pytest.skip("needs a PID namespace for the baseline (bwrap and user namespaces)")
    project.tool(file, source)
    executor = project.executor(sandbox="declared" if case in NAMESPACED else "off")
    executor.build()
    gc.collect()  # an earlier test's garbage (its descriptors) is not closed by a collection during this call
    descriptors = sorted(os.listdir("/proc/self/fd"))
    zombies = zombies_of()  # (an earlier test's, if any: this call must add none)
    result = executor.call(file.split(".")[0], {})
    returned = boot_clock()
    assert (result.status, result.exit_code, result.output) == (status, code, output), result.error
    if case in NAMESPACED:
        namespace = (project.root / "functions" / "cache" / file.split(".")[0] / "ns").read_text().strip()
        assert namespace != os.readlink("/proc/self/ns/pid")
        assert in_pid_namespace(namespace, started_before=returned) == []
    else:
        assert everyone(project.root) == []
    close_warm(executor)  # its warm servers (and their spares) live until the executor closes: then nothing is left
    assert marked_processes(private_tmpdir) == []
    assert zombies_of() - zombies == set()
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert os.listdir(private_tmpdir) == []


SLEEPER = '''import os, time

def run() -> str:
    """Write our pid, then sleep."""
    with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "pid.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "pid.tmp"), os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "pid"))
    time.sleep(1000)
'''


def _start_cli(project: Project) -> tuple[subprocess.Popen[str], Path]:
    project.tool("sleeper.py", SLEEPER)
    config = project.configure()
    pid_file = project.root / "functions" / "cache" / "sleeper" / "pid"
    child = subprocess.Popen(
        [sys.executable, "-m", "toolexec", "--config", str(config), "run", "sleeper", "{}", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def started() -> bool:
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        return pid_file.exists()

    wait_until(started, "the tool to write its pid")
    return child, pid_file


@pytest.mark.parametrize("sig", ["SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGINT", "SIGTERM"])
def test_every_terminating_signal_cancels(sig: str, project: Project, private_tmpdir: Path) -> None:
    child, pid_file = _start_cli(project)
    child.send_signal(getattr(signal, sig))
    out, _ = child.communicate(timeout=60)
    result = json.loads(out)
    assert (child.returncode, result["status"], result["tool_call_error"]) == (
        130,
        "cancelled",
        "Tool call 'sleeper' was cancelled",
    )
    assert not _alive(int(pid_file.read_text()))
    assert os.listdir(private_tmpdir) == []


def test_a_tool_dies_with_a_toolexec_killed_by_sigkill(project: Project, private_tmpdir: Path) -> None:
    child, pid_file = _start_cli(project)
    pid = int(pid_file.read_text())
    child.kill()
    child.communicate(timeout=60)
    deadline = __import__("time").monotonic() + 30
    while _alive(pid) and __import__("time").monotonic() < deadline:
        os.sched_yield()
    assert not _alive(pid)
