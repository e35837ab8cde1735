"""A warm Python server offers each spare it makes ahead to toolexec, which sends the next call to it directly (no
hop through the server; runtimes/_python_zygote.py ``_Spares.offer``, runtimes/warm_fork.py ``_send_to_spare``): the
call's message never enters the server's memory, a spare that ended meanwhile leaves the call to the server, and a
status that comes before the server heard the call was taken is said as it came."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import toolexec.runtimes
from tests.conftest import Project
from tests.helpers import wait_until
from toolexec import Executor
from toolexec.runtimes import baseline, process_linux, sandbox, warm, warm_fork

RUNTIMES = str(Path(toolexec.runtimes.__file__).parent)

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available() and sandbox.mechanism()[0] == "bwrap"),
    reason="needs bwrap, PID namespaces, pidfd and /proc",
)

# Its top level keeps every message the server hands on (in the server: every later spare is forked with them), and
# each call says what it found there, and what it was given.
SEEING = '''
import sys

ZYGOTE = sys.modules.get("_python_zygote")  # (None in a cold call)
KEPT = []
if ZYGOTE is not None:
    handed = ZYGOTE._hand_over

    def _keep(spares, data, fds, children):
        KEPT.append(bytes(data))
        return handed(spares, data, fds, children)

    ZYGOTE._hand_over = _keep


def run(secret: str) -> dict:
    """Say what of the calls' messages this process was forked with.

    Warm: true

    Args:
        secret: a value only this call is given
    """
    seen = [data.decode("latin-1") for data in KEPT]
    return {"warm": ZYGOTE is not None, "secret": secret, "calls_seen": [s for s in seen if "SECRET" in s]}
'''
MODES = ["baseline", "strict", "off"]


def _servers() -> list[warm_fork.ForkServer]:
    return [
        entry.server
        for pool in warm.live_pools()
        for entry in list(pool._entries.values())
        if isinstance(entry.server, warm_fork.ForkServer)
    ]


def _offered() -> None:
    """Wait until the tool's server is up (a tool's first call may run cold while it starts) and has offered its
    next spare (made once a call's status is said)."""
    wait_until(lambda: [server.offered(timeout=0.1) for server in _servers()] == [True], "a spare offered")


def _settings(mode: str) -> dict[str, str]:
    return {} if mode == "baseline" else {"sandbox": mode}


@pytest.mark.parametrize("mode", MODES)
def test_a_call_sent_to_its_offered_spare_never_passes_through_the_server(project: Project, mode: str) -> None:
    """Every call after an offer goes to the spare directly: the server, whose memory every later spare is forked
    from, never holds its message (its top level, which sees each message it hands on, saw none of them). Before,
    each call came through the server, and the next spare carried the call's arguments in the author's KEPT."""
    project.tool("seeing.py", SEEING)
    with Executor(project.configure(**_settings(mode)), warm=True) as executor:
        assert executor.call("seeing", {"secret": "warm-up"}).status == "ok"  # (the server's start)
        results = []
        for n in range(3):
            _offered()
            results.append(executor.call("seeing", {"secret": f"SECRET-{n}"}))
    said = [json.loads(result.output) for result in results if result.status == "ok"]
    assert [(one["warm"], one["secret"], one["calls_seen"]) for one in said] == [(True, f"SECRET-{n}", []) for n in range(3)], (
        results
    )


@pytest.mark.parametrize("mode", MODES)
def test_calls_that_follow_one_another_at_once_each_go_to_an_offered_spare(project: Project, mode: str) -> None:
    """A call sent as soon as the last one's result came (as over MCP at concurrency 1) waits for the spare the
    server offers once that call is over (it forks it then): sent before the offer, it went through the server,
    which forked another spare for it on its path (and which then held its message)."""
    project.tool("seeing.py", SEEING)
    with Executor(project.configure(**_settings(mode)), warm=True) as executor:
        assert executor.call("seeing", {"secret": "warm-up"}).status == "ok"  # (the server's start)
        _offered()
        results = [executor.call("seeing", {"secret": f"SECRET-{n}"}) for n in range(4)]
    said = [json.loads(result.output) for result in results if result.status == "ok"]
    assert [(one["warm"], one["secret"], one["calls_seen"]) for one in said] == [(True, f"SECRET-{n}", []) for n in range(4)], (
        results
    )


def _offered_process(server: warm_fork.ForkServer) -> int:
    """The pid (in this process's numbering) of the spare the server offered: a child of the server's process whose
    pid in its parent's PID namespace is the one offered (``NSpid``: one number per namespace, outermost first); the
    shallowest such parent is the server (a call's process has its init's numbering, one namespace deeper)."""
    proc = server._proc
    assert proc is not None and len(server._offers) == 1
    offered = server._offers[0][0]
    below, matches = [proc.pid], []
    while below:
        pid = below.pop()
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                children = [int(child) for child in handle.read().split()]
            below += children
            depth = len(_nspid(pid))
            matches += [(depth, child) for child in children if _nspid(child)[depth - 1 : depth] == [offered]]
    return min(matches)[1]


def _nspid(pid: int) -> list[int]:
    with open(f"/proc/{pid}/status") as handle:
        return next([int(n) for n in line.split()[1:]] for line in handle if line.startswith("NSpid:"))


@pytest.mark.parametrize("mode", MODES)
def test_an_offered_spare_that_ended_leaves_the_call_to_its_server(project: Project, mode: str) -> None:
    """The spare toolexec holds is killed before the call: the send finds it gone, the server hands the call to a
    spare made then, and the call gets its own result; the next call goes to a new offered spare again."""
    project.tool("seeing.py", SEEING)
    with Executor(project.configure(**_settings(mode)), warm=True) as executor:
        assert executor.call("seeing", {"secret": "warm-up"}).status == "ok"
        _offered()
        (server,) = _servers()
        spare = _offered_process(server)
        os.kill(spare, signal.SIGKILL)  # (a spare's init: its namespace ends with it)
        process_linux.await_end(spare, 10.0)
        after = executor.call("seeing", {"secret": "SECRET-after"})
        _offered()
        again = executor.call("seeing", {"secret": "SECRET-again"})
    assert [(result.status, result.stderr) for result in (after, again)] == [("ok", "")] * 2, (after, again)
    said = [json.loads(result.output) for result in (after, again)]
    assert [(one["warm"], one["secret"]) for one in said] == [(True, "SECRET-after"), (True, "SECRET-again")]
    # the call after the kill came through the server (which keeps its message: this top level's doing), the next
    # went to an offered spare, whose server saw it not
    assert [["SECRET-after" in seen for seen in one["calls_seen"]] for one in said] == [[True], [True]]


TAKEN = """
import json, os, socket, sys
sys.path.insert(0, sys.argv[1])
import _python_zygote as zygote

spares = zygote._Spares(None, None, None)
children = {}
said = {"ended": 0}
def ended():  # (a status said: the zygote makes the next spare)
    said["ended"] += 1
spares.ended = ended

def taken(pid):
    ours, theirs = socket.socketpair()
    zygote._taken_directly(spares, pid, [theirs.detach()], children)
    ours.setblocking(False)
    try:
        return ours.recv(64).decode()
    except BlockingIOError:
        return "waiting"

# an offered spare reaped before toolexec said it took it: its status is said as the reap gave it
child = os.fork()
if child == 0:
    os._exit(3)
os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)
spares.offered = (child, None)
spares.made.add(child)
zygote._reap(children, spares)
said["early"] = [spares.offered, dict(spares.ended_early) == {child: 3 << 8}, taken(child), spares.ended_early]
# a pid no spare offered has: the socket is closed at once, with nothing said (the call counts as killed)
said["unknown"] = taken(4242)
# the spare offered: the zygote says its status once it ends
spares.offered = (os.getpid(), None)
spares.made.add(os.getpid())
said["offered"] = [taken(os.getpid()), spares.offered, os.getpid() in children, os.getpid() in spares.made]
print(json.dumps(said))
"""


def test_a_status_that_comes_before_the_server_hears_the_call_was_taken_is_said_as_it_came() -> None:
    """The call went to the spare directly and was over before the server read ``T``: the spare's reap keeps its
    status, said on the call's reply socket once ``T`` comes. ``T`` for a pid not offered says nothing; ``T`` for the
    offered spare makes it the server's call (its status said when it ends)."""
    done = subprocess.run([sys.executable, "-c", TAKEN, RUNTIMES], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done
    assert json.loads(done.stdout) == {
        "early": [None, True, "X768\n", {}],
        "unknown": "",
        "offered": ["waiting", None, True, False],
        "ended": 1,
    }
