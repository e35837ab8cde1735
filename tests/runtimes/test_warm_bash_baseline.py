"""Warm Bash calls under the sandbox's baseline (``sandbox: declared``, the default): each call runs in a bash that
sourced the tool ahead of the call, process 2 of a PID namespace of its own under the namespace's init, with a /proc
of its own and the default limits, as a cold call under bwrap (runtimes/_bash_zygote.py). The hostile tools of
tests/runtimes/test_baseline.py run warm too (its ``launch_modes``); these check what only such a warm call could get
wrong: that it was warm at all, and that nothing of toolexec, of its server, of a spare or of another call can be
seen, read or signalled, and nothing outlives the call.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import alive, boot_clock, in_pid_namespace, marked_processes, run_executor_script
from tests.helpers import sleeping as _sleepers
from toolexec.records import ToolCall
from toolexec.runtimes import baseline, process_linux
from toolexec.runtimes.warm_fork import running_servers

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available()), reason="needs bwrap, PID namespaces, pidfd and /proc"
)

# A probe that looks around without starting a process (the globs and builtins of bash) before it acts.
PROBE = r"""#!/usr/bin/env bash
# @describe Look around, or attack.
# @meta warm
# @option --action! what to do
# @option --arg its argument
LOADED=$BASHPID
echo x >>"$LLM_TOOL_CACHE_DIR/loads"
main() {
    local processes=() entry
    for entry in /proc/[0-9]*; do processes+=("${entry#/proc/}"); done
    local namespace init warm=false
    mapfile -d '' -t init </proc/1/cmdline  # the namespace's init: bwrap's (a cold call), or a warm server's spare
    [[ ${init[*]} != *_bash_zygote.py* ]] || warm=true
    namespace=$(readlink /proc/self/ns/pid)
    case $argc_action in
    signal)  # toolexec's own pid, as toolexec numbers it; then the namespace's init
        if kill -STOP "$argc_arg" 2>/dev/null; then signalled=sent; else signalled="no such process"; fi
        kill -STOP $PPID
        ;;
    environments)  # every environment this call can read (its own holds the secret's name only)
        found=no
        for entry in /proc/[0-9]*/environ; do
            if grep -qF -- "$argc_arg" "$entry" 2>/dev/null; then found=yes; fi
        done
        ;;
    escape) setsid env -i sleep "$argc_arg" </dev/null >/dev/null 2>&1 & ;;
    wait) sleep "$argc_arg" ;;
    esac
    printf '{"loaded": %s, "pid": %s, "ppid": %s, "namespace": "%s", "processes": [%s], "signalled": "%s", "secret_seen": "%s", "warm": %s, "version": 1}\n' \
        "$LOADED" "$BASHPID" "$PPID" "$namespace" "$(IFS=,; echo "${processes[*]}")" "${signalled-}" "${found-}" "$warm" \
        >>"$LLM_OUTPUT"
}
"""


def _call(executor: object, action: str, arg: str = "", *, warm: bool = True) -> dict:
    result = executor.call("probe", {"action": action, "arg": arg})  # type: ignore[attr-defined]
    assert (result.status, result.stderr) == ("ok", ""), result.error
    seen = json.loads(result.output)
    assert seen["warm"] is warm, seen  # forked from the tool's warm server (its spare), or a cold call under bwrap
    return seen


def test_each_warm_bash_call_runs_alone_in_a_pid_namespace_of_its_own(project: Project, private_tmpdir: Path) -> None:
    project.tool("probe.sh", PROBE)
    with project.executor(sandbox="declared", warm_tools=["probe"]) as executor:
        seen, ended = [], []
        for _ in range(3):
            seen.append(_call(executor, "look"))
            ended.append(boot_clock())
        (server,) = running_servers()  # one server, whatever the count of calls
        assert alive(server)
    mine = os.readlink("/proc/self/ns/pid")
    namespaces = [s["namespace"] for s in seen]
    assert mine not in namespaces
    # As a cold call under bwrap: the tool is process 2 under the namespace's init, sees no other process (but the
    # readlink it started), and was sourced in that very process (a spare: every call's own sourcing).
    assert [(s["pid"], s["ppid"], s["loaded"], s["processes"][:2]) for s in seen] == [(2, 1, 2, [1, 2])] * 3
    assert (executor.config.state.tool_cache("probe") / "loads").read_text().count("x") >= 3
    assert not alive(server)
    # what a call left would have started before it returned (a later namespace, a spare's, may reuse its number)
    for namespace, end in zip(namespaces, ended, strict=True):
        assert in_pid_namespace(namespace, started_before=end) == []
    assert marked_processes(private_tmpdir) == []  # no spare, init or bash of the server's is left
    assert os.listdir(private_tmpdir) == []


def test_concurrent_warm_bash_calls_see_nothing_of_one_another(project: Project) -> None:
    project.tool("probe.sh", PROBE)
    with project.executor(sandbox="declared", warm_tools=["probe"]) as executor:
        _call(executor, "look")
        calls = [ToolCall(name="probe", arguments={"action": "wait", "arg": "0.5"}) for _ in range(4)]
        results = executor.call_many(calls)
        assert len(running_servers()) == 1
    seen = [json.loads(result.output) for result in results]
    assert [s["warm"] for s in seen] == [True] * 4
    assert len({s["namespace"] for s in seen}) == 4
    assert [(s["pid"], s["processes"][:2]) for s in seen] == [(2, [1, 2])] * 4


def test_a_warm_bash_calls_setsid_escapee_is_gone_when_the_call_ends(project: Project, private_tmpdir: Path) -> None:
    project.tool("probe.sh", PROBE)
    token = f"{1000 + int.from_bytes(os.urandom(2), 'big')}.{os.getpid()}"  # a sleep argument no other process has
    with project.executor(sandbox="declared", warm_tools=["probe"]) as executor:
        _call(executor, "look")
        seen = _call(executor, "escape", token)
        returned = boot_clock()
        assert _sleepers(token) == []  # gone by the time the call returned: the kernel ended its namespace
        assert in_pid_namespace(seen["namespace"], started_before=returned) == []
        assert len(running_servers()) == 1  # the call ran warm
    assert marked_processes(private_tmpdir) == []


# The executor runs in a process of its own, which the test can watch (and wake, should the tool stop it).
EXECUTOR = textwrap.dedent(
    """
    import json, os, sys
    from toolexec import Executor
    from toolexec.runtimes.warm_fork import running_servers

    with Executor(sys.argv[1]) as executor:
        for action in ("look", sys.argv[2]):
            arg = str(os.getpid()) if sys.argv[2] == "signal" else sys.argv[3]
            result = executor.call("probe", {"action": action, "arg": arg}, timeout=20)
            print(json.dumps([result.status, result.output, result.error, len(running_servers())]), flush=True)
    """
)


def _run_executor(project: Project, action: str, arg: str = "", **env: str) -> list[list]:
    config = project.configure(sandbox="declared", secret_env=["WARM_SECRET"], warm_tools=["probe"])
    return run_executor_script(EXECUTOR, config, action, arg, env)


def test_a_warm_bash_tool_cannot_stop_toolexec_nor_its_init(project: Project) -> None:
    project.tool("probe.sh", PROBE)
    (look, attack) = _run_executor(project, "signal")
    assert (look[0], look[3], attack[0], attack[3]) == ("ok", 1, "ok", 1), attack  # both warm, and both done
    seen = json.loads(attack[1])
    assert seen["warm"] is True
    # toolexec's pid names no process in the call's namespace; its parent is the namespace's init, which ignores it
    assert (seen["signalled"], seen["ppid"]) == ("no such process", 1)


def test_a_warm_bash_tool_cannot_read_toolexecs_environment(project: Project) -> None:
    project.tool("probe.sh", PROBE)
    secret = f"warm-secret-{os.urandom(8).hex()}"
    (_look, probe) = _run_executor(project, "environments", secret, WARM_SECRET=secret)
    assert (probe[0], probe[3]) == ("ok", 1), probe
    seen = json.loads(probe[1])
    assert seen["warm"] is True
    assert (seen["secret_seen"], seen["processes"][:2]) == ("no", [1, 2])


def test_an_edited_warm_bash_tool_runs_the_new_code_on_the_next_call(project: Project) -> None:
    path = project.tool("probe.sh", PROBE)
    with project.executor(sandbox="declared", warm_tools=["probe"]) as executor:
        assert _call(executor, "look")["version"] == 1
        (first,) = running_servers()
        path.write_text(PROBE.replace('"version": 1', '"version": 2'), encoding="utf-8")
        assert _call(executor, "look")["version"] == 2
        assert running_servers() != {first}


def test_a_bash_tool_that_cannot_be_sourced_runs_cold(project: Project) -> None:
    """Its first spare's bash ends while it sources the tool: the server says why, and every call runs cold (whose
    result is the tool's own)."""
    project.tool("probe.sh", PROBE.replace("LOADED=$BASHPID\n", "LOADED=$BASHPID\n[[ -n ${LLM_OUTPUT-} ]] || exit 3\n"))
    with project.executor(sandbox="declared", warm_tools=["probe"]) as executor:
        seen = _call(executor, "look", warm=False)
        assert (seen["pid"], running_servers()) == (2, frozenset())  # under bwrap's init: a cold call
        (pool,) = [executor.calls._pool]  # type: ignore[attr-defined]
        assert [entry.problem for entry in pool._entries.values()] == ["the tool ended (or failed) while it was sourced"]


def test_the_guard_is_told_nothing_of_a_sealed_warm_bash_call_and_no_signal_goes_to_its_numbers(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sealed call's every process is in its server's PID namespace (bwrap ends it with toolexec): the guard need
    not know it; and once its server said the status, its numbers may be other processes' (reaped): no TERM, no KILL
    and no look for leftovers goes to them."""
    project.tool("probe.sh", PROBE)
    sent: list[tuple[int, int]] = []
    real = os.killpg

    def recorded(pgid: int, sig: int) -> None:
        sent.append((pgid, sig))
        real(pgid, sig)

    told: list[str] = []
    tell = process_linux._tell_guard

    def told_to(message: str) -> bool:
        told.append(message)
        return tell(message)

    with project.executor(sandbox="declared", warm_tools=["probe"]) as executor:
        _call(executor, "look")  # the server is up (and the guard knows the pool's directory)
        monkeypatch.setattr(os, "killpg", recorded)
        monkeypatch.setattr(process_linux, "_tell_guard", told_to)
        seen = [_call(executor, "look") for _ in range(3)]
        monkeypatch.setattr(os, "killpg", real)
        monkeypatch.setattr(process_linux, "_tell_guard", tell)
    assert ([s["pid"] for s in seen], sent, told) == ([2, 2, 2], [], [])


SPARES = 2  # the spares a server keeps waiting (runtimes/_bash_zygote.py, which imports as no package module)


def _namespace_links(pid: int, kind: str) -> set[str]:
    """The ``kind`` namespaces (``mnt:[…]``) that process ``pid`` holds open as descriptors."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith(f"{kind}:["):
                found.add(link)
    return found


def test_the_server_holds_no_mount_namespace_of_a_call_that_is_over(project: Project) -> None:
    """The server holds each call's mount namespace until it has said the call's status (so that its teardown is off
    the call's way: ``_bash_zygote._Reply``): while a call runs, what it holds is that call's and its waiting spares',
    each of a live process of its own; none of the calls before, whose status came."""
    project.tool("probe.sh", PROBE)
    token = f"{1000 + int.from_bytes(os.urandom(2), 'big')}.{os.getpid()}"  # a sleep argument no other process has
    with project.executor(sandbox="declared", warm_tools=["probe"]) as executor:
        for _ in range(4):  # calls whose status came: nothing of theirs is held
            _call(executor, "look")
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(executor.call, "probe", {"action": "wait", "arg": token})
            while not _sleepers(token) and not running.done():
                os.sched_yield()
            (zygote,) = [pid for pid in _descendants(os.getpid()) if _is_zygote(pid)]
            held = _namespace_links(zygote, "mnt")
            live = {}
            for child in _task_children(zygote):
                with contextlib.suppress(OSError):
                    live[os.readlink(f"/proc/{child}/ns/mnt")] = os.readlink(f"/proc/{child}/ns/pid")
            for pid in _sleepers(token):
                os.kill(pid, signal.SIGKILL)
            result = running.result()
    assert (result.status, json.loads(result.output)["warm"]) == ("ok", True)  # (its sleep killed here: it ran until then)
    # each a live init's (the running call's, or a waiting spare's): at most one for each (namespaces' numbers are
    # used again once freed, so a call's before cannot be named by its number)
    assert held and held <= set(live) and len(held) <= SPARES + 1, (held, live)


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        for child in _task_children(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


def _task_children(pid: int) -> set[int]:
    children: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                children |= {int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()}
    return children


def _is_zygote(pid: int) -> bool:
    """The warm Bash server of the baseline (``_bash_zygote.py``), not one of its spares' inits (forks of it)."""
    try:
        mine = Path(f"/proc/{pid}/cmdline").read_bytes()
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        theirs = Path(f"/proc/{parent}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return False
    argv = mine.split(b"\0")
    # (bwrap, which started it, names it too; a spare's init is a fork of it: the same command line)
    return any(arg.endswith(b"/_bash_zygote.py") for arg in argv) and not argv[0].endswith(b"bwrap") and theirs != mine
