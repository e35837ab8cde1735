"""A warm Python call's status under a PID namespace of its own (the baseline; ``sandbox: strict``): the call's init
says it once the tool's process has ended and it has killed and reaped whatever else the call left (its namespace
holds nothing but the init then), before its own exit tears down its copy of the server (runtimes/_python_zygote.py,
``_end_call``), to toolexec itself where the server has sent it the call's reply socket. These check that nothing of
the call outlives the status, that the tool cannot say a status in the init's place (the socket the init says it on
is out of the tool's reach), and that the status does not wait for the server.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import Ordinary, boot_clock, left_in_pid_namespace, sleeping, zombies_of
from toolexec.runtimes import baseline, process_linux, sandbox

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available() and sandbox.mechanism()[0] == "bwrap"),
    reason="needs bwrap, PID namespaces, pidfd and /proc",
)

LEAVER = '''
import os, subprocess, time


def run(mark: str) -> dict:
    """Leave processes behind: a setsid'd program, and a double fork that runs no program.

    Warm: true

    Args:
        mark: the sleep argument of the program left behind
    """
    # Neither holds the call's output pipes (toolexec would wait for their end of file): only their kill ends them
    quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.Popen(["setsid", "sleep", mark], start_new_session=True, **quiet)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child that leaves a grandchild in a session of its own, then ends
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.write(write, b"%d" % os.getpid())
            os.close(write)
            while True:
                time.sleep(60)
        os._exit(0)
    os.close(write)
    left = int(os.read(read, 32))
    os.close(read)
    os.waitpid(pid, 0)
    return {"namespace": os.readlink("/proc/self/ns/pid"), "left": left, "alive": os.path.exists(f"/proc/{left}")}
'''

FORGER = '''
import os


def run() -> dict:
    """Try to say a status in the init's place: on every descriptor the init (pid 1) holds.

    Warm: true
    """
    listed = sorted(os.listdir("/proc/1/fd"), key=int)
    opened = {}
    for fd in listed:
        try:
            handle = os.open(f"/proc/1/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            opened[fd] = exc.strerror
            continue
        try:
            os.write(handle, b"0")
            opened[fd] = "written"
        except OSError as exc:
            opened[fd] = exc.strerror
        finally:
            os.close(handle)
    return {"listed": listed, "opened": opened}
'''


TAKER = '''
import ctypes, os, socket, subprocess


def run(mark: str) -> dict:
    """Take every socket the init (pid 1) holds (root keeps the capability pidfd_getfd needs) and say a status on
    it, as an init says its tool's, while this process and a child of it run on (their output given up, so that
    nothing but the status ends the call).

    Warm: true

    Args:
        mark: the sleep argument of the child
    """
    sleeper = subprocess.Popen(["sleep", mark], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    libc = ctypes.CDLL(None, use_errno=True)
    init = os.pidfd_open(1)
    for fd in os.listdir("/proc/1/fd"):
        if os.readlink(f"/proc/1/fd/{fd}").startswith("socket:"):
            taken = libc.syscall(438, init, int(fd), 0)  # pidfd_getfd (its number on every architecture)
            if taken >= 0:
                with socket.socket(fileno=taken) as sock:
                    sock.send(b"0")
    sleeper.wait()
    return {"ended": "by itself"}
'''


@pytest.mark.parametrize("mode", ["strict", "declared"])
def test_nothing_a_warm_call_left_outlives_its_status(project: Project, mode: str) -> None:
    """Every process the call left (a setsid'd program, a double-forked copy of the tool) is gone by the time the
    call returns: not later, as its init's exit would end them."""
    project.tool("leaver.py", LEAVER)
    before = zombies_of()
    with project.executor(sandbox=mode) as executor:
        marks = [f"{2000 + int.from_bytes(os.urandom(2), 'big')}.{os.getpid()}{index}" for index in range(3)]
        for mark in marks:  # the first starts the server; each later one is forked from a spare made ahead
            result = executor.call("leaver", {"mark": mark})
            returned = boot_clock()
            assert (result.status, result.stderr) == ("ok", ""), result
            seen = json.loads(result.output)
            assert seen["alive"] is True  # it ran while the call did
            assert (sleeping(mark), left_in_pid_namespace(seen["namespace"], returned)) == ([], [])
    assert zombies_of() - before == set()


@pytest.mark.parametrize("mode", ["strict", "declared"])
def test_a_warm_tool_cannot_say_a_status_in_its_inits_place(project: Project, mode: str) -> None:
    """A tool that holds no capability (strict; the baseline's ordinary user) cannot open its init's descriptors,
    among them the init's socket to the server; one that keeps root's (root under the baseline, as a cold call's tool)
    cannot open that socket through /proc either (a socket is not opened by its name there), but could take it
    otherwise: see the next test."""
    project.tool("forger.py", FORGER)
    keeps_root = mode == "declared" and os.getuid() == 0
    with project.executor(sandbox=mode) as executor:
        for _ in range(2):  # the first starts the server
            result = executor.call("forger")
            assert (result.status, result.exit_code, result.stderr) == ("ok", 0, ""), result
            seen = json.loads(result.output)
            if keeps_root:  # the server's null device, its stderr, and the socket it says the tool's status on
                assert len(seen["listed"]) == 4
                assert seen["opened"][seen["listed"][-1]] == "No such device or address"
            else:  # and the pipe the status is said on: out of reach
                assert len(seen["listed"]) == 4
                assert seen["opened"] == {fd: "Permission denied" for fd in seen["listed"]}


@pytest.mark.skipif(os.getuid() != 0, reason="a root toolexec's baseline call (its tool keeps root's capabilities)")
def test_a_root_warm_tool_that_says_its_inits_word_ends_its_call_killed(project: Project) -> None:
    """Root under the baseline: the tool keeps root's capabilities, takes its init's socket (pidfd_getfd) and says a
    status on it while it runs on, its output given up. The server takes an init's word only once it has ended the
    init and found nothing of the call left: here the tool and its child still ran, so the init's end ended them,
    and the call is reported killed, with nothing of it left. Had the word been taken as it came, the call would
    have returned a success while both ran on."""
    project.tool("taker.py", TAKER)
    with project.executor(sandbox="declared") as executor:
        for index in range(2):  # the first starts the server; the second is forked from a spare made ahead
            mark = f"{3000 + int.from_bytes(os.urandom(2), 'big')}.{os.getpid()}{index}"
            result = executor.call("taker", {"mark": mark}, timeout=120)
            left = sleeping(mark)
            seen = (result.status, result.exit_code, result.output, result.error, left)
            assert seen == ("error", 137, "", "Tool call 'taker' was killed by signal 9", []), result


# Run by the ordinary user, whose baseline call is sealed (toolexec looks for nothing of it once its status came):
# what the call left is looked for the moment it returns, with nothing of toolexec's but the init's kill between.
LEFT_AT_RETURN = """
import json, os, sys
from pathlib import Path
from toolexec import Executor


def left(namespace, mark):
    found = []
    for name in os.listdir("/proc"):
        try:
            if os.readlink(f"/proc/{name}/ns/pid") != namespace and Path(f"/proc/{name}/cmdline").read_bytes() != mark:
                continue
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        state = [line.split()[1] for line in status.splitlines() if line.startswith("State:")]
        nspid = [line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:")]
        if state not in (["Z"], ["X"]) and nspid != ["1"]:  # (the init may still be exiting: it holds nothing)
            found.append(int(name))
    return found


with Executor(sys.argv[1], warm=True) as executor:
    for index in range(3):
        mark = f"{os.getpid()}.{index}"
        result = executor.call("leaver", {"mark": mark})
        seen = json.loads(result.output) if result.status == "ok" else {"namespace": "", "error": result.error}
        print(json.dumps([result.status, seen.get("alive"), left(seen["namespace"], b"sleep\\0" + mark.encode() + b"\\0")]))
"""


def test_nothing_an_ordinary_users_sealed_warm_call_left_outlives_its_status(ordinary: Ordinary) -> None:
    """As an ordinary user the baseline's warm call is sealed: its status is the init's word, said once the init has
    killed and reaped the rest of its namespace. What the call left is gone the moment the call returns."""
    import yaml

    (ordinary.root / "functions" / "tools" / "leaver.py").write_text(LEAVER)
    ordinary.config.write_text(yaml.safe_dump({"visible_tools": ["leaver.py"], "sandbox": "declared"}))
    ordinary.own()
    done = ordinary.run("python", "-c", LEFT_AT_RETURN, str(ordinary.config))
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [["ok", True, []]] * 3


WAITER = '''
import os


def run(wait: bool) -> str:
    """Make the FIFOs ``started`` and ``go`` in this tool's cache (and say where); or say it started (on ``started``),
    then wait for a byte on ``go``.

    Warm: true

    Args:
        wait: wait (else make the FIFOs)
    """
    cache = os.environ["LLM_TOOL_CACHE_DIR"]
    if not wait:
        for name in ("started", "go"):
            os.mkfifo(os.path.join(cache, name))
        return cache
    with open(os.path.join(cache, "started"), "w") as said:  # held open while it waits: the test finds it by it
        said.write("x")
        said.flush()
        with open(os.path.join(cache, "go")) as waited:
            waited.read()
    return "done"
'''


def _holding(path: Path) -> list[int]:
    """The processes (this namespace's numbers) but this one that hold ``path`` open."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            with contextlib.suppress(OSError):
                if any(os.readlink(f"/proc/{name}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{name}/fd")):
                    found.append(int(name))
    return found


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_confined_warm_calls_status_comes_from_its_init_not_through_the_server(project: Project) -> None:
    """Under strict the call's init, once the call is over, says its status to toolexec itself, on the call's reply
    socket (which the server sends it once it has handed the call over): with the server stopped meanwhile, the call
    still returns at once with its result. Said through the server (the init told it, and it told toolexec: one more
    process woken on the call's path), the call waited for its timeout."""
    import select
    import signal
    from concurrent.futures import ThreadPoolExecutor

    project.tool("waiter.py", WAITER)
    with project.executor(sandbox="strict") as executor, ThreadPoolExecutor(1) as pool:
        made = executor.call("waiter", {"wait": False})
        assert made.status == "ok", made
        started, go = (Path(made.output) / name for name in ("started", "go"))
        future = pool.submit(executor.call, "waiter", {"wait": True}, timeout=30)
        said = os.open(started, os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert select.select([said], [], [], 60)[0], future.result(timeout=60) if future.done() else "no start"
            tool = _holding(started)
        finally:
            os.close(said)
        assert len(tool) == 1, tool
        server = _parent(_parent(tool[0]))  # the tool's process, its init, the server that forked the init
        os.kill(server, signal.SIGSTOP)
        try:
            with open(go, "w") as waker:
                waker.write("x")
            result = future.result(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):  # (ended at the call's timeout, where the status waited for it)
                os.kill(server, signal.SIGCONT)
    assert (result.status, result.output, result.exit_code, result.stderr) == ("ok", "done", 0, "")
