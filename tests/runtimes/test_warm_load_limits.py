"""A warm server's load is bound by the limits a cold call of the same tool is bound by (runtimes/warm_limits.py).

The tool's top level runs once in its warm Python server (in a Bash or Node spare, ahead of its call); cold, it runs
in every call, under the call's processes, CPU seconds, address space and file size. A hostile top level goes past one
of them: where the load was not held to it (a confined server's processes and CPU seconds, every limit of the
baseline's servers and of Node's spares), it went on there (300 processes where a cold call got 29). Now the server's load is held to them: it fails, the call runs cold
and gets the cold call's result, and nothing is left behind. Each top level leaves a mark in the tool's cache when it
got past its limit (which no cold call does): the mark says the load was not held. An ordinary tool under the same
limits still runs warm (its call is a fork of the zygote).
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest

from tests.conftest import Project
from tests.helpers import Ordinary, confined_warm_usable
from toolexec import Executor

pytestmark = [
    pytest.mark.skipif(not confined_warm_usable(), reason="needs bwrap, PID namespaces, pidfd and /proc"),
    pytest.mark.usefixtures("no_new_zombie"),
]

# Each goes past its limit at load, and marks the tool's cache when it could (a cold call never can).
PAST = {
    "processes": (
        "Processes: 16",
        """
children = []
try:
    for _ in range(40):
        pid = os.fork()
        if pid == 0:
            os.close(keep)
            os.read(hold, 1)
            os._exit(0)
        children.append(pid)
    mark()
finally:
    os.close(keep)
    for pid in children:
        os.waitpid(pid, 0)
""",
    ),
    "cpu": (
        "CPU: 1 s",
        """
import resource
while True:
    used = resource.getrusage(resource.RUSAGE_SELF)
    if used.ru_utime + used.ru_stime > 3:
        mark()
        break
""",
    ),
    "memory": ("Memory: 256 MiB", "block = bytearray(1 << 30)\nmark()\n"),
    "file_size": (
        "File size: 64 KiB",
        """
with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "big"), "wb") as big:
    big.write(b"x" * (1 << 20))
    big.flush()
mark()
""",
    ),
}

TOOL = '''
import os, sys

hold, keep = os.pipe()


def mark():
    with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "past"), "w") as out:
        out.write("the load got past its limit")

{load}

def run() -> str:
    """Say whether this call is a fork of the warm server.

    Warm: true
{policy}
    """
    return "warm" if "_python_zygote" in sys.modules else "cold"
'''

# How each sandbox is asked for: config's sandbox setting, and the policy lines beside the limit.
MODES = {
    "declared": ("declared", "    Writes: cache\n    Network: none\n"),
    "strict": ("strict", ""),
    "limit-alone": ("declared", ""),  # a policy of its limit alone (the rest its defaults: no network, writes cache)
}
CASES = [(mode, limit) for mode in MODES for limit in PAST if not (mode == "limit-alone" and limit == "memory")]


def _executor(project: Project, mode: str, limit: str, load: str, *, warm: bool) -> Executor:
    sandbox, policy = MODES[mode]
    line = PAST[limit][0]
    project.tool("loads.py", TOOL.replace("{load}", load).replace("{policy}", f"{policy}    {line}\n"))
    return Executor(project.configure(sandbox=sandbox), warm=warm)


def _seen(result: Any) -> tuple[object, ...]:
    """What a call's result says, but its timing and ids."""
    return (result.ok, result.status, result.reason, result.output, result.error, result.exit_code, result.signal)


def _cgroups_left() -> list[str]:
    """The cgroups this process made (its calls' and servers') that are still there once their removal is done."""
    from toolexec.runtimes import cgroup, sandbox

    cgroup.drain()
    found = []
    for parent in {sandbox._pids_root(), (cgroup.memory_parent() or (None,))[0]} - {None}:
        assert parent is not None
        found += [name for name in os.listdir(parent) if name.startswith(f"toolexec-{os.getpid()}-")]
    return found


def _cache(project: Project) -> list[str]:
    found = []
    for _, _, files in os.walk(project.root.parent):
        found += [name for name in files if name == "past"]
    return found


@pytest.mark.parametrize(("mode", "limit"), CASES)
def test_a_top_level_past_its_limit_at_load_runs_cold_with_the_cold_outcome(project: Project, mode: str, limit: str) -> None:
    """The call's result is the cold call's (its limit's reason), no load got past the limit, nothing is left."""
    from toolexec.runtimes.warm_fork import running_servers

    before = running_servers()
    with _executor(project, mode, limit, PAST[limit][1], warm=False) as executor:
        cold = _seen(executor.call("loads", {}))
    with _executor(project, mode, limit, PAST[limit][1], warm=True) as executor:
        warm = _seen(executor.call("loads", {}))
    reason = {"processes": "process_limit", "cpu": "cpu_limit", "memory": "memory_limit"}.get(limit, "file_size_limit")
    assert (warm, cold[2], _cache(project), _cgroups_left()) == (cold, reason, [], [])
    assert running_servers() <= before


@pytest.mark.parametrize("mode", list(MODES))
def test_an_ordinary_tool_under_the_same_limits_still_runs_warm(project: Project, mode: str) -> None:
    """Its load forks a few processes (and waits for them), spins a little, allocates and writes a little: within every
    limit, so its server serves its calls (each a fork of the zygote)."""
    load = """
import resource
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
block = bytearray(1 << 20)
with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "small"), "wb") as small:
    small.write(b"x" * 1024)
"""
    sandbox, policy = MODES[mode]
    limits = "    Processes: 16\n    CPU: 5 s\n    File size: 64 KiB\n" + (
        "    Memory: 512 MiB\n" if mode != "limit-alone" else ""
    )
    project.tool("loads.py", TOOL.replace("{load}", load).replace("{policy}", policy + limits))
    with Executor(project.configure(sandbox=sandbox), warm=True) as executor:
        said = [_seen(executor.call("loads", {})) for _ in range(2)]
    assert (said, _cgroups_left()) == ([(True, "ok", None, "warm", None, 0, None)] * 2, [])


# As an ordinary user (RLIMIT_NPROC binds: no cgroup), each case's warm-configured call and cold call, and any mark.
ORDINARY_CALLS = """
import json, os, sys
import yaml
from toolexec import Executor

root, cases = sys.argv[1], json.loads(sys.argv[2])
found = []
for sandbox, source in cases:
    with open(os.path.join(root, "functions", "tools", "loads.py"), "w") as out:
        out.write(source)
    with open(os.path.join(root, "config.yaml"), "w") as out:
        yaml.safe_dump({"visible_tools": ["loads.py"], "sandbox": sandbox}, out)
    seen = []
    for warm in (False, True, True):
        with Executor(os.path.join(root, "config.yaml"), warm=warm) as executor:
            r = executor.call("loads", {})
            seen.append([r.ok, r.status, r.reason, r.output, r.error, r.exit_code, r.signal])
    marks = [name for _, _, files in os.walk(root) for name in files if name == "past"]
    found.append([seen, marks])
print(json.dumps(found))
"""


def test_an_ordinary_users_warm_load_is_bound_by_its_processes_and_cpu(ordinary: Ordinary) -> None:
    """As an ordinary user (``RLIMIT_NPROC`` binds, no cgroup is made): a top level past ``Processes`` or ``CPU`` at
    load gets the cold call's outcome, marks nothing; an ordinary tool under the same limits runs warm."""
    cases = []
    for mode in ("declared", "limit-alone"):
        sandbox, policy = MODES[mode]
        for limit in ("processes", "cpu"):
            line, load = PAST[limit]
            cases.append([sandbox, TOOL.replace("{load}", load).replace("{policy}", f"{policy}    {line}\n")])
        cases.append([sandbox, TOOL.replace("{load}", "").replace("{policy}", f"{policy}    Processes: 16\n    CPU: 5 s\n")])
    ordinary.own()
    done = ordinary.run("python", "-c", ORDINARY_CALLS, str(ordinary.root), json.dumps(cases))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    # each case: the three calls' reasons, whether the three results are one, the marks left
    hostile = [[[reason] * 3, True, []] for reason in ("process_limit", "cpu_limit")]
    expected = [*hostile, [[None] * 3, False, []]] * 2  # (the ordinary tool's: once cold, then warm)
    assert [[[call[2] for call in seen], all(call == seen[0] for call in seen), marks] for seen, marks in found] == expected
    ordinary_tool = [seen for seen, _ in found[2::3]]
    assert ordinary_tool == [[[True, "ok", None, output, None, 0, None] for output in ("cold", "warm", "warm")]] * 2


# A Python tool with no policy under the baseline's own limits: CPU seconds from the timeout (here 1 s: the timeout x
# the CPUs + 1, the timeout comes first), file size max_kept_bytes (here 64 KiB), processes baseline.PROCESSES (here
# 16). Each load marks the cache when it got past (the CPU one: past the hard limit, the CPUs + 2 seconds).
BASELINE_PAST = {
    "processes": PAST["processes"][1],
    "cpu": PAST["cpu"][1].replace("> 3:", "> (os.cpu_count() or 1) + 3:"),
    "file_size": PAST["file_size"][1],
}
BASELINE_REASONS = {"processes": "process_limit", "cpu": "timeout", "file_size": "file_limit"}


@pytest.mark.parametrize("limit", list(BASELINE_PAST))
def test_a_python_top_level_past_the_baselines_own_limits_runs_as_cold(
    project: Project, limit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline's server (no policy: the zygote in the baseline's namespaces) loads under the baseline's limits: a
    top level past one gets the cold call's result, marks nothing, leaves nothing."""
    from toolexec.runtimes import baseline

    monkeypatch.setattr(baseline, "PROCESSES", 16)
    # the exact cap of a patched PROCESSES is the pids cgroup's: root's PID-namespace cap (pid_max, Linux 6.14 on) is a
    # range, PROCESSES + the 300 PIDs the kernel reserves (tests/runtimes/test_baseline_pid_max.py tests that one)
    monkeypatch.setenv("TOOLEXEC_PIDS_CGROUP", "1")
    project.tool("loads.py", TOOL.replace("{load}", BASELINE_PAST[limit]).replace("{policy}", ""))
    results = []
    for warm in (False, True):
        with Executor(project.configure(sandbox="declared", timeout=1, max_kept_bytes=65536), warm=warm) as executor:
            results.append(_seen(executor.call("loads", {})))
    cold, warm_result = results
    assert (warm_result, cold[2], _cache(project), _cgroups_left()) == (cold, BASELINE_REASONS[limit], [], [])


def test_an_ordinary_python_tool_under_the_baselines_own_limits_still_runs_warm(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same limits (a longer timeout), a top level within them: served warm."""
    from toolexec.runtimes import baseline

    monkeypatch.setattr(baseline, "PROCESSES", 16)
    project.tool("loads.py", TOOL.replace("{load}", "").replace("{policy}", ""))
    with Executor(project.configure(sandbox="declared", timeout=20, max_kept_bytes=65536), warm=True) as executor:
        said = [_seen(executor.call("loads", {})) for _ in range(2)]
    assert (said, _cgroups_left()) == ([(True, "ok", None, "warm", None, 0, None)] * 2, [])


# Bash and Node under the baseline (a declared limit is a policy, which their servers cannot keep: such calls run cold):
# each spare sources (imports) the tool ahead of its call, under the baseline's CPU seconds (the timeout x the CPUs
# + 1: here 1 s) and file size (max_kept_bytes: here 64 KiB). A top level past them marks the cache when it could;
# an ordinary one says whether it loaded with the call's own variables (cold) or ahead of them (warm: a spare's
# environment has no LLM_OUTPUT).
BASH = """#!/usr/bin/env bash
# @describe L.
# @meta warm
LOADED_WITH="${LLM_OUTPUT:-}"
{load}
main() {
  if [ -n "$LOADED_WITH" ]; then echo cold >> "$LLM_OUTPUT"; else echo warm >> "$LLM_OUTPUT"; fi
}
"""
BASH_PAST = {
    "cpu": """past=$(( $(nproc) + 3 ))
while :; do
  for ((i = 0; i < 20000; i++)); do :; done
  times > "$LLM_TOOL_CACHE_DIR/times"
  read -r user system < "$LLM_TOOL_CACHE_DIR/times"
  user=${user#*m}; system=${system#*m}
  if [ $(( ${user%%.*} + ${system%%.*} )) -ge "$past" ]; then echo x > "$LLM_TOOL_CACHE_DIR/past"; break; fi
done""",
    "file_size": 'printf "%*s" 1048576 x > "$LLM_TOOL_CACHE_DIR/big"\necho x > "$LLM_TOOL_CACHE_DIR/past"',
}
NODE = """import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const LOADED_WITH = process.env.LLM_OUTPUT;
const mark = () => fs.writeFileSync(path.join(process.env.LLM_TOOL_CACHE_DIR, "past"), "x");
{load}

/**
 * Say whether this call imported the tool ahead of it.
 * @warm
 */
export function run() {
  return LOADED_WITH ? "cold" : "warm";
}
"""
NODE_PAST = {
    "cpu": """const past = (os.cpus().length + 3) * 1e6;
for (;;) {
  const used = process.cpuUsage();
  if (used.user + used.system > past) { mark(); break; }
}""",
    "file_size": 'fs.writeFileSync(path.join(process.env.LLM_TOOL_CACHE_DIR, "big"), Buffer.alloc(1 << 20));\nmark();',
}
SPARES = {"bash": ("loads.sh", BASH, BASH_PAST), "node": ("loads.js", NODE, NODE_PAST)}
BASELINE = {"sandbox": "declared", "timeout": 1, "max_kept_bytes": 65536}


@pytest.mark.parametrize("language", list(SPARES))
@pytest.mark.parametrize("limit", ["cpu", "file_size"])
def test_a_bash_or_node_top_level_past_its_limit_runs_as_cold(project: Project, language: str, limit: str) -> None:
    """A Bash or Node spare sources (imports) the tool ahead of its call: past the baseline's CPU seconds or file size
    there, the call's result is the cold call's (a timeout: the timeout comes before the CPU limit; its file size
    limit) and no spare got past the limit."""
    if language == "node" and shutil.which("node") is None:
        pytest.skip("needs node")
    name, template, past = SPARES[language]
    project.tool(name, template.replace("{load}", past[limit]))
    results = []
    for warm in (False, True):
        with Executor(project.configure(**BASELINE), warm=warm) as executor:
            results.append(_seen(executor.call("loads", {})))
    cold, warm_result = results
    reason = {"cpu": "timeout", "file_size": "file_limit"}[limit]  # (max_kept_bytes': the baseline's own reason)
    assert (warm_result, cold[2], _cache(project)) == (cold, reason, [])


@pytest.mark.parametrize("language", list(SPARES))
def test_an_ordinary_bash_or_node_tool_under_the_same_limits_still_runs_warm(project: Project, language: str) -> None:
    """The same limits (a longer timeout), a top level within them: its calls run warm (loaded ahead of the call)."""
    if language == "node" and shutil.which("node") is None:
        pytest.skip("needs node")
    name, template, _ = SPARES[language]
    project.tool(name, template.replace("{load}", ""))
    with Executor(project.configure(**{**BASELINE, "timeout": 20}), warm=True) as executor:
        said = [_seen(executor.call("loads", {})) for _ in range(2)]
    assert [(*seen[:3], str(seen[3]).strip()) for seen in said] == [(True, "ok", None, "warm")] * 2


WAITER = '''
import sys


def run(started: str, go: str) -> str:
    """Say that this call runs, wait for the test's word, say whether it is warm.

    Warm: true

    Args:
        started: a FIFO this call says it runs on
        go: a FIFO it waits on
    """
    with open(started, "w") as out:
        out.write("x")
    with open(go) as wait:
        wait.read()
    return "warm" if "_python_zygote" in sys.modules else "cold"
'''


def _zygote(server: int) -> int:
    """The zygote of the warm server whose host process (its bwrap) is ``server``: the nearest Python running
    python_zygote.py below it (its calls are forks of it, deeper down)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(name))
    level = [server]
    while level:
        for pid in level:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                program, *args = handle.read().split(b"\0")
            if os.path.basename(program).startswith(b"python") and args and args[0].endswith(b"python_zygote.py"):
                return pid
        level = [child for pid in level for child in children.get(pid, [])]
    raise AssertionError("no zygote under the server")


def test_a_server_at_its_cpu_soft_limit_takes_no_more_calls_and_ends_after_those_it_serves(project: Project) -> None:
    """A server's own CPU time grows with each call it forks, under its calls' CPU limit (the baseline's: from the
    timeout): at the soft limit (SIGXCPU, sent here by the test) it stops taking calls and ends once they are over. The call in flight then completes warm,
    and the next call is served (by a new server). Without it, SIGXCPU's default ended the server, and with it (its
    PID namespace) the call in flight."""
    import select
    import signal
    from concurrent.futures import ThreadPoolExecutor

    from toolexec.runtimes.warm_fork import running_servers

    project.tool("waiter.py", WAITER)
    fifos = [project.root / name for name in ("started", "go", "started2", "go2")]
    for fifo in fifos:
        os.mkfifo(fifo)
    before = running_servers()
    with Executor(project.configure(sandbox="declared"), warm=True) as executor, ThreadPoolExecutor(1) as pool:
        future = pool.submit(executor.call, "waiter", {"started": str(fifos[0]), "go": str(fifos[1])})
        started = os.open(fifos[0], os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert select.select([started], [], [], 60)[0], "the call did not start"
        finally:
            os.close(started)
        (server,) = running_servers() - before
        os.kill(_zygote(server), signal.SIGXCPU)
        with open(fifos[1], "w") as go:
            go.write("x")
        first = future.result(timeout=60)
        second = pool.submit(executor.call, "waiter", {"started": str(fifos[2]), "go": str(fifos[3])})
        with open(fifos[2]) as said:
            said.read()
        with open(fifos[3], "w") as go:
            go.write("x")
        later = second.result(timeout=60)
    # (the next call: a new server's, or cold while the old one finishes; either way, served)
    assert (_seen(first), _seen(later)[:3]) == ((True, "ok", None, "warm", None, 0, None), (True, "ok", None))


# Under ``sandbox: off`` a call's one limit is its file size (max_kept_bytes, for every call): each language's server
# (a Python fork server, one bash that sourced the tool, a Node spare) loads the tool under it too.
OFF = {
    "python": ("loads.py", TOOL.replace("{policy}", ""), PAST["file_size"][1]),
    "bash": ("loads.sh", BASH, BASH_PAST["file_size"]),
    "node": ("loads.js", NODE, NODE_PAST["file_size"]),
}


@pytest.mark.parametrize("language", list(OFF))
def test_under_sandbox_off_a_top_level_past_its_file_size_runs_as_cold(project: Project, language: str) -> None:
    """A top level that writes past max_kept_bytes as it loads: the call's result is the cold call's (``file_limit``),
    and no load got past it; an ordinary tool still runs warm."""
    if language == "node" and shutil.which("node") is None:
        pytest.skip("needs node")
    name, template, load = OFF[language]
    project.tool(name, template.replace("{load}", load))
    results = []
    for warm in (False, True):
        with Executor(project.configure(sandbox="off", max_kept_bytes=65536), warm=warm) as executor:
            results.append(_seen(executor.call("loads", {})))
    cold, warm_result = results
    assert (warm_result, cold[2], _cache(project)) == (cold, "file_limit", [])
    project.tool(name, template.replace("{load}", ""))
    with Executor(project.configure(sandbox="off", max_kept_bytes=65536), warm=True) as executor:
        said = [_seen(executor.call("loads", {})) for _ in range(2)]
    assert [(*seen[:3], str(seen[3]).strip()) for seen in said] == [(True, "ok", None, "warm")] * 2
