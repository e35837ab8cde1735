"""Helpers shared by test modules (test modules never import one another)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolexec.records import ToolResult

# A Python tool that records when it started and ended in its cache dir, and waits
# (bounded) until ``expect`` calls have started: serial calls come back "alone".
RECORDER = '''
import os, time

def run(n: int, expect: int) -> str:
    """Record start and end times; wait until `expect` calls have started, for 10 s at most."""
    log = os.environ["LLM_TOOL_CACHE_DIR"]
    started = time.monotonic()  # taken before the record appears, so no call ends before it
    with open(os.path.join(log, f".start-{n}"), "w") as f:
        f.write(repr(started))
    os.rename(os.path.join(log, f".start-{n}"), os.path.join(log, f"start-{n}"))
    deadline = time.monotonic() + 10
    while sum(name.startswith("start-") for name in os.listdir(log)) < expect:
        if time.monotonic() > deadline:
            break
        time.sleep(0.005)
    together = sum(name.startswith("start-") for name in os.listdir(log)) >= expect
    with open(os.path.join(log, f"end-{n}"), "w") as f:
        f.write(repr(time.monotonic()))
    return f"{n}: {'together' if together else 'alone'}"
'''

# A tool whose grandchild escapes into its own session; with then_wait it prints, turns deaf
# to SIGTERM and waits to be cancelled. Its loops end with the call (timeout 60 s by default).
ESCAPES = '''
import os, signal, sys, time

def run(then_wait: bool = True) -> str:
    """Fork a grandchild into its own session, ignoring SIGTERM and holding the pipes."""
    pid_file = os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "escaped.pid")
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(pid_file + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
        while True:
            time.sleep(1000)
    while not os.path.exists(pid_file):
        time.sleep(0.001)
    print("partial output", flush=True)
    if then_wait:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(pid_file + ".ready", "w").close()  # printed, and deaf to SIGTERM: tests may now cancel
        while True:
            time.sleep(1000)
    return "returned"
'''


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # gone; or going between open and read (ESRCH)
        return False
    return state not in ("Z", "X")


def zombies_of(parent: int | None = None) -> set[int]:
    """The children of ``parent`` (default: this process) that ended and were never reaped."""
    parent = os.getpid() if parent is None else parent
    found = set()
    for name in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) == parent:
            found.add(int(name))
    return found


def in_forked_child(work: Callable[[], object]) -> str:
    """``repr(work())`` as a forked child of this process computed it (the child exits at once after): what a
    process forked from this one sees of its parent's state. Fails the test if the child did not exit 0."""
    read, write = os.pipe()
    with warnings.catch_warnings():  # threads other tests left: the child runs ``work`` only, then exits at once
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.write(write, repr(work()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as report:
        said = report.read()
    assert os.waitpid(pid, 0)[1] == 0, said
    return said


def read_pid(path: Path) -> int:
    """The process id written in ``path``."""
    return int(path.read_text().strip())


def wait_until(condition: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Return once ``condition()`` is true; fail the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g} s waiting for {what}")
        threading.Event().wait(0.005)


def max_overlap(log: Path) -> int:
    """The most calls of :data:`RECORDER` that were running at one moment, from its start/end records."""
    events = []
    for record in log.iterdir():
        kind, _, _ = record.name.partition("-")
        if kind in ("start", "end"):
            # at the same instant an end comes before a start: touching intervals do not overlap
            events.append((float(record.read_text()), 1 if kind == "start" else 0))
    running = peak = 0
    for _, starts in sorted(events):
        running += 1 if starts else -1
        peak = max(peak, running)
    return peak


def marked_processes(tmpdir: Path) -> list[int]:
    """Live processes started by a call of this test: they carry a call marker and our TMPDIR (a process forked by a
    warm server, which shows the server's environment, carries the server's marker; the servers themselves are not
    calls' processes)."""
    from toolexec.runtimes.warm_fork import running_servers

    ours = f"TMPDIR={tmpdir}\0".encode()
    servers = running_servers()
    alive = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            if state in (b"Z", b"X"):
                continue
            environ = Path(f"/proc/{name}/environ").read_bytes()
            marked = b"TOOLEXEC_CALL_MARK=" in environ or b"TOOLEXEC_WARM_SERVER=" in environ
            if marked and ours in environ and int(name) not in servers:
                alive.append(int(name))
        except (OSError, IndexError):
            continue
    return alive


@dataclass(frozen=True)
class Case:
    """One row of a catalogue of bad inputs: the call, and the exact result it must get."""

    id: str
    tool: str
    arguments: Any
    status: str
    exit_code: int
    error: str | None = None
    check: Callable[[ToolResult], bool] | None = None
    prepare: Callable[[Path], object] | None = None  # given functions/tools/, after the build


def check_case(case: Case, executor: Any, private_tmpdir: Path) -> None:
    """Run one catalogue row: its exact status, exit code and error (or check), then nothing left behind:
    no process of the call alive, no new descriptor, an empty temporary directory."""
    executor.build()  # build first, so its files are closed before descriptors are counted
    if case.prepare is not None:
        case.prepare(executor.config.tools_dir)
    descriptors = sorted(os.listdir("/proc/self/fd"))
    result = executor.call(case.tool, case.arguments)
    try:
        assert (result.status, result.exit_code) == (case.status, case.exit_code), result.error
        if case.error is not None:
            config = executor.config
            assert result.error == case.error.replace("{tools}", str(config.tools_dir)).replace("{config}", str(config.path))
        if case.check is not None:
            assert case.check(result), json.dumps(result.to_dict())[:2000]
        assert result.ok == (case.status == "ok")
    finally:
        if result.output_file:
            os.unlink(result.output_file)
    close_warm(executor)
    assert marked_processes(private_tmpdir) == []
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert os.listdir(private_tmpdir) == []


# The call surfaces (:class:`toolexec.calls.Calls`) a test made in the warm or ahead launch mode (tests/conftest.py:
# held until the test ends, so that one whose executor was dropped is closed too).
surfaces: list[Any] = []


def close_warm(executor: Any = None) -> None:
    """Stop the warm servers and discard the sandboxes set up ahead of ``executor`` (default: of every executor the
    test made in a warm or ahead launch mode), which live (with their processes, descriptors and files) until the
    executor closes, so that a test can then check that nothing of its calls is left; an executor's later calls start
    them again (as they would have run: warm, ahead or cold)."""
    for calls in [executor.calls] if executor is not None else surfaces:
        warm, ahead = calls.warm, calls.ahead
        calls.close_warm()
        calls.warm, calls.ahead = warm, ahead


def in_pid_namespace(namespace: str, started_before: float | None = None) -> list[int]:
    """Live processes of the PID namespace ``namespace`` (as ``readlink /proc/self/ns/pid`` names it: ``pid:[N]``).

    The kernel reuses a namespace's number once the namespace is gone: a process of a later namespace (another test's,
    another program's) may show under it. ``started_before`` (a :func:`boot_clock` reading) keeps only processes
    started by then, which a later namespace cannot have."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ours = os.readlink(f"/proc/{name}/ns/pid") == namespace and alive(int(name))
                if ours and (started_before is None or _started(int(name)) <= started_before):
                    found.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return found


def left_in_pid_namespace(namespace: str, started_before: float) -> list[int]:
    """The live processes of a call's PID namespace ``namespace`` but its init, started by ``started_before`` (see
    :func:`in_pid_namespace`): what the call left. A warm Python call's status is said before its init is reaped (the
    init's exit, its copy of the server, is kept off the call's path): the init may still be exiting then (root's, under
    the baseline, killed by the server once it had no child; an ordinary user's after it killed and reaped the rest),
    with no child and nothing of the call's, as the kernel tears down its namespaces."""
    left = []
    for pid in in_pid_namespace(namespace, started_before=started_before):
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            if [line.split()[-1] for line in status if line.startswith("NSpid:")] != ["1"]:
                left.append(pid)
    return left


def sleeping(argument: str) -> list[int]:
    """The processes running ``sleep ARGUMENT`` (a tool's escapee, marked by an argument no other process has)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            if Path(f"/proc/{name}/cmdline").read_bytes() == b"sleep\0" + argument.encode() + b"\0":
                found.append(int(name))
        except OSError:
            continue
    return found


def boot_clock() -> float:
    """Seconds since boot, as the kernel counts a process's start (``/proc/PID/stat``'s start time)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _started(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        ticks = int(handle.read().rsplit(")", 1)[1].split()[19])
    return ticks / os.sysconf("SC_CLK_TCK")


def host_pids(namespace: str, pids: list[int]) -> list[int]:
    """The pids this process knows the processes by that the PID namespace ``namespace`` (``pid:[N]``) calls ``pids``
    (a tool reports its own pids, and each call may run in a PID namespace of its own: the sandbox's baseline)."""
    if namespace == os.readlink("/proc/self/ns/pid"):
        return list(pids)
    found = {}
    for pid in in_pid_namespace(namespace):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("NSpid:"):
                    found[int(line.split()[-1])] = pid
    assert set(pids) <= set(found), (pids, found)
    return [found[pid] for pid in pids]


def reachable_by_others(path: str) -> bool:
    """Whether a user who owns nothing on the way (``nobody``) can reach and run ``path``: every folder above it
    searchable by others, the file itself executable by them."""
    import stat

    real = os.path.realpath(path)
    parts = real.split("/")
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth]) or "/"
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(real).st_mode & stat.S_IXOTH)


def python_for_others(folder: Path) -> str | None:
    """A Python an ordinary user can start, also inside a user namespace of their own, that imports this toolexec
    and its dependencies: this one when it is reachable, else a venv made in ``folder`` (which must be reachable)
    from the system's Python of the same version, seeing this venv's packages. None when there is no such Python.

    (A root-owned interpreter under a mode-700 /root is reachable by root alone: an ordinary user's toolexec could
    not start its own warm servers with it.)"""
    import subprocess
    import sys
    import sysconfig

    if reachable_by_others(sys.executable) and all(reachable_by_others(p) for p in (sys.prefix, sys.base_prefix)):
        return sys.executable
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    base = next((f"{d}/python{version}" for d in ("/usr/bin", "/usr/local/bin") if os.path.exists(f"{d}/python{version}")), None)
    if base is None or not reachable_by_others(base):
        return None
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    paths = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    if not all(reachable_by_others(path) for path in paths):
        return None
    site = folder / "lib" / f"python{version}" / "site-packages"
    (site / "toolexec-tests.pth").write_text("".join(f"import site; site.addsitedir({path!r})\n" for path in paths))
    return str(folder / "bin" / "python")


def as_nobody(root: Path) -> list[str]:
    """The command prefix that runs a command as ``nobody`` (util-linux's setpriv), ``root``'s tree given to it; the
    test is skipped where setpriv is missing. For a test running as root, whom no file permission stops."""
    import shutil

    import pytest

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root needs util-linux's setpriv to drop to an ordinary user")
    for path in [root, *root.rglob("*")]:
        os.chown(path, 65534, 65534)
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def run_executor_script(script: str, config: Path, action: str, arg: str, env: dict[str, str]) -> list[Any]:
    """Run ``script`` (a Python program driving an Executor: ``CONFIG ACTION ARG``) in a process of its own, with ``env``
    added to this one's; its JSON lines. One that does not finish fails the test, saying whether it was stopped (the
    attack these scripts try), and is resumed and killed."""
    import subprocess
    import sys

    import pytest

    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(config), action, arg],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        stopped = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
        os.kill(proc.pid, 18)  # SIGCONT, then end it
        proc.kill()
        proc.communicate()
        pytest.fail(f"the executor did not finish (stopped: {stopped})")
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


class Ordinary:
    """A project in a fresh folder under /tmp (``root``) whose HOME and TMPDIR are its own (``root/home``,
    ``root/tmp``), and how to run a command there as an ordinary user: this one, or ``nobody`` (:func:`as_nobody`,
    with :func:`python_for_others`) when this runs as root (unless ``drop`` is False: then as this user, root too).
    Call :meth:`own` once the project's files are written. Skips the test where no ordinary user can be made."""

    def __init__(self, root: Path, *, drop: bool = True) -> None:
        import sys

        self.root = root
        for sub in ("functions/tools", "home/.cache", "home/.config", "tmp"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.config = root / "config.yaml"
        self.python = sys.executable
        self.prefix: list[str] = []
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "LLM_", "TOOLEXEC_"))},
            "HOME": str(root / "home"),
            "XDG_CACHE_HOME": str(root / "home" / ".cache"),
            "XDG_CONFIG_HOME": str(root / "home" / ".config"),
            "TMPDIR": str(root / "tmp"),
        }
        self.uid = os.geteuid()
        self.drop = drop and self.uid == 0
        if self.drop:
            import pytest

            python = python_for_others(root / "venv")
            if python is None:
                pytest.skip("no Python here that an ordinary user can start")
            self.python = python
            self.uid = 65534

    def own(self) -> None:
        """Give the project's tree to the user who runs it (nothing to do when that is this one)."""
        if self.drop:
            self.prefix = as_nobody(self.root)

    def run(self, *argv: str, input: str = "", timeout: float = 180) -> Any:
        """Run ``argv`` (``python`` for its first word means :attr:`python`) as that user; the finished process."""
        import subprocess

        argv = (self.python, *argv[1:]) if argv and argv[0] == "python" else argv
        return subprocess.run(
            [*self.prefix, *argv], input=input, capture_output=True, text=True, env=self.env, cwd=self.root, timeout=timeout
        )


def confined_warm_usable() -> bool:
    """Whether a warm Python server can live inside its tool's sandbox here (runtimes/_python_confined.py): bwrap,
    PID namespaces, pidfd and /proc."""
    from toolexec.runtimes import baseline, process_linux, sandbox

    return baseline.usable() and process_linux.available() and sandbox.mechanism()[0] == "bwrap"


# Runs a command as a child subreaper: whatever the command leaves behind (an orphan of any kind, its guard
# included) becomes this wrapper's child, and is waited for however long it takes to end.
_SUBREAPER = """
import ctypes, os, subprocess, sys

ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
out, err = proc.communicate()
orphans = 0
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break
    orphans += 1
print(repr((proc.returncode, out, err, proc.pid, orphans)))
"""


def run_as_subreaper(command: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str, int, int]:
    """Run ``command`` under a child subreaper: (its exit status, stdout, stderr, pid, and how many orphans it left,
    each waited for until it ended)."""
    import ast
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _SUBREAPER, *command], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    found = ast.literal_eval(done.stdout)
    return found[0], found[1], found[2], found[3], found[4]


def start_call(base: list[str], surface: str, tool: str, arguments: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    """Start the toolexec command ``base`` (its argv up to the command) making one call of ``tool``, as a one-shot
    ``run`` or (``surface`` "mcp") through ``toolexec mcp`` over stdio, whose stdin stays open: the process (end it
    with :func:`end_call`)."""
    import json
    import subprocess

    if surface == "run":
        return subprocess.Popen([*base, "run", tool, json.dumps(arguments)], stdout=subprocess.DEVNULL, env=env)
    proc = subprocess.Popen([*base, "mcp", "--no-reload"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
    ]  # fmt: skip
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
    proc.stdin.flush()
    return proc


def end_call(proc: Any) -> None:
    """Close what :func:`start_call` started: its stdin, and the process if it still runs."""
    if proc.stdin is not None:
        proc.stdin.close()
    if proc.poll() is None:
        proc.kill()
        proc.wait()
