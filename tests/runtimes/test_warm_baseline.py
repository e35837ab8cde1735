"""Warm Python calls under the sandbox's baseline (``sandbox: declared``, the default): the server lives inside the
baseline's namespaces, made once, and each call it forks is alone in a PID namespace of its own, with a /proc of
its own and the default limits, as a cold call under bwrap is. The hostile tools of tests/runtimes/test_baseline.py
run warm too (its ``launch_modes``); these check what only a warm call could get wrong: that the call was forked
from the one load, and that nothing of toolexec, of its server or of another call can be seen or signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import (
    alive,
    boot_clock,
    in_pid_namespace,
    left_in_pid_namespace,
    marked_processes,
    run_executor_script,
    sleeping,
    wait_until,
)
from toolexec import Executor
from toolexec.records import ToolCall
from toolexec.runtimes import baseline, process_linux
from toolexec.runtimes.warm_fork import running_servers

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available()), reason="needs bwrap, PID namespaces, pidfd and /proc"
)

PROBE = '''
import os, signal, subprocess, time

LOADED = os.readlink("/proc/self/ns/pid")
with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "loads"), "a") as f:
    f.write("x")


def run(action: str, arg: str = "") -> dict:
    """Look around, or attack.

    Warm: true

    Args:
        action: what to do
        arg: its argument
    """
    seen = {
        "loaded_in": LOADED,
        "namespace": os.readlink("/proc/self/ns/pid"),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "processes": sorted(int(name) for name in os.listdir("/proc") if name.isdigit()),
    }
    if action == "environments":  # every environment this call can read, its own but for the secret's name
        found = []
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    found.append(handle.read().decode("utf-8", "replace"))
            except OSError:
                continue
        seen["secret_seen"] = any(arg in text for text in found)
    if action == "signal":  # toolexec's own pid, as toolexec numbers it
        try:
            os.kill(int(arg), signal.SIGSTOP)
            seen["signalled"] = "sent"
        except ProcessLookupError:
            seen["signalled"] = "no such process"
        os.kill(os.getppid(), signal.SIGSTOP)
    if action == "escape":
        subprocess.Popen(["setsid", "env", "-i", "sleep", arg], start_new_session=True)
    if action == "wait":
        time.sleep(float(arg))
    return seen
'''


def _call(executor: object, action: str, arg: str = "") -> dict:
    result = executor.call("probe", {"action": action, "arg": arg})  # type: ignore[attr-defined]
    assert (result.status, result.stderr) == ("ok", ""), result.error
    return json.loads(result.output)


def test_each_warm_call_is_forked_from_one_load_into_a_pid_namespace_of_its_own(project: Project) -> None:
    project.tool("probe.py", PROBE)
    with project.executor(sandbox="declared") as executor:
        seen, ended = [], []
        for _ in range(3):
            seen.append(_call(executor, "look"))
            ended.append(boot_clock())
        assert (executor.config.state.tool_cache("probe") / "loads").read_text() == "x"  # one load for three calls
        servers = running_servers()
        assert len(servers) == 1
    mine = os.readlink("/proc/self/ns/pid")
    namespaces = [s["namespace"] for s in seen]
    # (a namespace's number is reused once it is gone: concurrent calls' differ, see the next test)
    assert mine not in namespaces and seen[0]["loaded_in"] not in namespaces and seen[0]["loaded_in"] != mine
    # As a cold call under bwrap: the tool is process 2, under the namespace's init, and sees no other process.
    assert [(s["pid"], s["ppid"], s["processes"]) for s in seen] == [(2, 1, [1, 2])] * 3
    assert not any(alive(pid) for pid in servers)
    # what a call left would have started before it returned (a later namespace may reuse its number)
    for namespace, end in zip(namespaces, ended, strict=True):
        assert in_pid_namespace(namespace, started_before=end) == []


def test_concurrent_warm_calls_see_nothing_of_one_another(project: Project) -> None:
    project.tool("probe.py", PROBE)
    with project.executor(sandbox="declared") as executor:
        _call(executor, "look")  # the server is up
        results = executor.call_many([ToolCall(name="probe", arguments={"action": "wait", "arg": "0.5"}) for _ in range(4)])
    seen = [json.loads(result.output) for result in results]
    assert len({s["namespace"] for s in seen}) == 4
    assert [(s["pid"], s["processes"]) for s in seen] == [(2, [1, 2])] * 4


def test_a_warm_calls_setsid_escapee_is_gone_when_the_call_ends(project: Project, private_tmpdir: Path) -> None:
    project.tool("probe.py", PROBE)
    token = f"{1000 + int.from_bytes(os.urandom(2), 'big')}.{os.getpid()}"  # a sleep argument no other process has
    with project.executor(sandbox="declared") as executor:
        _call(executor, "look")
        seen = _call(executor, "escape", token)
        returned = boot_clock()
        # gone by the time the call returned, and nothing else of the call but its init, which may still be exiting
        # (the status is said before it is reaped)
        assert (sleeping(token), left_in_pid_namespace(seen["namespace"], returned)) == ([], [])
        wait_until(lambda: in_pid_namespace(seen["namespace"], started_before=returned) == [], "its init's end", 10)
    assert marked_processes(private_tmpdir) == []


# The executor runs in a process of its own, which the test can watch (and wake, should the tool stop it).
EXECUTOR = textwrap.dedent(
    """
    import json, os, sys
    from toolexec import Executor

    with Executor(sys.argv[1]) as executor:
        for action in ("look", sys.argv[2]):
            arg = str(os.getpid()) if sys.argv[2] == "signal" else sys.argv[3]
            result = executor.call("probe", {"action": action, "arg": arg}, timeout=20)
            print(json.dumps([result.status, result.output, result.error]), flush=True)
    """
)


def _run_executor(project: Project, action: str, arg: str = "", **env: str) -> list[list]:
    config = project.configure(sandbox="declared", secret_env=["WARM_SECRET"])
    return run_executor_script(EXECUTOR, config, action, arg, env)


def test_a_warm_tool_cannot_stop_toolexec(project: Project) -> None:
    project.tool("probe.py", PROBE)
    (look, attack) = _run_executor(project, "signal")
    assert look[0] == "ok" and attack[0] == "ok", attack
    seen = json.loads(attack[1])
    # toolexec's pid names no process in the call's namespace; its parent is the namespace's init, which ignores it
    assert (seen["signalled"], seen["ppid"]) == ("no such process", 1)


def test_a_warm_tool_cannot_read_toolexecs_environment(project: Project) -> None:
    project.tool("probe.py", PROBE)
    secret = f"warm-secret-{os.urandom(8).hex()}"
    (_look, probe) = _run_executor(project, "environments", secret, WARM_SECRET=secret)
    assert probe[0] == "ok", probe
    seen = json.loads(probe[1])
    assert (seen["secret_seen"], seen["processes"]) == (False, [1, 2])


def test_warm_calls_run_under_the_default_limits_and_leave_no_cgroup(project: Project) -> None:
    from toolexec.runtimes import sandbox

    project.tool(
        "probe.py",
        PROBE.replace(
            '    if action == "wait":',
            '    if action == "limits":\n        seen["limits"] = open("/proc/self/limits").read()\n    if action == "wait":',
        ),
    )
    root = sandbox._pids_root() if os.geteuid() == 0 else None
    mine = f"toolexec-{os.getpid()}-"
    with project.executor(sandbox="declared", max_kept_bytes=3 << 20) as executor:
        _call(executor, "look")
        result = executor.call("probe", {"action": "limits"}, timeout=9)
        assert result.status == "ok", result.error
        limits = {" ".join(line.split()[:-3]): line.split()[-3] for line in json.loads(result.output)["limits"].splitlines()[1:]}
    assert (limits["Max cpu time"], limits["Max file size"], limits["Max processes"]) == (
        str(baseline.cpu_seconds(9)),
        str(3 << 20),
        str(baseline.PROCESSES),
    )
    if root is not None:
        assert [name for name in os.listdir(root) if name.startswith(mine)] == []


def test_a_timeout_ends_a_warm_call_by_sigterm_as_a_cold_one(project: Project) -> None:
    """The tool is not its namespace's init (which ignores every signal it has no handler for): toolexec's SIGTERM
    at the timeout reaches it, and the call reports the timeout without waiting for the kill."""
    project.tool("probe.py", PROBE)
    results = {}
    for warm in (False, True):
        with Executor(project.configure(sandbox="declared"), warm=warm) as executor:
            result = executor.call("probe", {"action": "wait", "arg": "100"}, timeout=1.5)
            results[warm] = (result.status, result.reason, result.signal, result.exit_code)
    assert results[True] == results[False]
    assert results[True][:3] == ("timeout", "timeout", 15)  # SIGTERM, not the SIGKILL that follows a grace period


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    stack.append(child)
    return found


@pytest.mark.parametrize("sandbox", ["declared", "off"])
def test_the_spare_a_server_keeps_ends_with_it(project: Project, sandbox: str) -> None:
    """Each server forks the next call's process (under the baseline: with its namespace's init) ahead: one at a
    time, and none left once the server is closed."""
    project.tool("probe.py", PROBE)
    with project.executor(sandbox=sandbox) as executor:
        for _ in range(3):
            _call(executor, "look")
        (server,) = running_servers()
        # bwrap's init, the zygote and one spare: a namespace's init and the call's process (under the baseline); the
        # zygote's spare (off). The spare is made once the last call is over: it may still be on its way, and the
        # last call's init may still be in the kernel's teardown of its namespace (its status is said before it is
        # reaped, on purpose): so the count settles at one spare, never more (two spares would never settle).
        expected = 4 if sandbox == "declared" else 1
        wait_until(lambda: len(_waiting(server)) == expected, "one spare, and nothing else, below the server")
        inside = _descendants(server)
        assert len(_waiting(server)) == expected
    assert not any(alive(pid) for pid in inside | {server})


def _waiting(server: int) -> list[int]:
    """The live processes below ``server``."""
    found = []
    for pid in _descendants(server):
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(pid)
        except OSError:
            continue
    return found


FILES = r'''
import json, os


def run(action: str) -> str:
    """Report the call's files, then use them.

    Warm: true

    Args:
        action: what to do with them
    """
    output = os.environ["LLM_OUTPUT"]
    seen = {
        "paths": [output, os.environ["LLM_ARTIFACTS_DIR"]],
        "sizes": [os.path.getsize(output)],
        "artifacts": os.listdir(os.environ["LLM_ARTIFACTS_DIR"]),
    }
    if action == "link":  # a name of its own for the output file, outside its call: the file is never used again
        os.link(output, os.path.join(os.path.dirname(output), "stolen"))
    if action == "artifact":
        with open(os.path.join(os.environ["LLM_ARTIFACTS_DIR"], "report.txt"), "w") as handle:
            handle.write("made")
    return json.dumps(seen) + "\n" + "x" * 1000  # written to LLM_OUTPUT: the next call would see it
'''


# Reports the call's files, then uses them: a link of its own to the output, an artifact, or a writer left behind
# (`setsid env -i`: no marker, no group of the call's) that holds the output open and writes into it every 10 ms.
FILES_SH = r"""#!/usr/bin/env bash
# @describe Report the call's files, then use them.
# @meta warm
# @option --action! what to do with them
main() {
    local size
    size=$(stat -c %s "$LLM_OUTPUT")
    printf '{"paths": ["%s", "%s"], "sizes": [%s], "artifacts": [%s]}\n' "$LLM_OUTPUT" "$LLM_ARTIFACTS_DIR" "$size" \
        "$(cd "$LLM_ARTIFACTS_DIR" && ls -A | sed 's/.*/"&"/' | paste -sd,)" >>"$LLM_OUTPUT"
    case $argc_action in
    link) ln "$LLM_OUTPUT" "${LLM_OUTPUT%/*}/stolen" ;;
    artifact) echo made >"$LLM_ARTIFACTS_DIR/report.txt" ;;
    leave) setsid env -i bash -c 'exec 9>>"$1"; for _ in {1..500}; do echo late >&9; sleep 0.01; done' _ "$LLM_OUTPUT" \
        </dev/null >/dev/null 2>&1 & ;;
    slow) sleep 0.3 ;;  # (long enough for a writer left by the call before, writing every 10 ms, to be seen)
    esac
    printf 'x%.0s' {1..1000} >>"$LLM_OUTPUT"  # (the next call would see it, were the file not emptied)
}
"""


def _files_seen(executor: Executor, action: str = "look") -> dict:
    result = executor.call("files", {"action": action})
    assert (result.status, result.stderr) == ("ok", ""), result.error
    assert executor.calls.settle()  # its files given back (off its path) before the next call takes a set
    return json.loads(result.output.splitlines()[0])


@pytest.mark.parametrize("language", ["python", "bash"])
def test_a_sealed_warm_calls_files_go_to_the_next_call_emptied_and_only_as_made(
    project: Project, private_tmpdir: Path, language: str
) -> None:
    """A warm call under the baseline is sealed (its status comes once its PID namespace is gone, its every process
    reaped), a Python tool's and a Bash tool's: its set of files is kept for the next call, emptied, while it is
    exactly as made."""
    project.tool("files.py", FILES) if language == "python" else project.tool("files.sh", FILES_SH)
    with project.executor(sandbox="declared") as executor:
        first = _files_seen(executor)
        assert len(running_servers()) == 1  # it ran warm
        (pool,) = private_tmpdir.iterdir()  # the executor's private directory of call files
        assert [Path(path).parent for path in first["paths"]] == [pool] * 2 and pool.name.startswith("toolexec-calls-")
        second = _files_seen(executor)  # the same files, empty as made: nothing of the first call's output
        assert (second["paths"], second["sizes"], second["artifacts"]) == (first["paths"], [0], [])
        linked = _files_seen(executor, "link")
        assert linked["paths"] == first["paths"]
        after_link = _files_seen(executor)  # the linked output is never used again: the whole set is new
        assert not set(after_link["paths"]) & set(first["paths"])
        assert (after_link["sizes"], (pool / "stolen").read_text().startswith('{"paths"')) == ([0], True)
        result = executor.call("files", {"action": "artifact"})
        assert [artifact.name for artifact in result.artifacts] == ["report.txt"]
        after_artifact = _files_seen(executor)  # the directory held a file: a new set
        assert not set(after_artifact["paths"]) & set(after_link["paths"])
        assert after_artifact["artifacts"] == []
        (pool / "stolen").unlink()
    assert os.listdir(private_tmpdir) == []  # closed: the pool's directory is gone


def test_a_writer_a_warm_bash_call_left_cannot_reach_the_next_calls_output(project: Project, private_tmpdir: Path) -> None:
    """The hostile case of a kept set: a call leaves a process (no marker, a session of its own) that holds its
    output open and writes into it. The init kills it before it says the status, so the set the next call gets has
    no writer left: the next call's output is its own alone, though it runs long enough for a writer to be seen."""
    project.tool("files.sh", FILES_SH)
    with project.executor(sandbox="declared", warm_tools=["files"]) as executor:
        left = _files_seen(executor, "leave")
        result = executor.call("files", {"action": "slow"})
        assert executor.calls.settle()
        assert len(running_servers()) == 1  # both ran warm
    assert result.status == "ok"
    seen = json.loads(result.output.splitlines()[0])
    assert (seen["paths"], seen["sizes"]) == (left["paths"], [0])  # the same set, kept: no writer left in it
    assert result.output == result.output.splitlines()[0] + "\n" + "x" * 1000  # and nothing but its own
    assert marked_processes(private_tmpdir) == []
    assert os.listdir(private_tmpdir) == []


def test_a_warm_call_under_sandbox_off_gets_new_files_every_time(project: Project, private_tmpdir: Path) -> None:
    project.tool("files.py", FILES)
    with project.executor(sandbox="off") as executor:
        seen = [_files_seen(executor)["paths"] for _ in range(3)]  # not sealed: a process of it may hold them
    assert len({path for paths in seen for path in paths}) == 6
    assert os.listdir(private_tmpdir) == []


def test_no_signal_goes_to_a_sealed_calls_numbers_once_its_server_said_the_status(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server reaps a sealed call's processes before it says the status: their pids may be another process's by
    then (pid reuse), so the group's TERM and KILL after the call, and the look for its leftovers, are not sent."""
    project.tool("probe.py", PROBE)
    sent: list[tuple[int, int]] = []
    real = os.killpg

    def recorded(pgid: int, sig: int) -> None:
        sent.append((pgid, sig))
        real(pgid, sig)

    with project.executor(sandbox="declared") as executor:
        _call(executor, "look")  # the server is up
        monkeypatch.setattr(os, "killpg", recorded)
        seen = [_call(executor, "look") for _ in range(3)]
        timed_out = executor.call("probe", {"action": "wait", "arg": "30"}, timeout=1)
        monkeypatch.setattr(os, "killpg", real)
    assert ([s["pid"] for s in seen], timed_out.status) == ([2, 2, 2], "timeout")
    # the three calls that ended: nothing; the one timed out: its TERM, before its status came, and nothing after
    assert [sig for _, sig in sent] == [signal.SIGTERM]


SLEEPER = r'''
import os, time


def run(report: str, what: str = "output") -> str:
    """Say where the call's files are (or, what: mounts, which mount namespace it has), then wait for the go.

    Warm: true

    Args:
        report: where to say it
        what: output or mounts
    """
    said = os.environ["LLM_OUTPUT"] if what == "output" else str(os.stat("/proc/self/ns/mnt").st_ino)
    with open(report + ".part", "w") as handle:
        handle.write(said)
    os.rename(report + ".part", report)
    while not os.path.exists(report + ".go"):
        time.sleep(0.01)
    return "done"
'''


def test_a_warm_executor_killed_mid_call_leaves_neither_the_call_nor_its_files(
    project: Project, private_tmpdir: Path, tmp_path: Path
) -> None:
    """The guard removes the pool of call files (told once, not per call) and kills the running call."""
    project.tool("sleeper.py", SLEEPER)
    config = project.configure(sandbox="declared")
    report = tmp_path / "report"
    program = (
        "import sys\nfrom toolexec import Executor\n"
        "executor = Executor(sys.argv[1])\n"
        "print(executor.call('sleeper', {'report': sys.argv[2]}, timeout=600).status, flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", program, str(config), str(report)], stdout=subprocess.PIPE, text=True)
    try:
        wait_until(report.exists, "the call to start")
        output = Path(report.read_text())
        assert output.parent.parent == private_tmpdir and output.parent.name.startswith("toolexec-calls-")
    finally:
        proc.kill()
        proc.communicate()
    wait_until(lambda: not output.parent.exists(), "the guard to remove the call files", timeout=30)
    wait_until(lambda: marked_processes(private_tmpdir) == [], "the call to be killed", timeout=30)
    assert os.listdir(private_tmpdir) == []


def _told(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What this process tells its guard from now on (the messages, as sent)."""
    told: list[str] = []
    real = process_linux._tell_guard

    def recorded(message: str) -> bool:
        told.append(message)
        return real(message)

    monkeypatch.setattr(process_linux, "_tell_guard", recorded)
    return told


def test_the_guard_is_told_nothing_of_a_sealed_call_and_everything_of_one_that_runs_cold(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sealed call's every process is in its server's PID namespace, which bwrap ends with toolexec
    (--die-with-parent): the guard need not know it (three wake-ups of a shell per call fewer). A call of the same tool
    that runs cold (the pool closed) is told as ever: its marker before the spawn, its group after, its end."""
    project.tool("probe.py", PROBE)
    with project.executor(sandbox="declared") as executor:
        _call(executor, "look")  # the server is up (and the guard knows the pool's directory)
        told = _told(monkeypatch)
        seen = _call(executor, "look")
        assert seen["namespace"] != seen["loaded_in"]  # it ran warm, in a namespace of its own
        assert told == []
        executor.calls.close_warm()  # later calls run cold (and get fresh files, which the guard removes at death)
        told.clear()
        result = executor.call("probe", {"action": "look"})
        assert result.status == "ok"
    kinds = [line.split(" ")[0] for message in told for line in message.splitlines()]
    assert kinds == ["P", "F", "F", "F", "+", "-"]  # (files told once, with the marker; + links them, - withdraws)


def test_a_sealed_calls_server_dies_with_the_process_that_started_it() -> None:
    """What lets the guard know nothing of a sealed call: its server's bwrap is told to end with its parent."""
    from toolexec.runtimes.warm_fork import isolated_argv

    argv = isolated_argv(["python", "zygote.py"])
    assert "--die-with-parent" in argv[: argv.index("--")] and "--unshare-pid" in argv[: argv.index("--")]


def _below(server: int) -> set[int]:
    """The processes under warm server ``server`` (its bwrap): bwrap's init, the zygote, its spare's init and process."""
    below = {server}
    for _ in range(4):
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    if int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1]) in below:
                        below.add(int(name))
    return below


def _spare_has_its_namespace(server: int) -> bool:
    """Whether the server's spare has its mount namespace (a third one under the server: the host's, bwrap's, its own)."""
    found = set()
    for pid in _below(server):
        with contextlib.suppress(OSError):
            found.add(os.stat(f"/proc/{pid}/ns/mnt").st_ino)
    return len(found) == 3


def _mount_namespaces_held(server: int) -> list[int]:
    """The mount namespaces (inode numbers) that the processes under warm server ``server`` hold open as descriptors."""
    found = []
    for pid in _below(server):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("mnt:["):
                        found.append(int(link[5:-1]))
    return found


def test_the_server_holds_a_calls_mount_namespace_until_it_said_the_status(project: Project, tmp_path: Path) -> None:
    """The last process of a mount namespace to exit would tear it down before its exit is reported (~1 ms on the
    call's path): the zygote holds each call's namespace, and lets it go once the call's status is said."""
    import threading

    project.tool("sleeper.py", SLEEPER)
    report = tmp_path / "report"
    with project.executor(sandbox="declared") as executor:
        (tmp_path / "first.go").touch()
        first = {"report": str(tmp_path / "first"), "what": "mounts"}
        assert executor.call("sleeper", first).output == "done"  # the server is up
        (server,) = running_servers()
        wait_until(lambda: _spare_has_its_namespace(server), "the next call's spare")  # (else it pays the teardown)
        results: list[object] = []
        arguments = {"report": str(report), "what": "mounts"}
        caller = threading.Thread(target=lambda: results.append(executor.call("sleeper", arguments)))
        caller.start()
        try:
            wait_until(report.exists, "the call to start")
            call_namespace = int(report.read_text())
            assert call_namespace != os.stat("/proc/self/ns/mnt").st_ino
            wait_until(lambda: _mount_namespaces_held(server) == [call_namespace], "the call's namespace held")
        finally:
            Path(f"{report}.go").touch()
            caller.join(60)
        assert [getattr(result, "output", None) for result in results] == ["done"]
        wait_until(lambda: _mount_namespaces_held(server) == [], "the call's namespace let go")  # once its status came


def test_a_warm_server_outlives_the_thread_that_started_it(project: Project) -> None:
    """bwrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the thread that started the server ends (a call
    thread of call_many's pool, an idle anyio worker under toolexec mcp): servers are started by a thread that lives
    as long as the process (toolexec.runtimes.starter), so a server outlives its first caller's thread."""
    import threading

    project.tool("probe.py", PROBE)
    with project.executor(sandbox="declared") as executor:
        starter = threading.Thread(target=lambda: _call(executor, "look"))
        starter.start()
        starter.join(60)
        (server,) = running_servers()
        first = _call(executor, "look")["loaded_in"]
        assert running_servers() == {server}  # the same server took the call
        assert _call(executor, "look")["loaded_in"] == first
