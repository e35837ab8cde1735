"""Calls of one warm Python tool whose timeouts differ share its server (runtimes/warm.py, ``CPU_PER_CALL``).

Under the sandbox's baseline a call's CPU seconds come from its timeout (:func:`toolexec.runtimes.baseline.cpu_seconds`)
and a warm server's load runs under its calls' limits: keyed by them, calls that alternated timeouts retired each
other's server, and every call paid a new one's start. Now one server serves every call whose CPU bound is at most its
own; each call's process sets its own bound (a process's CPU time is its own: a forked child's starts at zero), and a
call whose bound the server's load alone reached meets it at once, as its cold call would have while loading.

The bounds here are made small (``cpu_seconds`` patched: timeout 41 s is 1 CPU second, 42 s is 2) so that a call
meets its own in a second or two.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Project
from tests.helpers import confined_warm_usable
from toolexec import Executor

pytestmark = [
    pytest.mark.skipif(not confined_warm_usable(), reason="needs bwrap, PID namespaces, pidfd and /proc"),
    pytest.mark.usefixtures("no_new_zombie"),
]

TOOL = '''
import resource, sys

{load}

def run(action: str) -> str:
    """Say the CPU limit this call's process has, or spin until it meets it.

    Warm: true

    Args:
        action: limits or spin
    """
    if action == "spin":
        while True:
            pass
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    return f"{'warm' if '_python_zygote' in sys.modules else 'cold'} {soft} {hard}"
'''

# The load spins this long (CPU seconds): past a bound of 1, within a bound of 2
SPIN_LOAD = """
while sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) < 1.3:
    pass
"""


@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolexec.runtimes import baseline

    monkeypatch.setattr(baseline, "cpu_seconds", lambda timeout: None if not timeout else int(timeout) - 40)


def _seen(result: Any) -> tuple[object, ...]:
    return (result.ok, result.status, result.reason, result.output, result.error, result.exit_code, result.signal)


def _server(before: frozenset[int]) -> int:
    from toolexec.runtimes.warm_fork import running_servers

    (found,) = running_servers() - before
    return found


@pytest.mark.parametrize("sandbox", ["declared", "strict"])
def test_calls_that_alternate_timeouts_share_one_server_each_under_its_own_cpu_bound(project: Project, sandbox: str) -> None:
    """Timeouts 41, 42, 41, 42, 41: the first call's server (bound 1) gives way once to one under the higher bound
    (2), which serves every later call; each call's process has its own bound (soft, and hard a second later), and a
    call that spins meets its own: killed at it with ``cpu_limit``, as its cold call is."""
    from toolexec.runtimes.warm_fork import running_servers

    project.tool("limits.py", TOOL.replace("{load}", ""))
    before = running_servers()
    with Executor(project.configure(sandbox=sandbox), warm=True) as executor:
        said, servers = [], []
        for timeout in (41, 42, 41, 42, 41):
            said.append(_seen(executor.call("limits", {"action": "limits"}, timeout=timeout)))
            servers.append(_server(before))
        spins = [_seen(executor.call("limits", {"action": "spin"}, timeout=timeout)) for timeout in (41, 42)]
        servers.append(_server(before))
    with Executor(project.configure(sandbox=sandbox), warm=False) as executor:
        cold = [_seen(executor.call("limits", {"action": "spin"}, timeout=41))]
    limits = {41: "warm 1 2", 42: "warm 2 3"}
    assert said == [(True, "ok", None, limits[timeout], None, 0, None) for timeout in (41, 42, 41, 42, 41)]
    assert (servers[0] != servers[1], set(servers[1:])) == (True, {servers[1]})
    error = cold[0][4]
    assert isinstance(error, str) and "1 CPU seconds" in error
    assert spins == [cold[0], (*cold[0][:4], error.replace("1 CPU seconds", "2 CPU seconds"), *cold[0][5:])]
    assert cold[0][:3] == (False, "error", "cpu_limit")
    assert running_servers() <= before


@pytest.mark.parametrize("sandbox", ["declared", "strict"])
def test_a_call_whose_bound_the_load_alone_reached_meets_it_as_cold(project: Project, sandbox: str) -> None:
    """The tool's top level spins 1.3 CPU seconds: its server, started for a call bound by 2, serves it; a call bound by
    1 (which cold meets while the tool loads) gets the cold call's outcome in that server, not a result."""
    from toolexec.runtimes.warm_fork import running_servers

    project.tool("limits.py", TOOL.replace("{load}", SPIN_LOAD))
    before = running_servers()
    with Executor(project.configure(sandbox=sandbox), warm=True) as executor:
        within = _seen(executor.call("limits", {"action": "limits"}, timeout=42))
        server = _server(before)
        past = _seen(executor.call("limits", {"action": "limits"}, timeout=41))
        again = _server(before)
    with Executor(project.configure(sandbox=sandbox), warm=False) as executor:
        cold = _seen(executor.call("limits", {"action": "limits"}, timeout=41))
    assert (within, past, again) == ((True, "ok", None, "warm 2 3", None, 0, None), cold, server)
    assert cold[:3] == (False, "error", "cpu_limit")
    assert running_servers() <= before
