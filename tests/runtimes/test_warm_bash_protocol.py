"""The warm Bash call protocol (runtimes/warm_bash.py, bash_warm.sh, _bash_call.py, _bash_zygote.py): what a call's
hand-over could get wrong that the behaviour suite would not see. Under ``sandbox: off`` a server's slots (FIFOs and
files made once, used again) are private, never used again once a writer is left in one, and gone with the server;
in both modes a call's environment is taken word for word, whatever its values hold; under the baseline a server
closed while a call runs lets that call end.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.helpers import Ordinary, alive, wait_until
from toolexec.runtimes import baseline, process_linux, warm_bash

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="warm calls need pidfd and /proc (Linux)")

ECHO = """#!/usr/bin/env bash
# @describe Echo.
# @meta warm
# @option --text! What to echo.
main() {
    echo "err:$argc_text" >&2
    echo "out:$argc_text" >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""


def _server(executor: Any) -> warm_bash.BashServer:
    """The one warm Bash server of ``executor`` (sandbox off)."""
    servers = [entry.server for entry in executor.calls._pool._entries.values() if entry.server is not None]
    assert len(servers) == 1 and isinstance(servers[0], warm_bash.BashServer), servers
    return servers[0]


def _first_call(executor: Any) -> tuple[warm_bash.BashServer, warm_bash._Slot]:
    """The executor's first call of ``echo``, its server and the one slot it made."""
    assert _echo(executor, "first") == ("ok", "out:first\n", "err:first\n")
    server = _server(executor)
    [slot] = server._free
    return server, slot


def _ahead(slots_waiter: int) -> int:
    """The next call's waiter that the slot's waiter ``slots_waiter`` forked ahead of it, once it has (and its child,
    the call's process, too): the last call's may still be ending."""
    found: list[int] = []

    def forked() -> bool:
        found[:] = [pid for pid in process_linux._children(slots_waiter) if alive(pid) and process_linux._children(pid)]
        return len(found) == 1

    wait_until(forked, "the next call's waiter to be forked ahead of it")
    return found[0]


def _echo(executor: Any, text: str) -> tuple[str, str, str]:
    result = executor.call("echo", {"text": text})
    return result.status, result.output, result.stderr


@pytest.mark.skipif(not os.path.isdir(warm_bash.MEMORY_DIRECTORY), reason="no /dev/shm")
def test_a_servers_slots_are_private_in_memory_and_gone_with_it(
    project: Project, private_tmpdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warm_bash, "MEMORY_DIRECTORY", "/dev/shm")  # (tests put it in their own TMPDIR)
    project.tool("echo.sh", ECHO)
    with project.executor(sandbox="off") as executor:
        assert [_echo(executor, f"t{n}") for n in range(6)] == [("ok", f"out:t{n}\n", f"err:t{n}\n") for n in range(6)]
        server = _server(executor)
        root = server._root
        assert root is not None and os.path.dirname(root) == "/dev/shm"
        assert os.path.basename(root).startswith("toolexec-warm-")
        [slot] = server._free  # one slot made, used by every call in turn
        assert server._made == 1
        assert os.listdir(root) == [slot.name]
        modes = {name: os.lstat(os.path.join(slot.path, name)).st_mode for name in os.listdir(slot.path)}
        assert {name: (stat.S_IFMT(mode), stat.S_IMODE(mode)) for name, mode in modes.items()} == {
            **{name: (stat.S_IFIFO, 0o600) for name in ("out", "err", "st", "progress", "go", "wake")},
            **{name: (stat.S_IFREG, 0o600) for name in ("in", "call")},
        }
        assert [stat.S_IMODE(os.stat(path).st_mode) for path in (root, slot.path)] == [0o700, 0o700]
    assert not os.path.exists(root)
    assert os.listdir(private_tmpdir) == []


def test_a_slot_a_writer_was_left_in_is_never_used_again(project: Project, private_tmpdir: Path) -> None:
    project.tool("echo.sh", ECHO)
    with project.executor(sandbox="off") as executor:
        server, first = _first_call(executor)
        # A process that outlived its call, still holding the slot's stderr: whatever it writes must reach no later call.
        intruder = os.open(os.path.join(first.path, "err"), os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(intruder, b"intruder\n")
            assert _echo(executor, "second") == ("ok", "out:second\n", "err:second\n")
            [second] = server._free
            assert second.path != first.path and not os.path.exists(first.path)
            os.write(intruder, b"intruder again\n")
            assert _echo(executor, "third") == ("ok", "out:third\n", "err:third\n")
            assert first.path not in [slot.path for slot in server._free]
        finally:
            os.close(intruder)
    assert os.listdir(private_tmpdir) == []


def test_a_slot_removed_from_under_its_server_is_made_again(project: Project, private_tmpdir: Path) -> None:
    project.tool("echo.sh", ECHO)
    with project.executor(sandbox="off") as executor:
        server, first = _first_call(executor)
        descriptors = sorted(os.listdir("/proc/self/fd"))
        shutil.rmtree(first.path)  # (a cleaner of temporary files)
        assert _echo(executor, "second") == ("ok", "out:second\n", "err:second\n")
        [second] = server._free  # warm still: a new slot, and the old one's files closed
        assert second.path != first.path and server._made == 2
        assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert os.listdir(private_tmpdir) == []


def test_a_slots_waiter_starts_its_later_calls_and_one_gone_is_forked_again(project: Project, private_tmpdir: Path) -> None:
    """A slot's waiter, forked by the server for the slot's first call, forks each later call of that slot ahead of
    it (the call's waiter, and the call's process below it: two forks per call, none on the call's way); killed
    between calls, the call it forked ahead still runs (its waiter, re-parented, is reaped here when this process
    was the subreaper it went to), and the server forks a new slot's waiter for the slot's next call; none is left, nor a zombie, after
    the executor closes."""
    import signal

    project.tool("echo.sh", ECHO)
    with project.executor(sandbox="off") as executor:
        server, slot = _first_call(executor)
        assert server._proc is not None
        bash = server._proc.pid
        [waiter] = process_linux._children(bash)
        ahead = _ahead(waiter)
        assert _echo(executor, "second") == ("ok", "out:second\n", "err:second\n")
        assert (process_linux._children(bash), server._free) == ({waiter}, [slot])  # the same waiter and slot
        wait_until(lambda: not os.path.exists(f"/proc/{ahead}"), "the second call's waiter to be reaped by its parent")
        ahead = _ahead(waiter)
        os.kill(waiter, signal.SIGKILL)
        wait_until(lambda: not alive(waiter), "the killed waiter to be reaped")
        assert _echo(executor, "third") == ("ok", "out:third\n", "err:third\n")  # the call forked ahead
        wait_until(lambda: not alive(ahead), "the call's waiter forked ahead to end")
        assert ahead not in process_linux._children(os.getpid())  # (re-parented here, it is reaped here: no zombie)
        assert _echo(executor, "fourth") == ("ok", "out:fourth\n", "err:fourth\n")
        [again] = process_linux._children(bash)
        assert (again != waiter, server._free) == (True, [slot])
    assert [pid for pid in (bash, again) if alive(pid)] == []
    assert os.listdir(private_tmpdir) == []


def test_a_slot_whose_go_fifo_another_process_filled_is_not_used_again(project: Project, private_tmpdir: Path) -> None:
    """A process of the user's that fills a slot's ``go`` FIFO (the next call's waiter, forked ahead of it, stopped,
    so nothing reads it) keeps no call from running: the call that finds it full is not handed to that waiter (it runs
    cold), the slot is removed (the waiters, continued, end as they find no slot), and the next call runs warm in a
    new slot."""
    import signal

    project.tool("echo.sh", ECHO)
    with project.executor(sandbox="off") as executor:
        server, first = _first_call(executor)
        assert server._proc is not None
        [slots_waiter] = process_linux._children(server._proc.pid)
        waiter = _ahead(slots_waiter)  # (the one that reads `go`; its child waits for the call)
        os.kill(waiter, signal.SIGSTOP)
        intruder = os.open(os.path.join(first.path, "go"), os.O_WRONLY | os.O_NONBLOCK)
        try:
            with contextlib.suppress(BlockingIOError):
                while True:
                    os.write(intruder, b"-\n" * 1024)
            assert _echo(executor, "second") == ("ok", "out:second\n", "err:second\n")
            assert (server._free, os.path.exists(first.path)) == ([], False)
        finally:
            os.kill(waiter, signal.SIGCONT)
            os.close(intruder)
        wait_until(lambda: not alive(waiter) and not alive(slots_waiter), "the waiters of the removed slot to end")
        assert _echo(executor, "third") == ("ok", "out:third\n", "err:third\n")
        [second] = server._free
        assert second.path != first.path
    assert os.listdir(private_tmpdir) == []


def test_a_line_another_process_writes_into_a_slots_wake_fifo_starts_no_call(project: Project, private_tmpdir: Path) -> None:
    """The call's process forked ahead of a call waits on the slot's ``wake`` FIFO: a line that names no waiter of its
    own (written by a process of the user's, or left by an earlier call) starts nothing; the next calls run as ever,
    and the slot is used again."""
    project.tool("echo.sh", ECHO)
    with project.executor(sandbox="off") as executor:
        server, slot = _first_call(executor)
        assert server._proc is not None
        [slots_waiter] = process_linux._children(server._proc.pid)
        waiter = _ahead(slots_waiter)
        [ahead] = process_linux._children(waiter)
        intruder = os.open(os.path.join(slot.path, "wake"), os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(intruder, b"-1\np\n-" + str(ahead).encode() + b"\n")
        finally:
            os.close(intruder)
        assert _echo(executor, "second") == ("ok", "out:second\n", "err:second\n")
        assert _echo(executor, "third") == ("ok", "out:third\n", "err:third\n")
        assert server._free == [slot]  # (the same slot: nothing of the intruder's was in it)
    assert os.listdir(private_tmpdir) == []


FDS = """#!/usr/bin/env bash
# @describe The call's descriptors.
# @meta warm
main() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do echo "${fd##*/}"; done >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""


def test_a_warm_call_holds_no_descriptor_of_its_slots_waiter(project: Project, private_tmpdir: Path) -> None:
    """The slot's waiter keeps the slot's ``go`` FIFO open between calls: a call it forks holds none of it, only the
    descriptors a cold call of the same tool holds (0, 1 and 2; 3, the directory the glob reads; 10, where bash keeps
    stdout while the loop's output is redirected), but bash's own script (255: a cold bash reads bash_bootstrap.sh)."""
    from toolexec import Executor

    project.tool("fds.sh", FDS)
    config = project.configure(sandbox="off")
    with Executor(config, warm=True) as warm, Executor(config, warm=False) as cold:
        seen = [warm.call("fds", {}).output.split() for _ in range(3)]  # the slot's first call, then two its waiter's
        expected = [fd for fd in cold.call("fds", {}).output.split() if fd != "255"]  # (a cold bash reads its script)
    assert seen == [expected] * 3
    assert os.listdir(private_tmpdir) == []


VALUES = {
    "TOOLEXEC_TEST_QUOTES": "it's \"quoted\" 'twice''",
    "TOOLEXEC_TEST_EXPANSIONS": "$(touch {sentinel}) `touch {sentinel}` ${{HOME}} $HOME !! \\",
    "TOOLEXEC_TEST_LINES": "one\ntwo; touch {sentinel}\n\n",
    "TOOLEXEC_TEST_UNICODE": "ünï — 語",
    "TOOLEXEC_TEST_EMPTY": "",
}
SEEN = """#!/usr/bin/env bash
# @describe Show the environment.
# @meta warm
set -o posix
main() {
    printf '%s\\0' "$TOOLEXEC_TEST_QUOTES" "$TOOLEXEC_TEST_EXPANSIONS" "$TOOLEXEC_TEST_LINES" \\
        "$TOOLEXEC_TEST_UNICODE" "${TOOLEXEC_TEST_EMPTY-unset}" "$TOOLEXEC_TEST_LATER" >>"$LLM_OUTPUT"
}
"""


@pytest.mark.parametrize("sandbox", ["off", "declared"])
def test_a_calls_environment_is_taken_word_for_word(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("needs bwrap and PID namespaces")
    sentinel = tmp_path / "pwned"
    values = {name: value.format(sentinel=sentinel) for name, value in VALUES.items()}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    # A name bash refuses (read-only) before one it takes: in POSIX mode (the tool's, restored in each call) a refused
    # assignment of `export` would end the shell.
    monkeypatch.setenv("PPID", "1")
    monkeypatch.setenv("TOOLEXEC_TEST_LATER", "later")
    project.tool("seen.sh", SEEN)
    with project.executor(sandbox=sandbox, warm_tools="all") as executor:
        results = [executor.call("seen", {}) for _ in range(2)]
        assert len(executor.calls._pool) == 1  # warm
    assert [(r.status, r.stderr) for r in results] == [("ok", "")] * 2
    assert [r.output.split("\0") for r in results] == [[*values.values(), "later", ""]] * 2
    assert not sentinel.exists()


# What the tool's shell says of itself that toolexec's own code could change: its call stack, its last job, its
# level. The tool's top level and main each start a job of their own: the next call must see none of them.
SHELL_SEEN = r"""#!/usr/bin/env bash
# @describe Say what the shell says of itself.
# @meta warm
sleep 0 &
LOADED_JOB=$!
main() {
    printf '%s|' "${FUNCNAME[*]}" "${#BASH_SOURCE[@]}" "${BASH_SOURCE[0]##*/}" "${#BASH_LINENO[@]}" "${BASH_LINENO[-1]}" \
        "$!" "$LOADED_JOB" "$SHLVL" >>"$LLM_OUTPUT"
    sleep 0 &
}
eval "$(argc --argc-eval "$0" "$@")"
"""


@pytest.mark.parametrize("sandbox", ["off", "declared"])
@pytest.mark.parametrize("level", [None, "3", "x", "-5"])
def test_a_warm_calls_shell_says_of_itself_what_a_cold_calls_says(
    project: Project, monkeypatch: pytest.MonkeyPatch, sandbox: str, level: str | None
) -> None:
    """FUNCNAME (no function of toolexec's above main), the length of BASH_SOURCE and BASH_LINENO, ``$!`` (no job of
    an earlier call's, nor of toolexec's: what the tool's top level left) and SHLVL (one more than the environment's,
    as bash sets it at its start) are a cold call's, call after call."""
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("needs bwrap and PID namespaces")
    if level is None:
        monkeypatch.delenv("SHLVL", raising=False)
    else:
        monkeypatch.setenv("SHLVL", level)
    project.tool("shell.sh", SHELL_SEEN)
    from toolexec import Executor

    config = project.configure(sandbox=sandbox)
    seen = {}
    for warm in (False, True):
        with Executor(config, warm=warm) as executor:
            results = [executor.call("shell", {}) for _ in range(3)]
            pool = executor.calls._pool
            assert (pool is not None and len(pool) == 1) is warm  # (warm: one server for the three calls)
        assert [(r.status, r.stderr, r.error) for r in results] == [("ok", "", None)] * 3
        seen[warm] = [r.output.split("|") for r in results]
    # the tool's top level left a job: its pid (a number, not the same process warm and cold)
    for said in (*seen[False], *seen[True]):
        assert said[5] == said[6] and said[5].isdigit() and said[7] == {None: "1", "3": "4", "x": "1", "-5": "0"}[level]
    assert [said[:5] + said[7:] for said in seen[True]] == [said[:5] + said[7:] for said in seen[False]]
    assert seen[False][0][:5] == ["main main", "2", "shell.sh", "2", "0"]


@pytest.mark.parametrize(
    ("inherited", "level"),
    [
        (None, "1"),
        ("", "1"),
        ("5", "6"),
        (" 7 ", "8"),
        ("+2", "3"),
        ("-3", "0"),
        ("x", "1"),
        ("1_0", "1"),
        ("-", "1"),
        ("998", "999"),
        ("999", "1"),
    ],
)
def test_a_warm_calls_shell_level_is_the_one_bash_gives_itself(inherited: str | None, level: str) -> None:
    """bash's own rule (adjust_shell_level), each case checked against a bash started with it in its environment."""
    import subprocess

    from toolexec.runtimes._bash_call import shell_level

    env = {"PATH": os.environ["PATH"], **({} if inherited is None else {"SHLVL": inherited})}
    started = subprocess.run(["bash", "-c", "echo $SHLVL"], env=env, capture_output=True, text=True, check=True)
    assert (shell_level(inherited), started.stdout) == (level, level + "\n")


GATE = """#!/usr/bin/env bash
# @describe Wait at a gate.
# @meta warm
# @option --started! FIFO to say so on
# @option --gate! FIFO to wait on
main() {
    echo started >"$argc_started"
    read -r word <"$argc_gate"
    echo "passed $word" >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and PID namespaces")
def test_a_call_in_flight_ends_as_ever_when_its_server_is_closed(project: Project, tmp_path: Path) -> None:
    started, gate = tmp_path / "started", tmp_path / "gate"
    os.mkfifo(started)
    os.mkfifo(gate)
    project.tool("gate.sh", GATE)
    with project.executor(sandbox="declared") as executor:
        results: list[Any] = []
        caller = threading.Thread(
            target=lambda: results.append(executor.call("gate", {"started": str(started), "gate": str(gate)}))
        )
        caller.start()
        try:
            with open(started, encoding="utf-8") as said:
                assert said.read() == "started\n"
            [server] = [entry.server for entry in executor.calls._pool._entries.values() if entry.server is not None]
            assert server._proc is not None
            zygote = _descendants(server._proc.pid, "_bash_zygote.py")[0]
            call_init, *spares = _children(zygote)  # the call took the oldest spare; the others wait (each: an init, a bash)
            assert spares
            executor.calls._pool.close()  # the server stops taking calls: it (and its spares) ends once the call is over

            def spares_reaped() -> bool:  # its spares end at once: the server has reaped them, and waits on
                return not any(os.path.exists(f"/proc/{pid}") for pid in spares) and _state(zygote) == "S"

            wait_until(spares_reaped, "the server to reap its spares and wait for its call", timeout=30)
            assert os.path.exists(f"/proc/{call_init}")
        finally:
            with contextlib.suppress(OSError):  # (no reader: the call is gone)
                opened = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
                os.write(opened, b"go\n")
                os.close(opened)
            caller.join()
    [result] = results
    assert (result.status, result.output, result.stderr) == ("ok", "passed go\n", "")


def _state(pid: int) -> str:
    """The state letter of process ``pid`` ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    return [
        int(child)
        for task in os.listdir(f"/proc/{pid}/task")
        for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
    ]


def _descendants(pid: int, program: str) -> list[int]:
    """The processes below ``pid`` (itself included) that run ``program`` (not bwrap, whose arguments name it), the
    highest first."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        try:
            argv = Path(f"/proc/{current}/cmdline").read_text(errors="replace").split("\0")
            if any(arg.endswith(program) for arg in argv) and os.path.basename(argv[0]) != "bwrap":
                found.append(current)
            for task in os.listdir(f"/proc/{current}/task"):
                todo += [int(child) for child in Path(f"/proc/{current}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


# --- as an ordinary user ---------------------------------------------------------------------------------------------
# Each tool counts its loads (sourcings) in its cache and says whether its call ran in a spare of the baseline's (its
# PID namespace's init is the Bash server's spare).
COUNTED = """#!/usr/bin/env bash
# @describe Echo, counting loads.
# @meta warm
# @option --text! What to echo.
printf x >>"$LLM_TOOL_CACHE_DIR/loads"
main() {
    local init
    mapfile -d '' -t init </proc/1/cmdline
    [[ ${init[*]} == *_bash_zygote.py* ]] && echo "spare" >&2
    echo "out:$argc_text" >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""
# Three calls in one executor; the server's slots (sandbox off) as its user sees them; the executor's zombies after it
# closed.
ORDINARY_CALLS = """
import json, os, stat, sys
from toolexec import Executor

found = {"slots": {}}
with Executor(sys.argv[1], warm=True) as executor:
    results = [executor.call("counted", {"text": f"t{n}"}) for n in range(3)]
    found["results"] = [[r.status, r.output, r.stderr] for r in results]
    [server] = [entry.server for entry in executor.calls._pool._entries.values() if entry.server is not None]
    found["root"] = root = getattr(server, "_root", None)
    for folder, _, files in os.walk(root) if root else ():
        for name in [folder, *(os.path.join(folder, file) for file in files)]:
            info = os.lstat(name)
            found["slots"][os.path.relpath(name, root)] = [info.st_uid == os.getuid(), oct(stat.S_IMODE(info.st_mode))]
    found["loads"] = len(open(os.path.join(executor.config.state.tool_cache("counted"), "loads")).read())
def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[:2]
    except OSError:  # (ended meanwhile)
        return None
found["zombies"] = [pid for pid in os.listdir("/proc") if pid.isdigit() and state(pid) == ["Z", str(os.getpid())]]
found["root left"] = bool(found["root"]) and os.path.exists(found["root"])
print(json.dumps(found))
"""


@pytest.mark.parametrize("sandbox", ["off", "declared"])
def test_an_ordinary_users_warm_bash_calls_are_right_private_and_leave_nothing(ordinary: Ordinary, sandbox: str) -> None:
    """As an ordinary user: under ``sandbox: off`` one sourcing serves every call through slots private to the user
    (0700 directories, 0600 files, theirs); under the baseline each call runs in a spare; and after the executor
    closes nothing is left: no process, no zombie, no slot in /dev/shm, no file in its TMPDIR."""
    import yaml

    if sandbox == "declared" and not baseline.usable():
        pytest.skip("needs bwrap and PID namespaces")
    (ordinary.root / "functions" / "tools" / "counted.sh").write_text(COUNTED)
    ordinary.config.write_text(yaml.safe_dump({"visible_tools": ["counted.sh"], "sandbox": sandbox}))
    ordinary.own()
    done = ordinary.run("python", "-c", ORDINARY_CALLS, str(ordinary.config))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    spare = "" if sandbox == "off" else "spare\n"
    assert found["results"] == [["ok", f"out:t{n}\n", spare] for n in range(3)]
    assert (found["zombies"], found["root left"]) == ([], False)
    if sandbox == "off":
        memory = "/dev/shm" if os.path.isdir("/dev/shm") else str(ordinary.root / "tmp")  # (not the fixture's)
        assert os.path.dirname(found["root"]) == memory
        (slot,) = {name for name in found["slots"] if name != "."}.difference(name for name in found["slots"] if "/" in name)
        files = {f"{slot}/{name}": [True, "0o600"] for name in ("out", "err", "st", "progress", "go", "wake", "in", "call")}
        assert found["slots"] == {".": [True, "0o700"], slot: [True, "0o700"], **files}
        assert found["loads"] == 1  # sourced once for every call
    else:
        assert found["root"] is None and found["loads"] >= 3  # sourced by each call's spare, ahead of it
    assert list((ordinary.root / "tmp").iterdir()) == []
    assert _processes_of(ordinary.root) == []


def _processes_of(root: Path) -> list[int]:
    """The processes whose command line names a path under ``root`` (a server of its tools, a spare, a call)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            with contextlib.suppress(OSError):
                if str(root).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found
