"""A warm server's load is bound by the limits a cold call of the same tool is bound by (runtimes/warm_limits.py).

The tool's top level runs once in its warm Python server; cold, it runs in every call, under the call's processes,
CPU seconds, address space and file size. A hostile top level goes past one of them: where the server's load was not
held to it (a confined server's processes and CPU seconds, every limit of the baseline's server), it went on in the
server (300 processes where a cold call got 29). Now the server's load is held to them: it fails, the call runs cold
and gets the cold call's result, and nothing is left behind. Each top level leaves a mark in the tool's cache when it
got past its limit (which no cold call does): the mark says the load was not held. An ordinary tool under the same
limits still runs warm (its call is a fork of the zygote).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.conftest import Project
from tests.helpers import confined_warm_usable
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
    "baseline": ("declared", ""),
}
CASES = [(mode, limit) for mode in MODES for limit in PAST if not (mode == "baseline" and limit == "memory")]


def _executor(project: Project, mode: str, limit: str, load: str, *, warm: bool) -> Executor:
    sandbox, policy = MODES[mode]
    line = PAST[limit][0]  # (alone, for a tool that declares no policy: the baseline's)
    project.tool("loads.py", TOOL.replace("{load}", load).replace("{policy}", f"{policy}    {line}\n"))
    return Executor(project.configure(sandbox=sandbox), warm=warm)


def _seen(result: Any) -> tuple[object, ...]:
    """What a call's result says, but its timing and ids."""
    return (result.ok, result.status, result.reason, result.output, result.error, result.exit_code, result.signal)


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
    assert (warm, cold[2], _cache(project)) == (cold, reason, [])
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
    limits = "    Processes: 16\n    CPU: 5 s\n    File size: 64 KiB\n" + ("    Memory: 512 MiB\n" if mode != "baseline" else "")
    project.tool("loads.py", TOOL.replace("{load}", load).replace("{policy}", policy + limits))
    with Executor(project.configure(sandbox=sandbox), warm=True) as executor:
        said = [_seen(executor.call("loads", {})) for _ in range(2)]
    assert said == [(True, "ok", None, "warm", None, 0, None)] * 2
