"""A warm Bash call's init under the sandbox's baseline is out of its tool's reach (runtimes/_bash_zygote.py).

The init is process 1 of the call's PID namespace, the tool's bash its child, of the same user with no capability
more (an ordinary user's) or root's (root's). Whatever the tool does to it (open ``/proc/1/mem`` for writing, read
``/proc/1/environ``, list ``/proc/1/fd``, ``ptrace`` it, ``process_vm_readv`` it, take its descriptors with
``pidfd_getfd`` and write a status on any socket among them), from its top level (sourced ahead of the call) or from
``main``: an ordinary user's tool is refused each, and no tool, root's neither, can make its call's status come while
a process of it lives on. Each test runs toolexec in a process of its own, as ``nobody`` when this runs as root, and
as root too when this runs as root.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Ordinary
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available()), reason="needs bwrap, PID namespaces, pidfd and /proc"
)

# What the tool runs to reach for its namespace's init: each attempt's outcome ("denied" or "done"), and how many
# sockets of the init's it took and wrote a status on (a warm call's end, as the init once said it: "X0").
REACH = textwrap.dedent(
    r"""
    import ctypes, json, os, socket, stat, sys

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    found = {}

    def attempt(name, action):
        try:
            action()
            found[name] = "done"
        except OSError:
            found[name] = "denied"

    def checked(result):
        if result < 0:
            raise OSError(ctypes.get_errno(), "refused")

    def mem():
        os.close(os.open("/proc/1/mem", os.O_RDWR))

    def environ():
        with open("/proc/1/environ", "rb") as file:
            file.read()

    def seize():  # PTRACE_SEIZE: no stop; the tracer's exit detaches it
        checked(libc.ptrace(0x4206, 1, None, None))

    def readv():
        local = (ctypes.c_char * 8)()
        iovec = ctypes.c_void_p * 2
        mine = iovec(ctypes.cast(local, ctypes.c_void_p), 8)
        theirs = iovec(ctypes.c_void_p(0x400000), 8)
        if libc.syscall(310, 1, mine, 1, theirs, 1, 0) < 0 and ctypes.get_errno() == 1:  # process_vm_readv
            raise OSError(1, "refused")  # (EFAULT: allowed, at an address not mapped)

    hijacked = 0

    def steal():
        global hijacked
        pidfd = os.pidfd_open(1)
        try:
            for number in range(256):
                fd = libc.syscall(438, pidfd, number, 0)  # pidfd_getfd
                if fd < 0:
                    if ctypes.get_errno() == 1:
                        raise OSError(1, "refused")
                    continue
                try:
                    if stat.S_ISSOCK(os.fstat(fd).st_mode):
                        with socket.socket(fileno=os.dup(fd)) as sock:
                            sock.send(b"X0\n")
                            hijacked += 1
                except OSError:
                    pass
                finally:
                    os.close(fd)
        finally:
            os.close(pidfd)

    attempt("mem", mem)
    attempt("environ", environ)
    attempt("fd", lambda: os.listdir("/proc/1/fd"))
    attempt("ptrace", seize)
    attempt("process_vm_readv", readv)
    attempt("pidfd_getfd", steal)
    found["hijacked"] = hijacked
    with open("/proc/1/status") as status:  # a signal it catches could reach it from inside: none is caught
        found["caught"] = [line.split()[1] for line in status if line.startswith("SigCgt:")][0]
    print(json.dumps(found, sort_keys=True))
    """
)
TOOL = """#!/usr/bin/env bash
# @describe Reach for my namespace's init.
# @meta warm
# @option --token! what my escapee sleeps for (no other process has it)
REACH=$(cat <<'EOF'
{reach}
EOF
)
main() {{
    local init warm=false
    mapfile -d '' -t init </proc/1/cmdline
    [[ ${{init[*]}} != *_bash_zygote.py* ]] || warm=true
    setsid sleep "$argc_token" </dev/null >/dev/null 2>&1 &  # an escapee, which outlives main
    printf '{{"warm": %s, "reach": %s}}' "$warm" "$(python3 -c "$REACH")" >>"$LLM_OUTPUT"
}}
"""
# What the tool's top level leaves running, sourced ahead of the call: once main has started (its SIGUSR1), it takes
# each socket of the init's it can and writes a status on it, until the init is out of its reach.
STEAL = textwrap.dedent(
    r"""
    import ctypes, os, signal, socket, stat, time

    os.closerange(3, 1 << 16)  # (what the bash that sourced the tool holds: a spare waits for the end of one)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    with open(os.environ["STEALER_READY"], "w") as ready:
        ready.write("ready\n")
    signal.sigwait([signal.SIGUSR1])
    pidfd = os.pidfd_open(1)
    end = time.monotonic() + 2
    while time.monotonic() < end:
        for number in range(256):
            fd = libc.syscall(438, pidfd, number, 0)  # pidfd_getfd
            if fd < 0:
                if ctypes.get_errno() == 1:
                    raise SystemExit(0)  # out of reach
                continue
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    with socket.socket(fileno=os.dup(fd)) as sock:
                        sock.send(b"X0\n")
            except OSError:
                pass
            finally:
                os.close(fd)
    """
)
AHEAD = """#!/usr/bin/env bash
# @describe Reach for my namespace's init from my top level, ahead of the call.
# @meta warm
# @option --token! what my escapee sleeps for (no other process has it)
# (its word that it waits comes on a FIFO of the project's own temporary folder, removed with it)
STEALER_READY=$(mktemp -u -p "${{BASH_SOURCE[0]%/functions/tools/*}}/tmp")
mkfifo "$STEALER_READY"
STEALER_READY=$STEALER_READY setsid python3 -c '{steal}' </dev/null >/dev/null 2>&1 &
STEALER=$!
main() {{
    local init warm=false
    mapfile -d '' -t init </proc/1/cmdline
    [[ ${{init[*]}} != *_bash_zygote.py* ]] || warm=true
    setsid sleep "$argc_token" </dev/null >/dev/null 2>&1 &  # an escapee, which outlives main
    read -r _ <"$STEALER_READY"
    rm -f "$STEALER_READY"
    kill -USR1 "$STEALER"
    wait "$STEALER"  # (it ends once it is out of reach, or in 2 s)
    printf '{{"warm": %s, "reach": "ahead"}}' "$warm" >>"$LLM_OUTPUT"
}}
"""
# Runs the tool cold once, then warm twice (the second call takes the first one's kept files): each call's status,
# output and stderr, and the escapees alive once the call had returned.
CALLS = """
import json, os, sys
from toolexec import Executor

def alive(token):
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                if cmdline.read().split(b"\\0")[:2] == [b"sleep", token.encode()]:
                    found.append(int(name))
        except OSError:
            pass
    return found

config, token, tool = sys.argv[1:]
calls = []
for warm in (False, True, True):
    with Executor(config, warm=warm) as executor:
        result = executor.call(tool, {"token": token}, timeout=30)
        calls.append([result.status, json.loads(result.output or "null"), result.stderr, alive(token)])
print(json.dumps(calls))
"""


class Place(Ordinary):
    """A project in a fresh folder under /tmp with the reaching tool, run as ``nobody`` when ``ordinary``."""

    def __init__(self, root: Path, ordinary: bool) -> None:
        import yaml

        super().__init__(root, drop=ordinary)
        (root / "functions" / "tools" / "reach.sh").write_text(TOOL.format(reach=REACH.strip()))
        (root / "functions" / "tools" / "ahead.sh").write_text(AHEAD.format(steal=STEAL.strip()))
        self.config.write_text(yaml.safe_dump({"visible_tools": ["ahead.sh", "reach.sh"], "sandbox": "declared"}))
        self.own()
        self.token = f"{1000 + int.from_bytes(os.urandom(2), 'big')}.{os.getpid()}"

    def calls(self, tool: str = "reach") -> list[list]:
        done = self.run("python", "-c", CALLS, str(self.config), self.token, tool)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def clean(self) -> None:
        """End an escapee a failing test left (none, when the test passes)."""
        for name in os.listdir("/proc"):
            try:
                if Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", self.token.encode()]:
                    os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass


def placed(kind: type[Place], ordinary: bool) -> Iterator[Place]:
    """A ``kind`` of place in a fresh folder under /tmp, cleaned and removed after its test."""
    root = Path(tempfile.mkdtemp(prefix="toolexec-init-", dir="/tmp"))
    place = None
    try:
        place = kind(root, ordinary)
        yield place
    finally:
        if place is not None:
            place.clean()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def place(request: pytest.FixtureRequest) -> Iterator[Place]:
    yield from placed(Place, request.param)


NO_SIGNAL = "0000000000000000"
ATTEMPTS = ("environ", "fd", "mem", "pidfd_getfd", "process_vm_readv", "ptrace")
DENIED = dict.fromkeys(ATTEMPTS, "denied")
REACHED = {**dict.fromkeys(ATTEMPTS, "done"), "hijacked": 0, "caught": NO_SIGNAL}


@pytest.mark.parametrize("place", [True], ids=["ordinary"], indirect=True)
def test_an_ordinary_users_warm_bash_tool_is_refused_everything_of_its_init(place: Place) -> None:
    (cold, *warm) = place.calls()
    # (a cold call's init, bwrap's, is the tool's to reach, and holds nothing of the call's but its status)
    assert cold == ["ok", {"warm": False, "reach": REACHED}, "", []], cold
    assert warm == [["ok", {"warm": True, "reach": {**DENIED, "hijacked": 0, "caught": NO_SIGNAL}}, "", []]] * 2


@pytest.mark.skipif(os.geteuid() != 0, reason="root's own calls")
@pytest.mark.parametrize("place", [False], ids=["root"], indirect=True)
def test_roots_warm_bash_tool_reaches_its_init_as_a_cold_one_does_but_cannot_end_its_call_early(place: Place) -> None:
    # root's tool keeps CAP_SYS_PTRACE (as cold): it reaches its init, whose descriptors hold no socket to write a
    # status on, and its escapee is gone when the call's status comes
    (cold, *warm) = place.calls()
    assert cold == ["ok", {"warm": False, "reach": REACHED}, "", []], cold
    assert warm == [["ok", {"warm": True, "reach": REACHED}, "", []]] * 2


@pytest.mark.parametrize("place", [True, False], ids=["ordinary", "root"], indirect=True)
def test_what_a_warm_bash_tools_top_level_left_cannot_end_its_call_early(place: Place) -> None:
    if not place.drop and os.geteuid() != 0:
        pytest.skip("root's own calls")
    calls = place.calls("ahead")
    assert calls == [["ok", {"warm": warm, "reach": "ahead"}, "", []] for warm in (False, True, True)]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("capsh") is None, reason="root's own calls, capsh")
@pytest.mark.parametrize("place", [False], ids=["root"], indirect=True)
def test_roots_warm_bash_tool_without_cap_sys_ptrace_is_refused_everything_of_its_init(place: Place) -> None:
    """A root whose bounding set lacks CAP_SYS_PTRACE (a container's default) keeps the round trip that makes the init
    undumpable before the call's code runs (root's tool is of the init's uid: that is what refuses it); only a tool
    that holds CAP_SYS_PTRACE, which reaches the init whatever it does, goes without (``_bash_zygote._reaches``)."""
    place.prefix = ["capsh", "--drop=cap_sys_ptrace", "--", "-c", 'exec "$0" "$@"']
    (cold, *warm) = place.calls()
    assert cold == ["ok", {"warm": False, "reach": REACHED}, "", []], cold
    # (its list of descriptors and its environ stay open to root's other capabilities: nothing of the call's is there)
    refused = {**DENIED, "environ": "done", "fd": "done", "hijacked": 0, "caught": NO_SIGNAL}
    assert warm == [["ok", {"warm": True, "reach": refused}, "", []]] * 2
