"""Sandboxes set up ahead of their call ("spares"): a confined or baseline call's bwrap started before the call comes.

A cold confined call spends ~4 ms starting bwrap (its namespaces, mounts, seccomp filter) and, for root, ~0.7 ms in the
shell that joins its cgroups first; the same sandbox already made and waiting costs the call ~0.2 ms from its go
(``benchmarks/sandbox_pieces_bench.py``). So a long-lived executor (:class:`Spares`, one per
:class:`~toolexec.calls.Calls` that may make a second call: an ``Executor``, ``toolexec mcp``; never a one-shot
``toolexec run``) keeps, per kind of call, one sandbox made exactly as the cold call's would be, with its cgroups, its
own private call files (LLM_OUTPUT, the failure channel, the artifacts directory: bound where the call will find them)
and, as its program, a launcher (``_spare_launcher.py``) blocked on a socket. At the call, the call's program,
environment, stdin and progress pipe go to it in one message; it sets the call's limits and ``exec``\\s the program.

What stays per call: a spare is used once (the next call gets the next one), so its namespaces, ``/tmp``, ``/proc``,
cgroups and files are this call's alone; its environment holds nothing of another call's (bwrap and the launcher start
with an empty one; the call's comes with its go). The time limit counts from the go (the supervision starts there);
the rlimits are set at the go (the launcher's own start, ~10 ms of CPU before it, counts towards RLIMIT_CPU). A spare
is checked at its call: it is used only for a call whose confinement (policy, limits, the places it sees and writes),
view (the hidden paths as they are now, the places its program needs seen) and working directory are the spare's, and
whose files are as they were made (the same inodes, still empty: nothing pre-seeded them), and whose places each name
what they named when its bwrap started (a hidden ``~/.ssh`` made again, or its link pointed elsewhere, is uncovered in
it: :func:`toolexec.runtimes.sandbox.places_state`); else it is discarded and
the call runs cold. A dead spare (its bwrap killed from outside) is noticed and the call runs cold.

The next spare is made after the call has ended, on a thread of its own that first waits (5 ms at most) until no call
of this process is in flight: never on a call's path; and not at all while as many calls as CPUs are in flight (the
cores are theirs: a spare costs more CPU than the cold start it saves). That thread lives until the pool closes: a
spare's bwrap dies with the thread that started it. Spares are bounded in number (the least recently made go first),
end after ``idle`` seconds unused, at :meth:`Spares.close`, when their pool is collected, and when this process dies
(each launcher reads the end of its socket; the guard of :mod:`~toolexec.runtimes.process_linux` kills their groups
and removes their files). A forked child uses none of its parent's.

Not set up ahead: calls with a network allow-list (their per-call proxy), calls confined by the Landlock fallback,
calls that run warm, and everything where the Linux process backend is not in use.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import weakref

from toolexec.recordtype import field, record, replace
from toolexec.runtimes import _spare_launcher, baseline, cgroup, process_linux, sandbox
from toolexec.runtimes.interpreter import which

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping, Sequence

    from toolexec.runtimes.sandbox import Confinement, Held

LAUNCHER = _spare_launcher.argv()[-1]
DEFAULT_MOST = 8  # spares kept at once
DEFAULT_IDLE = 300.0  # seconds a spare waits for its call
# Seconds a spare's making waits for the calls in flight to end, then it is made anyway: a call started just after the
# one that ordered it gets a head start, and back-to-back calls (each ordering the next one's) still get their spares.
QUIET_WAIT = 0.005
# Seconds a spare's making waits after its order, so that the call that ordered it has returned its result first: its
# making holds the GIL for ~2 ms (its argv, cgroups, files and fork), which would otherwise be taken from that call.
SETTLE = 0.003
SEND_TIMEOUT = 2.0  # seconds a go may take to be read (a launcher that does not read is discarded: the call runs cold)
GIVE_UP = 3  # a kind of call whose spare failed to start this many times in a row gets none
SECOND = 2  # spares are made for a kind of call from its second call on: one called once costs nothing ahead
KINDS_SEEN = 1024  # kinds of call counted at once (the oldest are forgotten)


def launcher_argv(python: str | None = None) -> list[str]:
    """The launcher a spare's sandbox runs: on ``python`` (this one by default), isolated from its environment and
    site."""
    return _spare_launcher.argv(python)


def eligible(confinement: Confinement | None) -> bool:
    """Whether a call under ``confinement`` can be started from a spare (see the module's list of what is not)."""
    if confinement is None or confinement.allowed or not process_linux.available():
        return False
    if os.environ.get("TOOLEXEC_PROCESS_BACKEND", "auto") not in ("auto", "linux"):
        return False
    if confinement.baseline:
        return baseline.usable()
    return sandbox.mechanism()[0] == "bwrap"


def places(argv: Sequence[str], confinement: Confinement | None = None) -> tuple[str, ...]:
    """What a call's program needs seen under ``/tmp`` (the private one hides it): what its view depends on; none
    under the baseline (``confinement``), whose view is the host's whole filesystem (no stat per call)."""
    if confinement is not None and confinement.baseline:
        return ()
    return tuple(sandbox._installed_under_tmp(argv))


@record
class Recipe:
    """How to make the spare of the next call of a kind: as this call's sandbox was made."""

    confinement: Confinement  # the call's (a new spare's files replace its files)
    places: tuple[str, ...]  # what its program needs seen (:func:`places`)
    cwd: str
    # The umask its launcher starts with, which the tool keeps (None: this process's; a served call's recipe carries
    # its caller's, so that the server's waiting child sets the next sandbox up with it, not with the server's).
    umask: int | None = None
    # Makes a call's private files (LLM_OUTPUT, …: 0600, new names), for a declared policy, which binds them.
    files: Callable[[], tuple[str, ...]] | None = field(default=None, compare=False)


def current_umask() -> int:
    """This process's umask (set back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _view(confinement: Confinement, seen: Sequence[str], python: str | None = None) -> tuple[str, ...]:
    """The view's binds (as :func:`toolexec.runtimes.sandbox._view` makes them now) of a sandbox that sees ``seen``
    and runs its launcher on ``python``."""
    if confinement.baseline:
        return ()
    return tuple(sandbox._view(confinement, [*launcher_argv(python), *seen]))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


class Spare:
    """One sandbox made ahead, waiting for its call: used once (:meth:`go`), or discarded (:meth:`discard`)."""

    def __init__(
        self,
        recipe: Recipe,
        confinement: Confinement,
        proc: subprocess.Popen[bytes],
        control: socket.socket,
        held: Held,
        child: tuple[int | None, int | None],
        born: int,
        launcher: tuple[int, int | None] = (0, None),
        python: str | None = None,
        state: tuple[tuple[int, ...], ...] = (),
    ) -> None:
        self.recipe, self.confinement, self.proc, self.held = recipe, confinement, proc, held
        self._control: socket.socket | None = control
        self.child, self.child_start = child  # the namespace's init (bwrap does not wait for it), and its start
        self.launcher, self.launcher_start = launcher  # the launcher (outside pid), which becomes the tool
        self.born = born  # clock ticks since boot before it was started: no process of its call is older
        self.made = time.monotonic()
        self.mask = current_umask() if recipe.umask is None else recipe.umask  # its launcher's, which the tool keeps
        self.python = python
        self.view = _view(confinement, recipe.places, python)
        self.state = state  # what each place of its view named before its bwrap started (sandbox.places_state)
        self.files = confinement.files
        self._identities = tuple(_identity(path) for path in self.files)
        self.consumed = False  # gone to its call, or discarded

    @property
    def pid(self) -> int:
        """Its bwrap's (or, for root, the cgroup join's shell that became bwrap): a process group of its own."""
        return self.proc.pid

    def alive(self) -> bool:
        """Whether its sandbox still waits (nothing killed it from outside)."""
        return self.proc.poll() is None

    def intact(self) -> bool:
        """Whether its call files are those it bound (the same inodes) and are still empty: nothing pre-seeded them."""
        for path, identity in zip(self.files, self._identities, strict=True):
            try:
                status = os.lstat(path)
            except OSError:
                return False
            if identity != (status.st_dev, status.st_ino):
                return False
            if stat.S_ISDIR(status.st_mode):
                try:
                    if os.listdir(path):
                        return False
                except OSError:
                    return False
            elif not stat.S_ISREG(status.st_mode) or status.st_size:
                return False
        return True

    def fits(self, confinement: Confinement, argv: Sequence[str], cwd: str) -> bool:
        """Whether this spare is what the cold start of a call under ``confinement`` running ``argv`` in ``cwd`` would
        make: the same confinement (its files are this spare's), working directory, umask and view, as they are now."""
        if confinement != self.confinement or cwd != self.recipe.cwd or current_umask() != self.mask:
            return False  # (another umask: a served caller's 077 would run its tool under the server's 022)
        if confinement.baseline:
            return True  # the baseline's view is the host's whole filesystem, whatever the program
        if sandbox.places_state(confinement) != self.state:
            return False  # a hidden path made again, or a link to it pointed elsewhere: uncovered in this sandbox
        return _view(confinement, places(argv), self.python) == self.view

    def limit(self, confinement: Confinement, *, strict: bool) -> bool:
        """Set the call's limits on the launcher (which becomes the tool at its go) from here, as a cold call's are set
        on its namespace's init (:func:`toolexec.runtimes.baseline._limit`); False when the launcher is gone. ``strict``:
        a limit that cannot be set raises OSError."""
        if process_linux.start_of(self.launcher) != self.launcher_start:
            return False
        baseline._limit(self.launcher, confinement, (), strict=strict)
        return True

    def go(self, argv: Sequence[str], env: Mapping[str, str], stdin: int, progress: int) -> bool:
        """Hand the call to the launcher (its stdin, progress pipe, program and environment); False when the spare is
        gone or does not take it (then :meth:`discard` it: the call runs cold)."""
        control, self._control = self._control, None
        self.consumed = True
        if control is None or not self.alive():
            if control is not None:
                control.close()
            return False
        try:
            control.settimeout(SEND_TIMEOUT)
            _spare_launcher.send(control, argv, env, stdin, progress)
        except OSError:
            return False
        finally:
            control.close()
        return True

    def discard(self, *, files: bool = True) -> None:
        """End it: its processes, cgroups and (``files``: unless a call took them) its call files."""
        self.consumed = True
        if self._control is not None:
            self._control.close()
            self._control = None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        # its init and launcher, re-parented here should this process be a subreaper now (calls in flight): reaped
        for pid, start in ((self.child, self.child_start), (self.launcher, self.launcher_start)):
            if pid:
                process_linux.reap_orphan(pid, start)
        process_linux.withdraw(self.proc.pid)
        sandbox.release(self.held)
        if files:
            _remove(self.files)


def _remove(paths: Sequence[str]) -> None:
    for path in paths:
        try:
            os.rmdir(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError:
            shutil.rmtree(path, ignore_errors=True)


def make(recipe: Recipe, *, own_files: bool = True) -> Spare | None:
    """A spare made as ``recipe`` says, its launcher up and waiting; None when none can be made. ``own_files``: the
    files ``recipe.files`` gives are the spare's, removed should it fail (else they are a call's). The launcher runs on
    this Python, else (one the sandbox cannot run: under a directory its user may not enter) the system's python3."""
    files = recipe.files() if recipe.files is not None and not recipe.confinement.baseline else ()
    confinement = replace(recipe.confinement, files=files)
    for python in _pythons():
        spare = _start(recipe, confinement, python)
        if spare is not None:
            _working[:] = [python]
            return spare
    if own_files:
        _remove(files)
    return None


_working: list[str] = []  # the Python a launcher last started on


def _pythons() -> list[str]:
    if _working:
        return list(_working)
    found = [sys.executable, *(which(name) or "" for name in ("python3",))]
    return [python for i, python in enumerate(found) if python and python not in found[:i]]


def _start(recipe: Recipe, confinement: Confinement, python: str) -> Spare | None:
    """The spare's sandbox started with its launcher on ``python``, once the launcher says it waits; None when it does
    not (everything of it ended; its files, which are the caller's, kept)."""
    gate = baseline.Gate(block=False)  # only told which process is the namespace's init: its limits come at the go
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    held: Held | None = None
    proc: subprocess.Popen[bytes] | None = None
    launcher = launcher_argv(python)
    state = sandbox.places_state(confinement) if not confinement.baseline else ()  # (before bwrap covers them)
    try:
        if confinement.baseline:
            argv, held = baseline.wrap(confinement, launcher, gate)
        else:
            argv, held = sandbox.wrap(confinement, launcher, gate.args(), (), gated=True, view=[*launcher, *recipe.places])
        born = process_linux.boot_ticks() - 1
        proc = subprocess.Popen(
            argv,
            stdin=theirs.fileno(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            env={},  # nothing of any call's: the call's whole environment comes with its go
            cwd=recipe.cwd,
            umask=-1 if recipe.umask is None else recipe.umask,
            start_new_session=True,
            close_fds=True,
            pass_fds=gate.child_fds() + tuple(held.descriptors),
        )
        theirs.close()
        held.close_descriptors()
        if not process_linux.announce(proc.pid, confinement.files):
            raise OSError("no guard: a spare would outlive a killed toolexec")
        gate.open(confinement, None)
        child = (gate.child, gate.child_start)
        if gate.child is None:
            raise OSError("bwrap did not start its sandbox")
        if not confinement.baseline and not all(cgroup.holds(path, gate.child) for path in held.cgroups):
            raise OSError("the sandbox is not in its cgroups")
        ours.settimeout(LAUNCHER_WAIT)
        if ours.recv(1) != READY:  # (the end of the socket: bwrap could not run it, or it failed)
            raise OSError("the sandbox's launcher did not start")
        launchers = process_linux._task_children(gate.child, gate.child)
        if len(launchers) != 1:
            raise OSError("the sandbox's launcher is not its init's one child")
        (launcher_pid,) = launchers
        launched = (launcher_pid, process_linux.start_of(launcher_pid))
    except BaseException as exc:
        gate.close()
        theirs.close()
        if proc is not None:
            failed = Spare(recipe, confinement, proc, ours, held or sandbox.Held(), (gate.child, gate.child_start), 0)
            failed.discard(files=False)
        else:
            ours.close()
            sandbox.release(held)
        if not isinstance(exc, Exception):
            raise
        return None
    return Spare(recipe, confinement, proc, ours, held, child, born, launched, python, state)


LAUNCHER_WAIT = 10.0  # seconds the making thread waits for a sandbox's launcher to say it waits
READY = _spare_launcher.READY  # what the launcher says once it waits


class _State:
    """What a pool and its making thread share (the thread holds no reference to the pool: it can be collected)."""

    def __init__(self, most: int, idle: float) -> None:
        self.lock = threading.Condition()
        self.ready: dict[Hashable, Spare] = {}  # in the order they were made: the first goes first past ``most``
        self.wanted: dict[Hashable, Recipe] = {}
        self.failed: dict[Hashable, int] = {}
        self.calls: dict[Hashable, int] = {}  # calls of each kind so far (up to SECOND): the second orders spares
        self.making: set[Hashable] = set()  # the kinds whose spare is being made now
        self.closed = False
        self.thread: threading.Thread | None = None
        self.owner = os.getpid()
        self.most, self.idle = most, idle


_states: weakref.WeakSet[_State] = weakref.WeakSet()


class Spares:
    """The spares of one long-lived executor: at most ``most``, each discarded after ``idle`` seconds unused."""

    def __init__(self, *, most: int = DEFAULT_MOST, idle: float = DEFAULT_IDLE) -> None:
        self._state = _State(most, idle)
        _states.add(self._state)
        self._finalizer = weakref.finalize(self, _close, self._state)

    def take(self, key: Hashable) -> Spare | None:
        """The spare made for calls of ``key``, now the caller's (to :meth:`Spare.go` or :meth:`Spare.discard`);
        None when there is none that can be used (dead, or its files touched: discarded)."""
        state = self._state
        if state.owner != os.getpid():
            return None
        with state.lock:
            spare = state.ready.pop(key, None)
        if spare is None:
            return None
        if spare.alive() and spare.intact():
            return spare
        spare.discard()
        return None

    def order(self, key: Hashable, recipe: Recipe) -> None:
        """Make the next spare for calls of ``key`` as ``recipe`` says, off the call's path (once calls are over), from
        the second call of that kind on."""
        state = self._state
        with state.lock:
            if state.closed or state.owner != os.getpid() or state.failed.get(key, 0) >= GIVE_UP:
                return
            if key in state.ready or key in state.making:  # (one being made serves the next call)
                return
            seen = state.calls.pop(key, 0) + 1
            state.calls[key] = min(seen, SECOND)
            if len(state.calls) > KINDS_SEEN:
                state.calls.pop(next(iter(state.calls)))
            if seen < SECOND:
                return
            state.wanted[key] = recipe
            if state.thread is None:
                state.thread = threading.Thread(target=_run, args=(state,), name="toolexec-spares", daemon=True)
                state.thread.start()
            state.lock.notify_all()

    def __len__(self) -> int:
        """Spares waiting."""
        with self._state.lock:
            return len(self._state.ready)

    def wait_made(self, timeout: float = 10.0) -> bool:
        """Wait until every spare ordered is made (or could not be); whether that happened within ``timeout``."""
        state = self._state
        with state.lock:
            return state.lock.wait_for(lambda: (not state.wanted and not state.making) or state.closed, timeout)

    def close(self) -> None:
        """Discard every spare; later orders are ignored. Closing twice is harmless."""
        self._finalizer()


def _close(state: _State) -> None:
    with state.lock:
        state.closed = True
        spares = list(state.ready.values())
        state.ready.clear()
        state.wanted.clear()
        state.lock.notify_all()
        thread = state.thread
    if state.owner != os.getpid():
        return
    for spare in spares:
        spare.discard()
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def _run(state: _State) -> None:
    """The making thread: make what is wanted once calls are over, discard what waited ``idle`` seconds; end when the
    pool closes (never before: the spares it started, and the calls they run, die with it)."""
    while True:
        doomed: list[Spare] = []
        key: Hashable | None = None
        recipe: Recipe | None = None
        with state.lock:
            while True:
                if state.closed:
                    state.thread = None
                    state.lock.notify_all()
                    return
                now = time.monotonic()
                for old in [k for k, spare in state.ready.items() if now - spare.made >= state.idle]:
                    doomed.append(state.ready.pop(old))
                if state.wanted:
                    key = next(iter(state.wanted))
                    recipe = state.wanted.pop(key)
                    state.making.add(key)
                    break
                if doomed:
                    break
                if not state.ready:
                    # Nothing to make or discard, but this thread stays until the pool closes: a spare's bwrap dies
                    # with the thread that started it (--die-with-parent is the parent *thread*'s death), and a spare
                    # taken by a call is running that call (it was killed by signal 9 when this thread ended).
                    state.lock.wait()
                    continue
                state.lock.wait(max(0.01, min(spare.made for spare in state.ready.values()) + state.idle - now))
        for spare in doomed:
            spare.discard()
        if recipe is None:
            continue
        time.sleep(SETTLE)
        # After the call: not competing with it for the CPU. Once that wait is over, a spare is made anyway (back-to-back
        # calls still get theirs) unless the calls in flight are as many as the CPUs: then the cores are busy with calls,
        # and a spare, a cold start's CPU and its launcher's own start (~10 ms: more than it saves its call), would be
        # taken from them; that call starts cold, and its end orders again.
        made = None
        busy = not process_linux.wait_quiet(QUIET_WAIT) and process_linux.calls_in_flight() >= baseline.cpus()
        if not busy:
            made = make(recipe)
        evicted: list[Spare] = []
        with state.lock:
            state.making.discard(key)
            if made is None:
                if not busy:  # (not made for the cores' sake is no failure of the kind's)
                    state.failed[key] = state.failed.get(key, 0) + 1
            elif state.closed:
                evicted.append(made)
            else:
                state.failed.pop(key, None)
                if key in state.ready:
                    evicted.append(state.ready.pop(key))
                state.ready[key] = made
                while len(state.ready) > state.most:
                    evicted.append(state.ready.pop(next(iter(state.ready))))
            state.lock.notify_all()
        for spare in evicted:
            spare.discard()


def _forget_after_fork() -> None:
    """In a forked child: its parent's spares are not its own (their sockets are closed here, nothing is ended)."""
    for state in list(_states):
        for spare in state.ready.values():
            if spare._control is not None:
                with contextlib.suppress(OSError):
                    spare._control.close()
        state.ready.clear()
        state.wanted.clear()
        state.closed = True
        state.thread = None
        state.lock = threading.Condition()


os.register_at_fork(after_in_child=_forget_after_fork)
