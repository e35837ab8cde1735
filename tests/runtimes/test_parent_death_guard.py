"""The Linux backend's parent-death guard: one helper per process, told which tool groups are in flight, that kills
them when the process it guards is gone however it ended (end of file on its pipe). It replaces an exec of
``setpriv --pdeathsig`` per call; setpriv is used only where the guard cannot run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import alive, end_call, run_as_subreaper, start_call, wait_until
from toolexec.runtimes import process, process_linux

pytestmark = pytest.mark.usefixtures("unconfined")  # the process helper's own search: see the fixture

ECHO = '#!/usr/bin/env bash\n# @describe Echo.\n# @option --text The text.\nmain() {\n    printf "%s" "$argc_text" >>"$LLM_OUTPUT"\n}\n'


@pytest.fixture(autouse=True)
def linux_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    if not process_linux.available():
        pytest.skip("needs the Linux backend (pidfd and /proc)")
    monkeypatch.setenv(process.BACKEND_VARIABLE, "linux")


def test_the_guard_kills_the_groups_still_announced_when_its_writer_is_gone() -> None:
    guard = process_linux._start_guard()
    assert guard is not None
    withdrawn, announced = (subprocess.Popen(["sleep", "1000"], start_new_session=True) for _ in range(2))
    try:
        for line in (f"+ {withdrawn.pid}\n", f"+ {announced.pid}\n", f"- {withdrawn.pid}\n"):
            os.write(guard.fd, line.encode())
        os.close(guard.fd)  # what the end of the guarded process does
        assert guard.proc.wait(timeout=30) == 0
        assert announced.wait(timeout=30) == -signal.SIGKILL
        assert withdrawn.poll() is None
    finally:
        for proc in (withdrawn, announced):
            proc.kill()
            proc.wait()


def test_the_guard_kills_what_carries_a_call_s_marker_announced_before_its_spawn(tmp_path: Path) -> None:
    """``P MARK`` / ``F MARK PATH`` come before the spawn: a process dying before it names the tool's group still has
    the guard kill what carries the marker and remove the call's files; ``R MARK`` withdraws them."""
    guard = process_linux._start_guard()
    assert guard is not None
    pending, withdrawn = "a1" * 12, "b2" * 12
    files = {mark: tmp_path / f"toolexec-t-{mark[:4]}.out" for mark in (pending, withdrawn)}
    procs = {
        mark: subprocess.Popen(["sleep", "1000"], env={"PATH": os.environ["PATH"], process.MARKER: mark})
        for mark in (pending, withdrawn)
    }
    try:
        for mark, path in files.items():
            path.write_text("x")
            os.write(guard.fd, f"P {mark}\nF {mark} {path}\n".encode())
        os.write(guard.fd, f"R {withdrawn}\n".encode())
        os.close(guard.fd)  # what the end of the guarded process does
        assert guard.proc.wait(timeout=30) == 0
        assert procs[pending].wait(timeout=30) == -signal.SIGKILL
        assert (procs[withdrawn].poll(), files[pending].exists(), files[withdrawn].exists()) == (None, False, True)
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def test_withdrawing_a_group_withdraws_its_marker_s_lines_told_before_the_spawn(tmp_path: Path) -> None:
    """A call's files are told once, with its marker (``F MARK PATH``), before its spawn; ``+ PGID MARK`` links them to
    the group, so that ``- PGID`` withdraws the marker's lines too: a call that ended normally leaves the guard nothing
    to kill or remove. A call still in flight keeps both."""
    guard = process_linux._start_guard()
    assert guard is not None
    ended, running = "c3" * 12, "d4" * 12
    files = {mark: tmp_path / f"toolexec-t-{mark[:4]}.out" for mark in (ended, running)}
    groups = {mark: subprocess.Popen(["sleep", "1000"], start_new_session=True) for mark in (ended, running)}
    marked = {
        mark: subprocess.Popen(["sleep", "1000"], env={"PATH": os.environ["PATH"], process.MARKER: mark})
        for mark in (ended, running)
    }
    try:
        for mark, path in files.items():
            path.write_text("x")
            os.write(guard.fd, f"P {mark}\nF {mark} {path}\n+ {groups[mark].pid} {mark}\n".encode())
        os.write(guard.fd, f"- {groups[ended].pid}\n".encode())
        os.close(guard.fd)
        assert guard.proc.wait(timeout=30) == 0
        assert (groups[running].wait(timeout=30), marked[running].wait(timeout=30)) == (-signal.SIGKILL, -signal.SIGKILL)
        assert (groups[ended].poll(), marked[ended].poll()) == (None, None)
        assert (files[ended].exists(), files[running].exists()) == (True, False)
    finally:
        for proc in (*groups.values(), *marked.values()):
            proc.kill()
            proc.wait()


def test_the_guard_reads_what_it_is_told_in_blocks_not_a_byte_at_a_time() -> None:
    """A shell reads a socket one byte per read(2): ~450 system calls per call, the guard's whole cost. Its reader
    takes what has come in one read (the kernel counts them: ``/proc/PID/io``'s ``syscr``)."""
    import fcntl
    import struct
    import termios

    guard = process_linux._start_guard()
    assert guard is not None
    try:
        marks = [f"{n:024x}" for n in range(100)]
        told = "".join(f"P {mark}\nF {mark} /nonexistent/toolexec-t-{mark}.out\n" for mark in marks).encode()
        assert os.write(guard.fd, told) == len(told)

        def unread() -> int:  # what the guard has not read yet of what was sent (SIOCOUTQ)
            return int(struct.unpack("i", fcntl.ioctl(guard.fd, termios.TIOCOUTQ, b"\0" * 4))[0])

        wait_until(lambda: unread() == 0, "the guard to read what it was told")
        io = dict(line.split(": ") for line in Path(f"/proc/{guard.proc.pid}/io").read_text().splitlines())
        assert len(told) > 8000 and int(io["syscr"]) < 100, io
    finally:
        os.close(guard.fd)
        guard.proc.wait(timeout=30)


def test_where_the_guard_has_no_reader_no_guard_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without awk a started guard would hold its socket and do nothing at the end: none is started (then setpriv)."""
    monkeypatch.setattr(process_linux, "GUARD_PATH", str(tmp_path))
    assert process_linux._start_guard() is None


SLEEPER = """# @describe Say its pid, then wait.
# @option --ready! A file to write the pid to.
main() {
    echo $$ >"$argc_ready.tmp" && mv "$argc_ready.tmp" "$argc_ready"
    sleep 1000
}
"""


def test_a_toolexec_killed_between_the_spawn_and_naming_the_tool_s_group_leaves_nothing(
    project: Project, private_tmpdir: Path, tmp_path: Path
) -> None:
    """The tool is spawned in a session of its own; the process that spawned it dies before it tells the guard the
    tool's group. The guard knew the call's marker and files since before the spawn: neither is left."""
    import json
    import sys
    import textwrap

    from tests.helpers import marked_processes

    project.tool("sleeper.sh", SLEEPER)
    config = project.configure()
    ready = tmp_path / "ready"
    script = textwrap.dedent(f"""
        import os, signal, time
        from pathlib import Path
        from toolexec import Executor
        from toolexec.runtimes import process_linux

        def register(*args, **kwargs):  # dies where a SIGKILL could land: the tool started, its group not yet told
            while not Path({str(ready)!r}).exists():
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)

        process_linux.register = register
        Executor(config={str(config)!r}).call("sleeper", {json.dumps({"ready": str(ready)})})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        assert proc.wait(timeout=60) == -signal.SIGKILL
        tool = int(ready.read_text())
        wait_until(lambda: not alive(tool), "the guard to kill the tool whose group it was never told")
        wait_until(lambda: not marked_processes(private_tmpdir), "every process of the call to be gone")
        wait_until(
            lambda: not [p for p in private_tmpdir.iterdir() if p.name.startswith("toolexec-sleeper-")],
            "the guard to remove the call's files",
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_call_runs_its_tool_without_an_exec_of_setpriv_and_the_guard_survives_it(project: Project) -> None:
    process_linux.ensure_guard()
    guard = process_linux._guard
    assert guard is not None
    assert process_linux.with_death_signal(["/bin/true"]) == ["/bin/true"]
    project.tool("echo.sh", ECHO)
    with project.executor() as executor:
        results = [executor.call("echo", {"text": str(n)}).output for n in range(3)]
    assert (results, process_linux._guard, alive(guard.proc.pid)) == (["0", "1", "2"], guard, True)


def test_a_guard_that_was_killed_is_replaced_by_the_next_call(project: Project) -> None:
    process_linux.ensure_guard()
    old = process_linux._guard
    assert old is not None
    project.tool("echo.sh", ECHO)
    executor = project.executor()
    executor.build()
    descriptors = len(os.listdir("/proc/self/fd"))
    old.proc.kill()
    old.proc.wait()
    result = executor.call("echo", {"text": "x"})
    new = process_linux._guard
    assert (result.output, new is not None and new.proc.pid != old.proc.pid) == ("x", True)
    assert new is not None and alive(new.proc.pid)
    assert len(os.listdir("/proc/self/fd")) == descriptors  # the dead guard's pipe was released for the new one's


def test_ensure_guard_replaces_a_guard_that_was_killed_holding_as_many_descriptors(project: Project) -> None:
    """A host (or a test) that compares its descriptors around a call starts the guard first: one killed meanwhile is
    replaced then, so the call that follows opens nothing that stays."""
    process_linux.ensure_guard()
    old = process_linux._guard
    assert old is not None
    before = len(os.listdir("/proc/self/fd"))
    old.proc.kill()
    old.proc.wait()
    process_linux.ensure_guard()
    new = process_linux._guard
    assert new is not None and new.proc.pid != old.proc.pid and alive(new.proc.pid)
    project.tool("echo.sh", ECHO)
    executor = project.executor()
    executor.build()
    descriptors = sorted(os.listdir("/proc/self/fd"))
    assert len(descriptors) == before
    assert executor.call("echo", {"text": "x"}).output == "x"
    assert process_linux._guard is new
    assert sorted(os.listdir("/proc/self/fd")) == descriptors


def test_a_forked_child_lets_go_of_its_parents_guard(tmp_path: Path) -> None:
    """Holding the pipe would keep the guard from seeing the parent die; writing to it would mix two processes' groups."""
    process_linux.ensure_guard()
    guard = process_linux._guard
    assert guard is not None
    report = tmp_path / "report"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's findings are read from the file
        try:
            try:
                os.fstat(guard.fd)
                held = True
            except OSError:
                held = False
            report.write_text(repr((process_linux._guard, held)))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert report.read_text() == "(None, False)"


def test_where_no_guard_can_start_the_tool_runs_under_setpriv(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("util-linux's setpriv is not installed")
    monkeypatch.setattr(process_linux, "GUARD_SHELL", "/nonexistent/sh")
    monkeypatch.setattr(process_linux, "_guard", None)
    process_linux.ensure_guard()
    assert process_linux._guard is None
    assert process_linux.with_death_signal(["/bin/true"]) == [setpriv, "--pdeathsig", "KILL", "--", "/bin/true"]


def test_a_one_shot_run_leaves_no_process_behind_not_even_its_guard(project: Project) -> None:
    import sys

    project.tool("echo.sh", ECHO)
    config = project.configure()
    command = [sys.executable, "-m", "toolexec", "--config", str(config), "run", "echo", '{"text": "once"}']
    status, out, err, _, orphans = run_as_subreaper(command)
    assert (status, out, orphans) == (0, "once", 0), err  # the command closed its guard's pipe and reaped it


def test_the_wait_for_the_guard_is_woken_by_its_end_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The program waits for its guard at exit on the guard's pidfd, not on Popen's sleeping poll (which would add up
    to a few ms to every one-shot run); a guard that does not end is waited for no longer than the bound."""
    import time

    ended = subprocess.Popen(["sleep", "0.2"])
    stuck = subprocess.Popen(["sleep", "30"])
    try:
        with monkeypatch.context() as patch:
            patch.setattr(time, "sleep", lambda seconds: pytest.fail(f"polled (slept {seconds}s)"))
            process_linux._wait_for_exit(ended, 30)
        assert ended.returncode == 0
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            process_linux._wait_for_exit(stuck, 0.3)
        assert 0.25 <= time.monotonic() - started < 10
        assert stuck.poll() is None
    finally:
        for child in (ended, stuck):
            child.kill()
            child.wait()


# A tool that tries to command the guard through /proc: announce a group of its choosing, and read what toolexec
# tells the guard (markers, files). It reports which of the two opened.
HIJACK = """# @describe Command toolexec's guard.
# @option --guard! The guard's pid.
# @option --victim! A group to have killed.
main() {
    if printf '+ %s\\n' "$argc_victim" 2>/dev/null >"/proc/$argc_guard/fd/0"; then w=open; else w=denied; fi
    if (exec 3<"/proc/$argc_guard/fd/0") 2>/dev/null; then r=open; else r=denied; fi
    printf 'write=%s read=%s' "$w" "$r" >>"$LLM_OUTPUT"
}
"""


def test_a_tool_cannot_command_the_guard_through_proc(project: Project) -> None:
    guard = process_linux._start_guard()  # a guard of its own, so that the test can end it
    assert guard is not None
    victim = subprocess.Popen(["sleep", "1000"], start_new_session=True)  # the host's, whenever it started
    try:
        project.tool("hijack.sh", HIJACK)
        result = project.executor().call("hijack", {"guard": str(guard.proc.pid), "victim": str(victim.pid)})
        assert (result.status, result.output) == ("ok", "write=denied read=denied")
        os.close(guard.fd)
        assert guard.proc.wait(timeout=30) == 0
        assert alive(victim.pid)
    finally:
        victim.kill()
        victim.wait()


def test_the_guard_takes_no_line_that_would_reach_every_process_or_an_unknown_file(tmp_path: Path) -> None:
    """Inside a PID namespace of its own, so that a guard that did take ``+ 1`` or ``+ -1`` would kill only there."""
    import shutil

    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode:
        pytest.skip("needs unshare(1) and the right to make a PID namespace")
    kept = tmp_path / "kept"  # not a call file: never removed
    kept.write_text("x")
    call_file = tmp_path / "toolexec-t-1.out"
    call_file.write_text("x")
    lines = ["+ 1 " + "a" * 24, "+ -1 " + "a" * 24, "+ 0", "+ 01", "+ 2x", "+ 12345678", "+ 3 nothex!",
             f"f 5 {kept}", f"f 5 {call_file}", "+ 5 " + "b" * 24]  # fmt: skip
    script = f'sleep 1000 & victim=$!\n{shlex_join(process_linux._guard_argv())}\nkill -0 "$victim" && echo alive'
    done = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", script],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": process_linux.GUARD_PATH},
    )
    assert (done.stdout, kept.exists(), call_file.exists()) == ("alive\n", True, False)


def shlex_join(argv: list[str]) -> str:
    import shlex

    return shlex.join(argv)


ESCAPER = """# @describe Leave a process outside the group, then wait.
# @option --ready! A file to create once the escapee runs.
main() {
    setsid sleep 1000 </dev/null >/dev/null 2>&1 &
    echo partial >>"$LLM_OUTPUT"
    : >"$argc_ready"
    sleep 1000
}
"""


@pytest.mark.parametrize("surface", ["run", "mcp"])
def test_sigkill_of_toolexec_mid_call_leaves_no_process_and_no_call_file(
    project: Project, private_tmpdir: Path, tmp_path: Path, surface: str
) -> None:
    """The guard outlives the killed toolexec: it kills the tool's group, the escapee that carries the call's marker,
    and removes the call's files from TMPDIR."""
    import sys

    from tests.helpers import marked_processes

    project.tool("escaper.sh", ESCAPER)
    config = project.configure()
    ready = tmp_path / "ready"

    def call_files() -> list[str]:
        return [p.name for p in private_tmpdir.iterdir() if p.name.startswith("toolexec-escaper-")]

    base = [sys.executable, "-m", "toolexec", "--config", str(config)]
    proc = start_call(base, surface, "escaper", {"ready": str(ready)})
    try:
        wait_until(ready.exists, "the tool and its escapee to start")
        assert len(marked_processes(private_tmpdir)) >= 2  # the tool's shell, its sleep and the escapee
        assert call_files()  # LLM_OUTPUT and the failure channel
        proc.kill()
        proc.wait()
        wait_until(lambda: not marked_processes(private_tmpdir), "the guard to kill every process of the call")
        wait_until(lambda: not call_files(), "the guard to remove the call's files")
    finally:
        end_call(proc)


def test_a_pool_of_call_files_is_removed_by_the_guard_when_its_process_is_killed(tmp_path: Path) -> None:
    """A warm executor's call files outlive each call (toolexec.callfiles): its guard removes them should it be killed;
    a directory it withdrew (removed itself) is left alone."""
    program = (
        "import os, sys\n"
        "from toolexec.runtimes import process_linux\n"
        "kept, withdrawn = (os.path.join(sys.argv[1], name) for name in ('toolexec-calls-kept', 'toolexec-calls-gone'))\n"
        "for path in (kept, withdrawn):\n"
        "    os.mkdir(path, 0o700)\n"
        "    open(os.path.join(path, 'toolexec-x.out'), 'w').close()\n"
        "    process_linux.remove_at_death(path)\n"
        "process_linux.remove_at_death(withdrawn, False)\n"
        "print(process_linux._guard.proc.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    where = tmp_path / "tmp"
    where.mkdir()
    done = subprocess.run([sys.executable, "-c", program, str(where)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (-signal.SIGKILL, "")
    guard = int(done.stdout)
    wait_until(lambda: not alive(guard), "the guard to end", timeout=30)
    assert sorted(os.listdir(where)) == ["toolexec-calls-gone"]
