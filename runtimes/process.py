"""The one process helper every runtime uses.

A tool runs in a new session (its own process group), with its arguments in an
nameless file on stdin. One loop multiplexes stdout and stderr (kept bounded: head and
tail), the child's exit, a deadline and a cancellation pipe. When the
call ends for any reason the whole group gets SIGTERM, then SIGKILL after a
grace period, so nothing the tool started outlives the call. Processes that
left the group (``setsid``, daemons) are found afterwards by a marker in their
inherited environment and killed too.

Two backends provide the platform-dependent parts (a descriptor that wakes the
loop when the child exits, and the search for the call's processes):
:mod:`~toolexec.runtimes.process_linux` (pidfd and ``/proc``, standard library
only) where both exist, else :mod:`~toolexec.runtimes.process_portable` (a
waiting thread and psutil), e.g. on macOS. ``TOOLEXEC_PROCESS_BACKEND=portable``
(or ``linux``, or ``auto``, the default) overrides the choice; the tests use it to
run the process-tree tests through both.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time

from toolexec import early
from toolexec.errors import ToolexecError
from toolexec.recordtype import field, record, replace
from toolexec.runtimes import baseline, early_start, process_linux, sandbox
from toolexec.runtimes.interpreter import which

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from types import ModuleType
    from typing import Any, Protocol

    from toolexec.runtimes.sandbox import Confinement, Held
    from toolexec.runtimes.sandbox_spare import Spare
    from toolexec.runtimes.warm import WarmProcess, WarmStart
else:
    Protocol = object  # at run time _ExitWaiter is a plain base class; type checkers see the protocol

CHUNK = 1 << 16
MARKER = "TOOLEXEC_CALL_MARK"
# Names the write end of a call's progress pipe (``/dev/fd/N``) when the caller listens for events.
PROGRESS_VARIABLE = "LLM_PROGRESS"
# Names the call's file size bound (bytes) for a bootstrap that sets or awaits RLIMIT_FSIZE itself; it removes it.
FILE_LIMIT_VARIABLE = "TOOLEXEC_FILE_LIMIT"
PROGRESS_LINE_LIMIT = 1 << 16  # runtimes.progress.LINE_LIMIT: a longer line is dropped unread
BACKEND_VARIABLE = "TOOLEXEC_PROCESS_BACKEND"
WARM_PROGRESS_FD = 3  # where a warm call's process finds its progress pipe
BACKENDS = ("auto", "linux", "portable")


class _ExitWaiter(Protocol):
    """What a backend's ``ExitWaiter(proc)`` gives: a descriptor readable once the child has exited."""

    def fileno(self) -> int: ...

    def close(self) -> None: ...


def backend() -> ModuleType:
    """The module with this system's ``ExitWaiter`` and ``kill_marked``, as chosen by ``TOOLEXEC_PROCESS_BACKEND``."""
    choice = os.environ.get(BACKEND_VARIABLE) or "auto"
    if choice not in BACKENDS:
        raise ToolexecError(f"{BACKEND_VARIABLE} must be one of {', '.join(BACKENDS)}; got {choice!r}")
    if choice == "portable" or (choice == "auto" and not process_linux.available()):
        from toolexec.runtimes import process_portable  # psutil is imported only where it is needed

        return process_portable
    if not process_linux.available():
        raise ToolexecError(f"{BACKEND_VARIABLE}=linux needs pidfd_open and /proc, which this system lacks; use auto")
    return process_linux


class CallControl:
    """What a caller holds over a running call: cancellation, an outer deadline, and an event callback.

    ``cancel()`` is thread-safe and wakes the call at once (a pipe in its select loop); reaching
    ``deadline`` (a ``time.monotonic()`` reading) cancels too. ``on_event`` receives dicts such as
    ``{"event": "started", "pid": 123}`` and ``{"event": "exited", "returncode": 0}``, from the
    thread running the call.
    """

    def __init__(
        self,
        *,
        deadline: float | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        # Re-entrant: cancel() runs in signal handlers on the thread that may be running the call (and inside
        # cancel() already, when a second signal comes during the first one's handler).
        self._lock = threading.RLock()
        self.cancelled = False
        self.deadline = deadline
        self.on_event = on_event
        # A trace carrier ({"traceparent": …, "tracestate": …}) the call's execute_tool span continues, when
        # OpenTelemetry is in use (docs/operations.md); None: the caller's current span.
        self.trace = trace

    def cancel(self) -> None:
        """End the call: its whole process tree goes, and its result says cancelled."""
        with self._lock:
            if not self.cancelled and self._write >= 0:
                self.cancelled = True
                with contextlib.suppress(OSError):
                    os.write(self._write, b"x")

    def emit(self, event: str, **data: Any) -> None:
        """Hand an event to ``on_event``; a failing callback never breaks the call."""
        if self.on_event is not None:
            with contextlib.suppress(Exception):
                self.on_event({"event": event, **data})

    def fileno(self) -> int:
        """The descriptor that becomes readable on cancellation."""
        return self._read

    def close(self) -> None:
        """Release the pipe; a closed control can no longer cancel."""
        with self._lock:
            for fd in (self._read, self._write):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._read = self._write = -1

    def __del__(self) -> None:
        # A control its caller drops unclosed (the usual use: one per call) releases its pipe with it; two
        # descriptors per call would otherwise stay open for the life of the process.
        with contextlib.suppress(Exception):
            self.close()


@record(kw_only=False, frozen=False)
class Capture:
    """Bytes from a stream kept within ``limit``: the head and the tail."""

    limit: int
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0
    # Where everything goes once the limit is passed (private, 0600), so the full text is kept, up to keep_limit.
    spill: str | None = None
    keep_limit: int | None = None
    kept: int = 0
    _file: Any = None

    def add(self, data: bytes) -> None:
        """Take the next chunk of the stream, keeping the head and the tail within ``limit``."""
        self.total += len(data)
        if not self.tail and len(self.head) + len(data) <= self.limit:
            self.head += data
            return
        if self.spill is not None:
            if self._file is None:
                os.makedirs(os.path.dirname(self.spill), exist_ok=True)
                fd = os.open(self.spill, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                self._file = open(fd, "wb")  # noqa: SIM115 - closed by close()
                self._keep(self.head + self.tail)
            self._keep(data)
        half = self.limit // 2
        if not self.tail:  # first overflow: the head keeps exactly half, the rest may be tail
            take = max(0, half - len(self.head))
            self.head += data[:take]
            data = data[take:]
            self.tail = self.head[half:]
            del self.head[half:]
        self.tail += data
        excess = len(self.tail) - (self.limit - half)
        if excess > 0:
            del self.tail[:excess]

    def _keep(self, data: bytes | bytearray) -> None:
        room = len(data) if self.keep_limit is None else max(0, min(len(data), self.keep_limit - self.kept))
        if room:
            self._file.write(data[:room])
            self.kept += room

    @property
    def unkept(self) -> int:
        """Bytes of a spilled stream that passed ``keep_limit`` and are in no file."""
        return self.total - self.kept if self.keep_limit is not None and self.spilled else 0

    def close(self) -> None:
        """Close the spill file, if one was opened."""
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def spilled(self) -> str | None:
        """The file holding the whole stream, when bytes were dropped from the capture."""
        return self.spill if self.dropped and self.spill else None

    @property
    def dropped(self) -> int:
        """How many bytes of the stream the capture does not hold."""
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> tuple[str, bool]:
        """Decoded text with a marker where bytes were dropped, and whether bytes were not UTF-8."""
        if not self.dropped:
            return _decode(bytes(self.head + self.tail))
        head, tail = _cut_end(bytes(self.head)), _cut_start(bytes(self.tail))
        dropped = self.total - len(head) - len(tail)
        (head_text, head_lossy), (tail_text, tail_lossy) = _decode(head), _decode(tail)
        return f"{head_text}\n[… {dropped} bytes of output dropped …]\n{tail_text}", head_lossy or tail_lossy


def _decode(raw: bytes) -> tuple[str, bool]:
    """UTF-8 with replacement, and whether anything was replaced (a U+FFFD the tool wrote itself is not)."""
    try:
        return raw.decode("utf-8"), False
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), True


def _cut_end(data: bytes) -> bytes:
    """Drop an incomplete UTF-8 sequence at the end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead or ASCII byte
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
            return data if need <= back else data[:-back]
    return data


def _cut_start(data: bytes) -> bytes:
    """Drop continuation bytes at the start."""
    skip = 0
    while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
        skip += 1
    return data[skip:]


@record
class Launch:
    """How to start one call: argv, environment, stdin bytes and its limits."""

    argv: Sequence[str]
    env: Mapping[str, str]
    stdin: bytes = b""
    cwd: str | None = None
    timeout: float | None = None
    capture_limit: int = 1 << 20
    grace: float = 2.0
    # Directory for the full stdout/stderr of a call whose output passes capture_limit.
    spill_dir: str | None = None
    # Open a progress pipe named by LLM_PROGRESS; its JSON lines become "progress" events.
    progress: bool = False
    # At most this many bytes of each stream are kept there; the rest is counted and dropped.
    keep_limit: int | None = None
    # Files of this call only (LLM_OUTPUT, ...): removed by the parent-death guard should this process die mid-call.
    private_files: Sequence[str] = ()
    # The largest file the tool's processes may write (RLIMIT_FSIZE): past it the kernel stops the writer.
    file_limit: int | None = None
    # How the started program takes file_limit (see Prepared): its bootstrap sets it in multiples of this many bytes
    # (0: it cannot), or waits until this process has set it. Else prlimit(1) starts it.
    sets_file_limit: int = 0
    awaits_file_limit: bool = False
    # A directory whose disk usage is measured while the call runs; past watch_limit bytes the tool is stopped.
    watch_dir: str | None = None
    watch_limit: int | None = None
    # Run confined by the kernel (namespaces, rlimits: :mod:`toolexec.runtimes.sandbox`); None: as it is.
    confinement: Confinement | None = None
    # Fork the call from the tool's warm server (:mod:`toolexec.runtimes.warm`) when it can run warm; None: spawn it.
    # A confined call is always spawned (its policy is applied by the launcher), as on systems without pidfd.
    warm: WarmStart | None = None
    # The call's sandbox set up ahead (:mod:`toolexec.runtimes.sandbox_spare`), made for calls like this one: used when
    # it fits (else discarded, and the call starts cold). Either way it is this call's: no other call gets it.
    spare: Spare | None = None


@record
class Finished:
    """How the process ended, and what it wrote to stdout and stderr."""

    returncode: int | None
    signal: int | None
    stdout: Capture
    stderr: Capture
    timed_out: bool
    cancelled: bool
    duration: float
    escaped: int = 0  # processes that had left the group and were killed afterwards
    # Set when a bound stopped the tool: ("file", file_limit) or ("cache", watch_limit).
    limit: tuple[str, int] | None = None
    pid: int | None = None  # the tool's main process
    # What the call's network proxy refused (its 403 bodies, naming the policy line), in order.
    refused: tuple[str, ...] = ()
    oom_killed: bool = False  # the kernel's OOM killer ended a process of the call's memory cgroup
    # Every process of the call had ended before its status came (a warm call's PID namespace, whose init its server
    # reaped first): none can still hold a descriptor of the call's (its private files may be used again).
    sealed: bool = False
    # The same of a cold call: its PID namespace's init was seen ended before its status (a surface that keeps such a
    # call's files for the next, toolexec mcp, uses them again).
    namespace_gone: bool = False


def run_process(launch: Launch, control: CallControl | None = None) -> Finished:
    """Run one process to completion, enforcing the timeout, the control's deadline and cancellation."""
    if control is None:
        own = CallControl()
        try:
            return run_process(launch, own)
        finally:
            own.close()
    start = time.monotonic()
    system = backend()
    mark = os.urandom(12).hex()
    # Arguments travel in a file without a name: interpreters read a regular file in
    # large chunks (bash reads a pipe one byte at a time), no writer is needed, and
    # nothing is left on disk whatever happens to either process.
    env = {**launch.env, MARKER: mark}
    env.pop(PROGRESS_VARIABLE, None)  # a caller's own channel is not this call's (its descriptor is not passed on)
    env.pop(FILE_LIMIT_VARIABLE, None)  # only this call sets its bound
    env.pop(early.EARLY_VARIABLE, None)  # (a bootstrap that finds it waits for a call on its stdin)
    progress_read, progress_write = os.pipe() if launch.progress else (-1, -1)
    if launch.progress:
        env[PROGRESS_VARIABLE] = f"/dev/fd/{progress_write}"
    process_linux.protect()  # before any tool exists: no tool may read this process's memory or environment
    confinement, held, proxy = launch.confinement, None, None
    gate: baseline.Gate | None = None
    orphan: tuple[int, int | None] | None = None  # a confined call's namespace init (bwrap does not wait for it)
    if confinement is not None and confinement.file_size is None and launch.file_limit is not None:
        # the sandbox sets the bound: a declared file size (wider or narrower), else max_kept_bytes's
        confinement = replace(confinement, file_size=launch.file_limit)
    argv = list(launch.argv)
    # Who bounds the files (a confined call's launcher does it for itself): the bootstrap (its first line), this
    # process once the bootstrap has started (which waits for it), or prlimit(1) around the program; a warm call's
    # server sets it in the forked process.
    bound = None if launch.file_limit is None or confinement is not None else file_bound(launch.file_limit)
    set_here = False
    alone = False
    started_after = 0
    # A call that may run sealed is not told to the guard (see process_linux.register) unless it starts otherwise.
    untold = _may_run_sealed(launch, confinement, system)
    system.enter(mark, tuple(launch.private_files), told=not untold)
    proc: subprocess.Popen[bytes] | WarmProcess | None = None
    registered: int | None = None
    try:
        stdin = -1
        try:
            stdin = _stdin_file(launch.stdin)
            if launch.warm is not None and system is process_linux and _warm_holds(confinement, launch.warm):
                started_after = process_linux.boot_ticks()
                isolated, held = _isolation(confinement)
                fsize = confinement.file_size if confinement is not None else bound
                proc = _spawn_warm(launch, stdin, env, fsize, progress_write, isolated, confinement, held)
                if proc is None and held is not None:  # run cold: the cold launch makes its own
                    sandbox.release(held)
                    held = None
                # its own PID namespace, whose init its server reaps before it says the call's status: nothing of the
                # call can be left once it has, and no process of it can be outside that namespace to search for
                alone = proc is not None and isolated is not None and launch.warm.sealed
            if untold and not alone:  # it starts some other way: the guard learns of it before it does
                system.tell(mark, tuple(launch.private_files))
                untold = False
            if launch.spare is not None and proc is None and system is process_linux:
                proc, held, orphan, started_after = _from_spare(launch, confinement, stdin, env, progress_write)
            elif launch.spare is not None:  # it ran warm: the spare is not used
                launch.spare.discard(files=False)
            if proc is None and early.began() and system is process_linux:
                proc, held, orphan = early_start.start(launch, confinement, stdin, env, bound, progress_write)
            if proc is None:
                # a tick before the spawn: no process of the call started earlier (what register would read from /proc)
                started_after = process_linux.boot_ticks() - 1 if system is process_linux else 0
                argv, env, set_here = _bound_cold(launch, argv, env, bound)
                if confinement is not None and confinement.baseline:
                    gate = baseline.Gate() if baseline.usable() else None
                    argv, held = baseline.wrap(confinement, argv, gate)
                elif confinement is not None:
                    if confinement.allowed:  # the call's own proxy (nothing of it for a call without an allow-list)
                        from toolexec.runtimes.netproxy import Proxy

                        proxy = Proxy(confinement.allowed)
                    if sandbox.mechanism()[0] == "bwrap":  # its init (reaped here should it outlive bwrap) waits for its limits
                        gate = baseline.Gate()
                    forwarder = proxy.prefix(sys.executable) if proxy else ()
                    info = gate.args() if gate is not None else ()
                    argv, held = sandbox.wrap(confinement, argv, info, forwarder, gated=gate is not None)
                proc = subprocess.Popen(
                    system.with_death_signal(argv),
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    bufsize=0,  # read by descriptor: no buffered reader, whose making costs each pipe two system calls
                    env=env,
                    cwd=launch.cwd,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=((progress_write,) if launch.progress else ())
                    + ((proxy.inside,) if proxy else ())
                    + (gate.child_fds() if gate is not None else ())
                    + (tuple(held.descriptors) if held is not None else ()),
                )
                if gate is not None:  # the limits, set before the tool starts; a sandbox left without them never runs
                    assert confinement is not None
                    try:
                        gate.open(confinement, held, strict=not confinement.baseline)
                    except BaseException:
                        _abandon(proc)
                        if gate.child is not None:  # the init it killed, re-parented here: reaped, not left a zombie
                            system.reap_orphan(gate.child, gate.child_start)
                        raise
        except BaseException:
            _close(progress_read)
            raise
        finally:
            if gate is not None:
                gate.close()
            if held is not None:  # bwrap holds its own copies (its seccomp filter) now
                held.close_descriptors()
            _close(stdin)
            _close(progress_write)  # only the tool's tree holds the write end: no event can outlive it
            if proxy is not None:
                proxy.launched()
        if gate is not None and gate.child is not None:  # bwrap does not wait for its init: it may be here now
            orphan = (gate.child, gate.child_start)
        try:  # the tool runs: until its supervision begins, a failure (no guard to be had, an interrupt) ends it here
            if getattr(proc, "progress", -1) >= 0:  # a warm server's own progress channel replaces the pipe
                _close(progress_read)
                progress_read = proc.progress  # type: ignore[union-attr]
            system.register(proc.pid, mark, tuple(launch.private_files), started_after=started_after, told=not untold)
            registered = proc.pid
            if set_here and bound is not None:
                limit_file_size(proc.pid, bound)
        except BaseException:
            _close(progress_read)
            _abandon(proc)
            if orphan is not None:
                system.reap_orphan(*orphan)
            raise
        namespaced = alone or (held is not None and held.pid_namespace)  # the kernel ended what the tool left
        # A cold call in a PID namespace of its own: once its init has ended, nothing of the call is left (the kernel
        # ended and reaped the rest first), so there is nothing to search for, and its files are held by no process.
        init, init_start = orphan if namespaced and not alone and system is process_linux and orphan else (0, None)
        ended = (lambda: process_linux.namespace_ended(init, init_start)) if init_start is not None else None
        finished = _supervise(
            proc, system, launch, control, start, mark, progress_read, namespaced, search=not alone, ended=ended
        )
        if alone and getattr(proc, "reported", False):  # the server said the status: it had reaped the namespace's init
            finished = replace(finished, sealed=True)
        if orphan is not None:
            system.reap_orphan(*orphan)
    finally:
        system.leave(registered, mark)  # None: no tool was registered (its spawn, or its limits, failed)
        oom_killed = sandbox.release(held)
        if proxy is not None:
            proxy.close()
    if proxy is not None and proxy.refusals:
        finished = replace(finished, refused=tuple(proxy.refusals))
    elif (refusals := getattr(proc, "refusals", None)) is not None and (refused := refusals()):  # its server's proxy
        finished = replace(finished, refused=refused)
    if oom_killed:
        finished = replace(finished, oom_killed=True)
    code = finished.returncode
    if namespaced and finished.signal is None and code is not None and 128 < code <= 128 + 64:
        # bwrap reports a tool killed by a signal as 128 + the signal (as a shell does): reported as the signal again
        finished = replace(finished, returncode=None, signal=code - 128)
    control.emit("exited", returncode=proc.returncode)
    xfsz = finished.signal == signal.SIGXFSZ or finished.returncode == 128 + signal.SIGXFSZ  # the tool, or a shell's child
    declared = launch.confinement.file_size if launch.confinement is not None else None
    if finished.limit is None and launch.file_limit is not None and xfsz and not (declared and declared < launch.file_limit):
        finished = replace(finished, limit=("file", launch.file_limit))
    return finished


def _from_spare(
    launch: Launch,
    confinement: Confinement | None,
    stdin: int,
    env: dict[str, str],
    progress: int,
) -> tuple[subprocess.Popen[bytes] | None, Held | None, tuple[int, int | None] | None, int]:
    """The call started in its sandbox set up ahead (:mod:`toolexec.runtimes.sandbox_spare`): (its bwrap, what it holds,
    its namespace's init, when it was made); (None, None, None, 0) when the spare does not fit the call or is gone
    (it is discarded: the call starts cold)."""
    spare = launch.spare
    assert spare is not None
    cwd = launch.cwd or os.getcwd()
    if launch.confinement is None or not spare.fits(launch.confinement, launch.argv, cwd):
        spare.discard(files=False)  # its files, if any, are the call's (the engine made it use them)
        return None, None, None, 0
    assert confinement is not None
    env = dict(env)
    if progress >= 0:
        env[PROGRESS_VARIABLE] = f"/dev/fd/{WARM_PROGRESS_FD}"  # where the launcher puts the pipe
    if not confinement.baseline:
        env["TMPDIR"] = "/tmp"  # the private one (a cold call's bwrap sets it)
    try:  # its limits, set before its go as on a cold call's init; one that cannot be set fails the cold start too
        limited = spare.limit(confinement, strict=not confinement.baseline)
    except OSError:
        limited = False
    if not limited or not spare.go(launch.argv, env, stdin, progress):
        spare.discard(files=False)
        return None, None, None, 0
    return spare.proc, spare.held, (spare.child, spare.child_start) if spare.child is not None else None, spare.born


def _bound_cold(
    launch: Launch, argv: list[str], env: dict[str, str], bound: int | None
) -> tuple[list[str], dict[str, str], bool]:
    """How a spawned call takes its file bound: ``argv`` and ``env`` for it, and whether this process sets it after
    the start."""
    set_here = False
    if bound is not None:
        if launch.sets_file_limit and bound % launch.sets_file_limit == 0:
            env[FILE_LIMIT_VARIABLE] = str(bound)
        elif launch.awaits_file_limit and _PRLIMIT_CALL:
            env[FILE_LIMIT_VARIABLE] = str(bound)
            set_here = True
        else:
            argv = _with_file_limit(argv, bound)
            set_here = len(argv) == len(launch.argv)  # no prlimit(1): set after the start (see limit_file_size)
    return argv, env, set_here


def _warm_holds(confinement: Confinement | None, warm: WarmStart) -> bool:
    """Whether a warm call keeps what ``confinement`` guarantees: nothing to keep; the baseline alone where this host
    makes its namespaces and the tool's server can give each call a PID namespace of its own (Python's can, a bash
    cannot); or a declared policy (or strict's) where the tool's server can live inside the tool's sandbox, made by
    bwrap, the call's files are in that server's calls' directory (:meth:`WarmPool.home`), and the tool's cold calls
    could pass anything to one another already (:func:`sandbox.calls_share`). Else (the Landlock fallback, a policy
    with no place to keep anything) the call runs cold."""
    if confinement is None:
        return True
    if not (warm.isolates and baseline.usable()):
        return False
    if confinement.baseline:
        return True
    if not warm.confines or sandbox.mechanism()[0] != "bwrap" or not confinement.files:
        return False
    if not sandbox.calls_share(confinement):  # its cold calls keep nothing from one another; a server's would
        return False
    home = warm.pool.home(warm.spec.tool)
    return home is not None and all(os.path.dirname(path) == home for path in confinement.files)


def _may_run_sealed(launch: Launch, confinement: Confinement | None, system: ModuleType) -> bool:
    """Whether ``launch`` is a warm call that runs sealed if its server takes it: in a PID namespace of its own inside
    its server's, whose bwrap (``--die-with-parent``, :func:`toolexec.runtimes.warm_fork.isolated_argv`) the kernel
    ends with this process, and so every process of the call; with no private file outside the pool's directory
    (which the guard knows already)."""
    warm = launch.warm
    return (
        warm is not None
        and system is process_linux
        and confinement is not None
        and confinement.baseline
        and warm.sealed
        and not launch.private_files
        and _warm_holds(confinement, warm)
    )


def _isolation(
    confinement: Confinement | None, *, own_namespace: bool = False
) -> tuple[dict[str, int | str] | None, Held | None]:
    """The limits a warm call sets in its own namespace (as :func:`baseline._limit` sets a cold call's), and what it
    holds: under the baseline its pids cgroup (root's process cap); under a declared policy its memory cgroup and a
    root toolexec's pids cgroup (:func:`sandbox.cgroups`), which its process joins through descriptors toolexec opens
    (they are read-only in its view). Given back with :func:`sandbox.release`. ``own_namespace``: the process is the
    only one of a PID namespace made for this call (an early spare's): where :func:`baseline.pid_max_capped`, root's
    cap is that namespace's pid_max (``pid_max`` in the limits, written by the process itself), and no cgroup."""
    if confinement is None:
        return None, None
    limits: dict[str, int | str] = {}
    for name in ("memory", "cpu", "processes"):
        if getattr(confinement, name) is not None:
            limits[name] = getattr(confinement, name)
    if not confinement.baseline:
        return limits, sandbox.cgroups(confinement)
    held = None
    if confinement.processes is not None and own_namespace and baseline.pid_max_capped():
        limits["pid_max"] = baseline.pid_max(confinement.processes)
    elif confinement.processes is not None and os.geteuid() == 0:  # the kernel exempts root from RLIMIT_NPROC
        cgroup = sandbox._cgroup(confinement.processes)
        if cgroup is not None:
            limits["cgroup"] = cgroup
            held = sandbox.Held(cgroups=[cgroup])
    return limits, held


def _spawn_warm(
    launch: Launch,
    stdin: int,
    env: dict[str, str],
    bound: int | None,
    progress: int,
    isolated: dict[str, int | str] | None = None,
    confinement: Confinement | None = None,
    held: Held | None = None,
) -> WarmProcess | None:
    """The call forked by its tool's warm server (:mod:`toolexec.runtimes.warm`), or None: it runs cold. Under a
    declared policy (``confinement``, not the baseline) the server is the one inside that sandbox, and the call gets
    its own files and cgroups (``held``)."""
    from toolexec.runtimes.warm import WarmCall, confined_spec

    warm = launch.warm
    assert warm is not None
    if progress >= 0:
        env = {**env, PROGRESS_VARIABLE: f"/dev/fd/{WARM_PROGRESS_FD}"}
    cwd = launch.cwd or os.getcwd()
    if confinement is None or confinement.baseline:
        call = WarmCall(stdin=stdin, env=env, cwd=cwd, file_limit=bound, progress=progress, isolated=isolated)
        return warm.spawn(call)
    env = {**env, "TMPDIR": "/tmp", "PWD": cwd}  # as a cold call's bwrap sets them (its /tmp is the private one)
    cgroups = tuple(held.cgroups) if held is not None else ()
    call = WarmCall(
        stdin=stdin, env=env, cwd=cwd, file_limit=bound, progress=progress, isolated=isolated,
        files=confinement.files, cgroups=cgroups,
    )  # fmt: skip
    home = warm.pool.home(warm.spec.tool)
    return warm.spawn(call, confined_spec(warm.spec, confinement, launch.env, home)) if home is not None else None


_prlimit: list[str | None] = []  # util-linux's prlimit(1), once looked for
_PRLIMIT_CALL = sys.platform == "linux"  # resource.prlimit: setting another process's limits


def read_all(fd: int) -> bytes:
    """The whole of the file open at ``fd`` (a call's stdin), read from its start without moving its offset."""
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def file_bound(limit: int) -> int:
    """``limit``, or the lower hard RLIMIT_FSIZE this process already has (which no child may raise)."""
    try:
        import resource  # (a C module of the standard library: ~0.1 ms, on the calls that bound files only)

        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    except (ImportError, OSError, ValueError):
        return limit
    return limit if hard == resource.RLIM_INFINITY else min(limit, hard)


def _with_file_limit(argv: list[str], limit: int) -> list[str]:
    """``argv`` started under ``prlimit --fsize`` (util-linux): the tool's processes can write no file past ``limit``
    bytes (``RLIMIT_FSIZE``, soft and hard, so the tool cannot raise it) from their first instruction on. For a
    program whose bootstrap cannot bound itself (a Bash tool with its own parser, node's alternatives): one exec more
    per call (~1 ms); a limit set in the child by ``preexec_fn`` costs every spawn a fork instead of a vfork (~6 ms).
    Unchanged where prlimit is not installed, or ``argv[0]`` cannot be found (so that the error names it)."""
    if not _prlimit:
        _prlimit.append(which("prlimit"))
    program = _prlimit[0]
    if program is None or not argv or which(argv[0]) is None:
        return argv
    return [program, f"--fsize={limit}:{limit}", "--", *argv]


def limit_file_size(pid: int, limit: int) -> bool:
    """Set ``RLIMIT_FSIZE`` (soft and hard) of the started tool ``pid`` from here: for a bootstrap that waits for it
    before the tool's first line (node's), and where prlimit(1) is not installed (then an interpreter runs no tool
    code that soon, but a process the tool starts before the limit is set keeps none). False where the system has no
    ``prlimit`` call (macOS)."""
    try:
        import resource

        resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, limit))
    except (ImportError, AttributeError, OSError, ValueError):
        return False
    return True


def disk_usage(directory: str, *, limit: int | None = None) -> int:
    """The bytes of disk the files under ``directory`` take (no link followed); the walk stops once past ``limit``."""
    total, stack = 0, [directory]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:  # gone, or unreadable
            continue
        if limit is not None and total > limit:
            break
    return total


WATCH_INTERVAL = 0.1  # seconds between measures of a watched directory (longer when a measure takes long)


def _stdin_file(data: bytes) -> int:
    """A descriptor of a file holding ``data``, read from its start, that no name on disk refers to.

    An anonymous memory file (``memfd_create``) where the system has one: one call, no directory
    touched; else an unlinked temporary file.
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("toolexec-stdin", os.MFD_CLOEXEC)
    else:
        import tempfile

        fd, path = tempfile.mkstemp()  # noqa: TID251 - only where memfd_create is missing (not Linux)
        os.unlink(path)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _supervise(
    proc: subprocess.Popen[bytes] | WarmProcess,
    system: ModuleType,
    launch: Launch,
    control: CallControl,
    start: float,
    mark: str,
    progress_read: int,
    namespaced: bool = False,
    *,
    search: bool = True,
    ended: Callable[[], bool] | None = None,
) -> Finished:
    """Supervise the started tool, then kill whatever of the call is left and release every descriptor (``search``:
    look for processes that left its group; not for a call whose whole PID namespace is gone once it has ended).
    ``ended``: whether a cold call's PID namespace is gone once its tool has ended (waited for briefly); then nothing
    is searched for either, and the result says ``namespace_gone``."""
    control.emit("started", pid=proc.pid)
    exited: _ExitWaiter | None = None
    supervisor: _Supervisor | None = None
    # SIGKILL goes to the whole tree at once, found while it is whole: a process that left the group is the call's
    # by its descent, which a parent killed first would cut.
    leader = -1  # a pidfd of the tool's first process, this process's child: its group is signalled through it
    kill_tree = (
        (lambda: system.kill_marked(f"{MARKER}={mark}", proc.pid, leader=leader, reaped=_reaped(proc))) if search else (lambda: 0)
    )
    try:
        exited = getattr(proc, "waiter", None) or system.ExitWaiter(proc)
        leader = _leader(exited, proc)
        supervisor = _Supervisor(proc, exited, launch, control, start, progress_read, kill_tree, sealed=not search)
        finished = supervisor.run()
    finally:
        _close(progress_read)
        gone = ended is not None and supervisor is not None and supervisor.exited and ended()
        escaped = (0 if gone else kill_tree()) + (supervisor.escaped if supervisor is not None else 0)
        if not _ended_sealed(proc, sealed=not search):
            _kill_group(proc.pid, signal.SIGKILL, leader, reaped=_reaped(proc))
        if namespaced:  # its own PID namespace: the kernel ended what was left (bwrap's own, too)
            escaped = 0
        _close_pipes(proc)
        try:
            if proc.returncode is None:
                give_up = getattr(proc, "give_up", None)  # a warm call whose status never came: it may never come
                if give_up is not None and (supervisor is None or not supervisor.exited):
                    give_up()
                proc.wait()
        finally:  # after the wait: the portable waiter joins its thread, which returns once the child is reaped
            if exited is not None:
                exited.close()
    return replace(finished, escaped=escaped, namespace_gone=gone)


class _Supervisor:
    """The select loop of one call: pipes, the child's exit, the deadlines and cancellation.

    Its phases: running; after the tool exits, or the deadline passes, or it is cancelled, the group
    gets SIGTERM and ``kill_at`` is set; at ``kill_at`` SIGKILL, then ``give_up_at`` bounds the wait
    for pipes held open by what could not be killed.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes] | WarmProcess,
        waiter: _ExitWaiter,
        launch: Launch,
        control: CallControl,
        start: float,
        progress_fd: int = -1,
        kill_tree: Callable[[], int] | None = None,
        *,
        sealed: bool = False,
    ):
        assert proc.stdout and proc.stderr
        self.proc, self.launch, self.control = proc, launch, control
        self.sealed = sealed  # a warm call whose server says its status once its PID namespace is gone
        self.kill_tree = kill_tree
        self.escaped = 0  # processes outside the group killed with the tree
        self.progress = _ProgressLines(progress_fd, control) if progress_fd >= 0 else None
        self.out_fd, self.err_fd, self.exit_fd = proc.stdout.fileno(), proc.stderr.fileno(), waiter.fileno()
        self.leader = _leader(waiter, proc)
        spill = (lambda s: os.path.join(launch.spill_dir, f"{os.urandom(8).hex()}.{s}")) if launch.spill_dir else (lambda _: None)
        self.captures = {
            self.out_fd: Capture(launch.capture_limit, spill=spill("stdout"), keep_limit=launch.keep_limit),
            self.err_fd: Capture(launch.capture_limit, spill=spill("stderr"), keep_limit=launch.keep_limit),
        }
        # Whether the exit event was handled; not proc.returncode, which a backend's thread may set earlier.
        self.exited = self.timed_out = self.cancelled = False
        self.start = start
        self.deadline = start + launch.timeout if launch.timeout else None
        self.kill_at: float | None = None  # set once the group has had SIGTERM
        self.limit: tuple[str, int] | None = None
        watched = launch.watch_dir is not None and launch.watch_limit is not None
        self.watch_at: float | None = start + WATCH_INTERVAL if watched else None
        self.give_up_at: float | None = None  # after SIGKILL, or after exit: stop waiting for pipes

    def run(self) -> Finished:
        """Supervise until the call is over; every capture is closed on every path."""
        try:
            sel = _Poller()
            for fd in (self.out_fd, self.err_fd):
                os.set_blocking(fd, False)
                sel.register(fd)
            sel.register(self.exit_fd)
            sel.register(self.control.fileno())
            if self.progress is not None:
                os.set_blocking(self.progress.fd, False)
                sel.register(self.progress.fd)
            while not self._over(sel):
                self._tick(sel)
        finally:
            if self.progress is not None:
                self.progress.finish()
            for capture in self.captures.values():
                capture.close()
        code = self.proc.returncode
        return Finished(
            returncode=code if code is None or code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            stdout=self.captures[self.out_fd],
            stderr=self.captures[self.err_fd],
            timed_out=self.timed_out,
            cancelled=self.cancelled,
            duration=time.monotonic() - self.start,
            limit=self.limit,
            pid=self.proc.pid,
        )

    def _over(self, sel: _Poller) -> bool:
        pipes_open = self.out_fd in sel or self.err_fd in sel
        return (self.exited and not pipes_open) or (self.give_up_at is not None and time.monotonic() >= self.give_up_at)

    def _terminate(self, *, late: bool = False) -> None:
        """SIGTERM to the tool's group, SIGKILL after the grace period; ``late`` (a timeout, a cancellation): a warm
        call's server stopped by its tool goes on first, to say the call's status as it ends."""
        if late and not self.exited and (wake := getattr(self.proc, "wake_server", None)) is not None:
            wake()
        _kill_group(self.proc.pid, signal.SIGTERM, self.leader, reaped=_reaped(self.proc))
        self.kill_at = time.monotonic() + self.launch.grace

    def _tick(self, sel: _Poller) -> None:
        now = time.monotonic()
        ending = self.kill_at is not None or self.give_up_at is not None
        if self.kill_at is not None and now >= self.kill_at:
            if self.kill_tree is not None:
                self.escaped += self.kill_tree()
            _kill_group(self.proc.pid, signal.SIGKILL, self.leader, reaped=_reaped(self.proc))
            self.kill_at, self.give_up_at = None, now + 1.0
        if not ending and self.deadline is not None and now >= self.deadline:
            self.timed_out = not self.exited
            self._terminate(late=True)
        elif not ending and not self.exited and self.control.deadline is not None and now >= self.control.deadline:
            self.cancelled = True
            self._terminate(late=True)
        elif not ending and not self.exited and self.watch_at is not None and now >= self.watch_at:
            self._measure()
        ending = self.kill_at is not None or self.give_up_at is not None
        watch_at = None if ending or self.exited else self.watch_at
        wakes = [
            t
            for t in (
                None if ending else self.deadline,
                None if ending else self.control.deadline,
                self.kill_at,
                self.give_up_at,
                watch_at,
            )
            if t
        ]
        if self.exited and self.kill_at is not None:
            wakes.append(now + 0.02)  # leftovers without pipes send no event: look again soon
        for fd in sel.select(max(0.0, min(wakes) - now) if wakes else None):
            self._handle(fd, sel)
        if self.exited and self.kill_at is not None and not _group_alive(self.proc.pid, self.leader, reaped=_reaped(self.proc)):
            self.kill_at, self.give_up_at = None, time.monotonic() + 0.2

    def _measure(self) -> None:
        """Measure the watched directory; past its limit the tool is stopped. A slow measure is made less often."""
        assert self.launch.watch_dir is not None and self.launch.watch_limit is not None
        began = time.monotonic()
        if disk_usage(self.launch.watch_dir, limit=self.launch.watch_limit) > self.launch.watch_limit:
            self.limit = ("cache", self.launch.watch_limit)
            self._terminate()
        now = time.monotonic()
        self.watch_at = now + max(WATCH_INTERVAL, 20 * (now - began))

    def _handle(self, fd: int, sel: _Poller) -> None:
        if fd == self.exit_fd:
            sel.unregister(fd)
            self.proc.wait()
            self.exited = True
            if _ended_sealed(self.proc, sealed=self.sealed):
                # nothing of the call is left, and its server has reaped it: its pid (so its group's number) may be
                # another process's by now, which no signal may reach
                self.kill_at, self.deadline = None, None
                self.give_up_at = self.give_up_at or time.monotonic() + 0.2  # for its pipes' ends, closed with it
            elif self.kill_at is None and self.give_up_at is None:  # the tool is done: what it left in its group goes too
                self._terminate()
                self.deadline = None
        elif fd == self.control.fileno():
            sel.unregister(fd)
            if not self.exited:
                self.cancelled = True
                self._terminate(late=True)
        elif self.progress is not None and fd == self.progress.fd:
            if not self.progress.read():
                sel.unregister(fd)
        else:
            data = os.read(fd, CHUNK)
            if data:
                self.captures[fd].add(data)
            else:
                sel.unregister(fd)


class _Poller:
    """The descriptors one call waits on, for reading: ``poll(2)``, whose set lives in this process (registering and
    unregistering cost no system call, and there is no descriptor of its own to make and close, unlike an epoll
    selector's: a dozen system calls less per call, each of which lets another thread take the GIL)."""

    def __init__(self) -> None:
        self._poll = select.poll()
        self._fds: set[int] = set()

    def register(self, fd: int) -> None:
        self._poll.register(fd, select.POLLIN)
        self._fds.add(fd)

    def unregister(self, fd: int) -> None:
        self._poll.unregister(fd)
        self._fds.discard(fd)

    def __contains__(self, fd: int) -> bool:
        return fd in self._fds

    def select(self, timeout: float | None) -> list[int]:
        """The descriptors readable (or at their end, or in error) within ``timeout`` seconds (None: no limit)."""
        return [fd for fd, _ in self._poll.poll(None if timeout is None else timeout * 1000)]


class _ProgressLines:
    """The read end of a progress pipe: each JSON line ``{"progress": n, "total": m, "message": "…"}`` becomes a
    ``progress`` event on the control, as :func:`toolexec.runtimes.progress.parse_progress` reads it."""

    def __init__(self, fd: int, control: CallControl) -> None:
        self.fd, self.control = fd, control
        self.pending = bytearray()
        self.skipping = False  # inside a line already over the limit: dropped up to its newline

    def read(self) -> bool:
        """Take what is readable; False at end of file."""
        try:
            data = os.read(self.fd, CHUNK)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.pending += data
        *lines, rest = self.pending.split(b"\n")
        for line in lines:
            if self.skipping:
                self.skipping = False
            else:
                self._emit(bytes(line))
        if len(rest) > PROGRESS_LINE_LIMIT:
            self.skipping, rest = True, bytearray()
        self.pending = bytearray(rest)
        return True

    def finish(self) -> None:
        """Read what the tool wrote before the call ended; a last line without a newline still counts."""
        with contextlib.suppress(OSError):
            for _ in range(64):  # bounded: a leftover writer cannot keep the call alive
                if not self.read():
                    break
        if self.pending and not self.skipping:
            self._emit(bytes(self.pending))
            self.pending.clear()

    def _emit(self, line: bytes) -> None:
        from toolexec.runtimes.progress import parse_progress  # only a call that listens for events pays for it

        event = parse_progress(line)
        if event is not None:
            self.control.emit("progress", **event)


def _abandon(proc: subprocess.Popen[bytes] | WarmProcess) -> None:
    """A started tool whose call failed before its supervision began: its group killed, its pipes closed, reaped (a
    warm call's status given up on), so that neither a process nor a descriptor of it is left."""
    with contextlib.suppress(OSError):
        _kill_group(proc.pid, signal.SIGKILL, reaped=_reaped(proc))
    _close_pipes(proc)
    try:
        if proc.returncode is None:
            give_up = getattr(proc, "give_up", None)  # a warm call whose status may never come
            if give_up is not None:
                give_up()
            proc.wait()
    finally:
        waiter = getattr(proc, "waiter", None)
        if waiter is not None:
            waiter.close()


def _close_pipes(proc: subprocess.Popen[bytes] | WarmProcess) -> None:
    """Close this process's ends of the tool's stdout and stderr."""
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _close(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def _ended_sealed(proc: subprocess.Popen[bytes] | WarmProcess, *, sealed: bool) -> bool:
    """Whether ``proc`` is a sealed warm call (``sealed``) whose server said its status: every process of the call had
    ended by then and the server reaped them, so no signal may go to their numbers (another process may have one)."""
    return sealed and proc.returncode is not None and bool(getattr(proc, "reported", False))


def _leader(waiter: _ExitWaiter, proc: subprocess.Popen[bytes] | WarmProcess) -> int:
    """The pidfd of a cold call's tool (this process's child, its group's leader: the Linux backend's exit waiter), or
    of a warm call's process, which its server sent (``leader``: Python's under ``sandbox: off``), or -1 (other warm
    calls, whose process is their server's child; the portable backend, which has none)."""
    if isinstance(waiter, process_linux.ExitWaiter):
        return waiter.fileno()
    leader = getattr(proc, "leader", -1)
    return leader if isinstance(leader, int) else -1


def _kill_group(pgid: int, sig: signal.Signals, leader: int = -1, *, reaped: bool = False) -> None:
    """Send ``sig`` to the tool's group: through ``leader``, its leader's pidfd, where there is one (see
    :func:`toolexec.runtimes.process_linux.signal_group`: once the leader is reaped and its group empty, the number
    may be a new session's), else by the number; once the leader is ``reaped``, only while no process has it
    (:func:`_number_taken`)."""
    if leader >= 0:
        process_linux.signal_group(leader, pgid, sig)
        return
    if reaped and _number_taken(pgid):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _number_taken(pid: int) -> bool:
    """Whether a process has the number ``pid`` (asked once the process that had it is reaped, where no pidfd names
    it: the portable backend, a warm Bash call). The kernel gives a number to no new process while any process has it
    as its group or session, so a process that has it is a new one, and no process of the call is left in that group
    or session: the number is not the call's any more, and a signal to it would reach another session."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (EPERM: another user's process has it)
        return True
    return True


def _reaped(proc: subprocess.Popen[bytes] | WarmProcess) -> bool:
    """Whether the call's first process is reaped: its status read by this process, or said by its warm server."""
    return proc.returncode is not None


def _group_alive(pgid: int, leader: int = -1, *, reaped: bool = False) -> bool:
    if leader >= 0:
        return process_linux.signal_group(leader, pgid, 0)
    if reaped and _number_taken(pgid):
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
