"""How the Linux backend finds a call's escapees: through this process's descendant tree while it is a
subreaper (a pass reads a few files however many processes the machine runs), through every process in
/proc where the subreaper or the kernel's children lists are missing. Either way the escapee dies, and a
process the host started itself never does, whenever it started.

These run unconfined (``sandbox: off``): a call in a PID namespace of its own loses its escapees to the kernel."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import alive, read_pid
from toolexec.records import ToolResult
from toolexec.runtimes import process, process_linux
from toolexec.runtimes.process import CallControl

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

# The escapee's parent (a subshell) exits at once: the escapee is re-parented here, in its own session, and found
# by the call's marker it still carries (one that also cleared its environment cannot be told from the host's own).
MARKED_DAEMON = """# @describe Double-fork a daemon into its own session, then return.
main() {
    ( setsid /bin/sh -c 'echo $$ > "$0"; exec sleep 1000' "$LLM_TOOL_CACHE_DIR/pid" & )
    while [ ! -s "$LLM_TOOL_CACHE_DIR/pid" ]; do :; done
    echo started >>"$LLM_OUTPUT"
}
"""
# The escapee's parent stays alive (deaf to TERM, in the tool's group) while the tool returns.
NESTED = """# @describe Leave a child in the group whose own child left for a session of its own.
main() {
    bash -c 'trap "" TERM; setsid env -i /bin/sh -c '"'"'echo $$ > "$0"; exec sleep 1000'"'"' "$0" & wait' "$LLM_TOOL_CACHE_DIR/pid" &
    while [ ! -s "$LLM_TOOL_CACHE_DIR/pid" ]; do :; done
    echo started >>"$LLM_OUTPUT"
}
"""


@pytest.fixture(autouse=True)
def linux_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    if not process_linux.available():
        pytest.skip("needs the Linux backend (pidfd and /proc)")
    monkeypatch.setenv(process.BACKEND_VARIABLE, "linux")


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every directory the backend lists during the test (the full scan lists /proc)."""
    seen: list[str] = []
    real = os.listdir

    def spy(path: str = ".") -> list[str]:
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", spy)
    return seen


@pytest.fixture
def host_child() -> Iterator[subprocess.Popen[bytes]]:
    """A child of the host's own, running through the call: it is not the call's and must outlive it."""
    child = subprocess.Popen(["sleep", "1000"])
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def _call(project: Project, file: str, source: str) -> int:
    """Run the tool in-process, unconfined; the pid its escapee wrote."""
    project.tool(file, source)
    with project.executor(sandbox="off") as executor:
        result = executor.call(file.split(".")[0], {})
    assert (result.status, result.exit_code, result.output) == ("ok", 0, "started\n"), result.error
    return read_pid(project.root / "functions" / "cache" / file.split(".")[0] / "pid")


@pytest.mark.parametrize(
    ("file", "source"), [("daemon.sh", MARKED_DAEMON), ("nested.sh", NESTED)], ids=["orphaned", "parent-alive"]
)
def test_with_the_subreaper_only_the_calls_own_subtrees_are_read_and_the_escapee_dies(
    project: Project, listed: list[str], host_child: subprocess.Popen[bytes], file: str, source: str
) -> None:
    escapee = _call(project, file, source)
    assert not alive(escapee)
    assert "/proc" not in listed  # no pass read every process of the machine
    assert f"/proc/{host_child.pid}/task" not in listed  # nor what is below the host's own child
    assert alive(host_child.pid)


def test_without_the_kernels_children_lists_the_full_scan_finds_the_orphan(
    project: Project, listed: list[str], host_child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process_linux, "_children_listed", False)
    escapee = _call(project, "daemon.sh", MARKED_DAEMON)
    assert not alive(escapee)
    assert "/proc" in listed
    assert alive(host_child.pid)


def test_without_the_subreaper_the_full_scan_finds_the_escapee_by_its_marker(
    project: Project, listed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process_linux, "_libc_prctl", lambda: None)
    escapee = _call(project, "marked.sh", MARKED_DAEMON)
    assert not alive(escapee)
    assert "/proc" in listed


def test_one_pass_finds_what_descends_from_the_calls_processes() -> None:
    """A process that left the group with an empty environment, its parent alive, is found below that parent
    (no marker, not an orphan: only the descent finds it) in the same pass."""
    tool = subprocess.Popen(
        ["/bin/sh", "-c", "setsid env -i /bin/sh -c 'echo $$; exec sleep 1000' & wait"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert tool.stdout is not None
    escapee = int(tool.stdout.readline())
    try:
        start = process_linux._stat(tool.pid).start
        found = process_linux._walk(b"TOOLEXEC_CALL_MARK=none", tool.pid, os.getpid(), start)
        assert found == ({tool.pid: False, escapee: True}, False)
    finally:
        os.kill(escapee, 9)
        tool.kill()
        tool.communicate()


def test_a_listing_that_skips_a_child_is_repaired_by_the_second_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel may skip one child when the child listed before it is reaped mid-listing."""
    listings = iter([{1}, {2}])
    monkeypatch.setattr(process_linux, "_task_children", lambda pid, tid: next(listings))
    assert process_linux._own_children(os.getpid()) == {1, 2}


def test_a_call_on_a_thread_of_its_own_finds_its_orphan_reading_two_threads_children(
    project: Project, host_child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server runs each call on a thread of its own, and an orphan goes to the main thread (the kernel's reaper is
    the process's first live thread). The call's search reads the children of the main thread and of its own thread,
    never those of the thread running another call meanwhile; the orphan dies, the host's child lives."""
    project.tool("daemon.sh", MARKED_DAEMON)
    project.tool("wait.sh", '# @describe Wait for its flag.\nmain() {\n    while [ ! -e "$0.go" ]; do sleep 0.01; done\n}\n')
    read: list[str] = []
    real = process_linux._read

    def spy(path: str, *, whole: bool = True) -> bytes:
        if path.endswith("/children"):
            read.append(path)
        return real(path, whole=whole)

    def call(name: str, control: CallControl | None = None) -> tuple[ToolResult, int]:
        return executor.call(name, {}, cancel=control), threading.get_native_id()

    monkeypatch.setattr(process_linux, "_read", spy)
    started = threading.Event()
    waiting = CallControl(on_event=lambda event: started.set() if event["event"] == "started" else None)
    with project.executor(sandbox="off") as executor, ThreadPoolExecutor(2) as threads:
        other = threads.submit(call, "wait", waiting)
        try:
            assert started.wait(60)
            result, thread = threads.submit(call, "daemon").result(timeout=60)
            searched = [path for path in read if path.startswith(f"/proc/{os.getpid()}/task/")]
        finally:
            (project.root / "functions" / "tools" / "wait.sh.go").touch()
        assert other.result(timeout=60)[0].status == "ok"
        waiting.close()
    assert (result.status, result.output) == ("ok", "started\n"), result.error
    assert not alive(read_pid(project.root / "functions" / "cache" / "daemon" / "pid"))
    assert alive(host_child.pid)
    assert {path.split("/")[4] for path in searched} == {str(os.getpid()), str(thread)}


def test_the_process_modules_import_no_ctypes_tempfile_or_shutil(tmp_path: Path) -> None:
    """A one-shot run imports them; what only a running call needs is imported when it runs."""
    import sys

    program = (
        "import sys\nimport toolexec.runtimes.process, toolexec.runtimes.process_linux\n"
        "print(sorted(m for m in ('ctypes', 'tempfile', 'shutil', 'random') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")


NAP = """# @describe Nap while the host starts a process of its own.
main() {
    sleep 0.5
    echo started >>"$LLM_OUTPUT"
}
"""


@pytest.mark.parametrize("search", ["walk", "scan"])
def test_a_child_the_host_starts_in_a_session_of_its_own_while_a_call_runs_is_not_the_calls(
    project: Project, monkeypatch: pytest.MonkeyPatch, search: str
) -> None:
    """The host's child starts in the tool's clock tick or after it, in a session of its own, re-parented nowhere:
    only its start time could make it look like the call's, and that is not enough."""
    if search == "scan":
        monkeypatch.setattr(process_linux, "_children_listed", False)
    project.tool("nap.sh", NAP)
    children: list[subprocess.Popen[bytes]] = []
    ticks: list[tuple[int, int]] = []

    def on_event(event: dict[str, object]) -> None:
        if event["event"] == "started":  # at once, from the call's own thread: the same tick as the tool, most often
            children.append(subprocess.Popen(["sleep", "1000"], start_new_session=True))
            ticks.append((process_linux._stat(int(str(event["pid"]))).start, process_linux._stat(children[0].pid).start))

    control = process.CallControl(on_event=on_event)
    try:
        with project.executor(sandbox="off") as executor:
            result = executor.call("nap", {}, cancel=control)
        assert (result.status, result.output) == ("ok", "started\n"), result.error
        assert len(children) == 1 and ticks[0][1] >= ticks[0][0]  # started no earlier than the call's tool
        assert alive(children[0].pid)
    finally:
        control.close()
        for child in children:
            child.kill()
            child.wait()


def test_killed_processes_are_waited_for_on_their_pidfds_not_by_reading_proc_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search's wait for what it killed is woken by the kernel: each victim's /proc entry is read once (is it
    alive?), and the wait returns with every victim ended (a zombie until reaped). Here they end only after that
    first look (killed by it), so a wait that looked again would read them again."""
    victims = [subprocess.Popen(["sleep", "1000"]) for _ in range(3)]
    looked: list[int] = []
    real = process_linux._stat

    def spy(pid: int) -> object:
        found = real(pid)
        looked.append(pid)
        if len(looked) == len(victims):  # every one seen alive: now they end, in the reverse order
            for victim in reversed(victims):
                os.kill(victim.pid, 9)
        return found

    try:
        monkeypatch.setattr(process_linux, "_stat", spy)
        process_linux._wait_gone({victim.pid: False for victim in victims}, time.monotonic() + 60)
        monkeypatch.undo()
        assert sorted(looked) == sorted(victim.pid for victim in victims)
        assert [process_linux._stat(victim.pid).state for victim in victims] == ["Z"] * 3
    finally:
        for victim in victims:
            victim.kill()
            victim.wait()
