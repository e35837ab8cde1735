"""A warm Python call's init, as the zygote (runtimes/_python_zygote.py) makes it and hears it, run in an interpreter
of its own: made by one clone(2) alone in a new PID namespace (or, where that is refused, by unshare and fork), a
child that goes on in Python as after os.fork; and the word of an init whose tool kept root's capabilities (which
could have said it in the init's place) taken only once the init is ended with no child left, and only an exit
code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import toolexec.runtimes

RUNTIMES = str(Path(toolexec.runtimes.__file__).parent)

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or (os.getuid() != 0 and shutil.which("unshare") is None),
    reason="needs Linux, and root or util-linux's unshare (a PID namespace is made)",
)

MADE_ALONE = """
import json, os, sys, threading
sys.path.insert(0, sys.argv[1])
import _python_zygote

namespaces = _python_zygote._Namespaces()
namespaces.cloning = sys.argv[2] == "clone"
spares = _python_zygote._Spares(namespaces, None, None)
outer = os.readlink("/proc/self/ns/pid")
pid = spares.fork()
if pid == 0:  # the init of a namespace of its own, in Python as after os.fork: a thread starts and ends
    ran = []
    thread = threading.Thread(target=ran.append, args=(1,))
    thread.start()
    thread.join()
    alone = os.getpid() == 1 and os.readlink("/proc/self/ns/pid") != outer
    os._exit(0 if alone and ran == [1] and threading.active_count() == 1 else 3)
_, status = os.waitpid(pid, 0)
print(json.dumps([pid > 0, os.waitstatus_to_exitcode(status), namespaces.cloning]))
"""


def _run(script: str, *args: str) -> list[object]:
    argv = [sys.executable, "-c", script, RUNTIMES, *args]
    if os.getuid() != 0:  # (an ordinary user makes a PID namespace inside a user namespace of its own)
        argv = ["unshare", "--user", "--map-root-user", *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, ""), done
    return json.loads(done.stdout)


@pytest.mark.parametrize("way", ["clone", "unshare"])
def test_a_calls_init_is_alone_in_a_pid_namespace_and_goes_on_in_python(way: str) -> None:
    """Either way the child is process 1 of a PID namespace of its own, and its Python works as after os.fork
    (PyOS_AfterFork_Child ran: a thread starts, and only it and the main one are counted)."""
    assert _run(MADE_ALONE, way) == [True, 0, way == "clone"]


HEARD = """
import json, os, signal, socket, sys
sys.path.insert(0, sys.argv[1])
import _python_zygote


class Spares:
    early = False  # root's init under the baseline: its tool could have said the word
    made = set()


kill = os.kill


def ended(pid):
    # until pid is a zombie: the rest of its namespace is killed and reaped by then
    while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        os.sched_yield()


def heard(word, with_child, late=False):
    read, write = os.pipe()
    pid = _python_zygote._Namespaces().clone_alone()
    if pid == 0:  # the init of a namespace: waits (with a child of its own that waits too, or none) until killed
        if with_child and os.fork() == 0:
            os.close(write)
            os.read(read, 1)
            os._exit(0)
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    os.close(read)
    if with_child:  # (its child made before the word comes)
        while not open(f"/proc/{pid}/task/{pid}/children").read().strip():
            os.sched_yield()
    if late:  # the zygote is held up right after its kill: the init's own end (its namespace's) goes on meanwhile
        os.kill = lambda target, number: (kill(target, number), number != signal.SIGKILL or ended(pid))[0]
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    said, saying = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    saying.send(word)
    children = {pid: _python_zygote._Reply(theirs.detach(), -1, said.detach())}
    taken = _python_zygote._heard(children, Spares, pid)
    os.kill = kill
    ours.setblocking(False)
    try:
        told = ours.recv(64).decode()
    except BlockingIOError:
        told = ""
    os.close(write)  # (one not killed ends now)
    _, status = os.waitpid(pid, 0)
    return [taken, told, pid in children, os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL]


print(json.dumps([heard(b"0", False), heard(b"0", True), heard(b"3", False), heard(b"256", False), heard(b"S", False),
                  heard(b"0", True, late=True), heard(b"0", False, late=True)]))
"""


def test_a_root_inits_word_is_taken_once_it_is_ended_alone_and_only_an_exit_code() -> None:
    """The zygote ends the init first (SIGKILL), then takes its word only when it had no child left; a status past an
    exit code (a wait status the host could not read) or ``S`` (the status said elsewhere) is never taken: the
    init's reap says the status then. Whether the init was alone is seen before the kill: once killed, its own end
    kills and reaps the rest of its namespace, so a zygote held up after its kill (a loaded machine) would find no
    child left where the tool still ran when the word came, and take the tool's word (the last two: held up so, with
    a child and without). [taken, what toolexec was told, still waited for, killed]"""
    assert _run(HEARD) == [
        [True, "X0\n", False, True],
        [False, "", True, True],
        [True, "X768\n", False, True],
        [False, "", True, False],
        [False, "", True, False],
        [False, "", True, True],
        [True, "X0\n", False, True],
    ]
