"""The host side of a warm Bash server (``bash_warm.sh``): a bash that has sourced the tool forks a subshell per call,
ahead of it.

A bash cannot receive descriptors, so a call's channels are named: each call takes a **slot**, a directory (0700) of
the server's own private directory (``toolexec-warm-…``, 0700, made once per server and removed with it, or by the
process's guard should this process die), holding FIFOs for stdout, stderr, the status and progress, whose read ends
this process opens before it hands the slot a call, a FIFO ``go`` whose write end this process holds, and two
files: the call's request (``in``) and its script (``call``: environment, working directory;
:mod:`toolexec.runtimes._bash_call`), rewritten in place through descriptors this process keeps. The status FIFO
carries ``P<pid>`` once the call's process has taken its descriptors and ``X<status>`` once it has ended: it is the
call's exit waiter (end of file without a status: the waiter died, and the call counts as killed). Closing it gives
the slot back, every read end of the call closed.

Each slot has a **waiter** of its own: a bash forked from the server for the slot's first call (named on the
server's stdin) and kept, which forks each call's own waiter and process *ahead* of the call, once the last call's
status is said: the call's waiter reads the slot's next call (one line, its mode) on ``go``, hands it to the call's
process (a FIFO ``wake``, the bash's own), waits for it and says its status. So a call's way is one write on ``go``
and no fork (two forks per call, off its way: a bash cannot learn a child's status while it reads its stdin, and a
background job would leave its pid in ``$!`` for the next call's process to see). No waiter runs any of the tool's
code: each call still starts from a fork of the sourced tool. Closing ``go`` (the slot removed, or the server
closing) ends the waiters; a slot's waiter that is gone (``go`` has no reader once the call it forked ahead is over)
is replaced by the server's next fork. The call's waiter says its own pid beside the call's (``P<pid> <pid>``): one
re-parented here (its slot's waiter killed) is reaped here once the call is over.

A process forked from the one that started the server (a ``toolexec serve`` call's child, whose server's process never
runs a call) uses none of that process's slots, which the other forked processes would use at once: it makes slots of
its own, named after its pid, and removes them as it exits (after its call's answer).

A slot is used again only when no process can write into its FIFOs: a read end just opened (no data, no writer)
reads end of file; a FIFO that has a writer left (a process of an earlier call that outlived it) or unread data
fails that check, and the slot is removed and a new one made. Nothing of the file system is made or removed on a
call's path: a slot's FIFOs and files are made once (~0.45 ms for a directory, four FIFOs and their removal per call
on the ext4 ``/tmp`` measured, more under load).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from toolexec.recordtype import replace
from toolexec.runtimes import loaded, process_linux, warm_limits
from toolexec.runtimes._bash_call import call_script
from toolexec.runtimes.warm_fork import (
    FD_VARIABLE,
    SERVER_VARIABLE,
    START_SECONDS,
    CallProcess,
    ForkServer,
    ServerProcess,
    register,
)

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from toolexec.runtimes.warm import WarmCall, WarmServer, WarmSpec

DRAIN_SECONDS = 1.0  # the longest a call's waiter takes to exit once it has said the status
BLOCK = 1024  # `ulimit -f` counts 1024-byte blocks: a bound that is no multiple of it runs cold
SLOTS_VARIABLE = "TOOLEXEC_WARM_SLOTS"  # the server's private directory, whose slots each request names
# Under the sandbox's baseline: the server that makes each call's PID namespace ahead of it, a bash sourced in it.
SPARES_SERVER = Path(__file__).with_name("_bash_zygote.py")


def server(spec: WarmSpec) -> WarmServer:
    """The warm server of a Bash tool: under the sandbox's baseline (``spec.isolated``) spares, each a bash that
    sourced the tool alone in a PID namespace of its own, made ahead of the calls by ``_bash_zygote.py`` (the Python
    zygote's protocol: :class:`~toolexec.runtimes.warm_fork.ForkServer`); else one bash that sourced the tool and
    forks a subshell per call (:class:`BashServer`)."""
    if spec.isolated:
        return ForkServer(replace(spec, argv=[sys.executable, "-S", "-E", "-s", str(SPARES_SERVER), *spec.argv]))
    return BashServer(spec)


class BashServer(ServerProcess):
    """One Bash tool's warm server (sandbox off); thread-safe."""

    def __init__(self, spec: WarmSpec) -> None:
        super().__init__(spec)
        self._requests = -1
        self._root: str | None = None  # the slots' directory
        self._free: list[_Slot] = []  # slots whose last call is over
        self._made = 0  # slots made (each named by its number)
        self._slots: set[_Slot] = set()  # slots made and not removed (each with a waiter once it has had a call)
        # The process whose slots these are, and the one that started the server (see the module: a forked one makes
        # its own, named after it).
        self._owner = self._starter = os.getpid()

    def start(self) -> bool:
        """Start bash, source the tool, and wait until it says it is ready."""
        try:
            self._root = _private_directory()
        except OSError as exc:
            self.problem = f"the warm server has no directory for its calls: {exc}"
            return False
        process_linux.remove_at_death(self._root)
        ready_read, ready_write = os.pipe()
        requests_read, requests_write = os.pipe()
        started, started_wall = loaded.clocks()
        try:
            env = {**self.spec.env, FD_VARIABLE: str(ready_write), SERVER_VARIABLE: self.spec.tool, SLOTS_VARIABLE: self._root}
            argv = warm_limits.plain(self.spec.limits, self.spec.argv)  # the tool is sourced under the call's file size
            self._proc = self._popen(argv, requests_read, env, (ready_write,))
        except OSError as exc:
            os.close(requests_write)
            self.problem = f"the warm server cannot start: {exc}"
            self._end()
            return False
        finally:
            os.close(ready_write)
            os.close(requests_read)
        register(self._proc.pid)
        try:
            answer = loaded.read_word(ready_read, START_SECONDS, self._proc.pid)
        finally:
            os.close(ready_read)
        if answer[:1] != b"R":
            os.close(requests_write)
            said = answer[1:].decode("utf-8", "replace") if answer[:1] == b"F" else ""  # (why, in the bash's words)
            self.problem = said or "the tool ended (or took too long) while it was sourced"
            self._end()
            return False
        self.loaded = loaded.taken(loaded.parse(answer), started, started_wall)
        self._requests = requests_write
        return True

    def spawn(self, call: WarmCall) -> BashCall | None:
        """Hand ``call`` to the server; None when it cannot take it (the server is gone, or the call's file bound is
        not a whole number of blocks)."""
        if call.file_limit is not None and call.file_limit % BLOCK:
            return None
        if self._requests < 0 or not self._take():
            return None
        forked: BashCall | None = None
        try:
            slot, fds = self._slot(call.progress >= 0)
            forked = BashCall(self, slot, fds, call)
            mode = b"p" if call.progress >= 0 else b"-"
            with self._lock:
                written = not self._closed and (slot.go(mode) or self._fork_waiter(mode, slot))
            if written and forked.started():
                return forked
        except OSError:
            pass
        if forked is not None:
            forked.abandon()
        else:
            self._done()
        return None

    def _fork_waiter(self, mode: bytes, slot: _Slot) -> bool:
        """Name ``slot`` on the server's stdin: the server forks the slot's waiter, which runs this call (under the
        lock)."""
        line = mode + slot.name.encode() + b"\n"
        return os.write(self._requests, line) == len(line)

    def _slot(self, progress: bool) -> tuple[_Slot, list[int]]:
        """A free slot (or a new one) and the read ends of its FIFOs (stdout, stderr, status and, for ``progress``,
        progress), none of which any process can write into."""
        self._own_slots()
        while True:
            with self._lock:
                slot = self._free.pop() if self._free else None
                root = self._root
                if root is None:
                    raise OSError("the server's directory is gone")
                if slot is None:
                    self._made += 1
                number = self._made
            if slot is None:
                slot = _Slot(root, str(number) if self._owner == self._starter else f"{self._owner}-{number}")
                with self._lock:
                    self._slots.add(slot)
            try:
                fds = slot.open(progress)
            except OSError:
                fds = None  # (its FIFOs are gone)
            if fds is not None:
                return slot, fds
            self._forget(slot)  # a writer (or data) left in it by an earlier call: never used again

    def _own_slots(self) -> None:
        """In a process forked from the last one that used the slots: forget theirs (that process's, and its other
        children's, to use) and remove the ones made here once this process exits."""
        me = os.getpid()
        if me == self._owner:
            return
        with self._lock:
            self._owner, self._free, self._slots = me, [], set()
        atexit.register(self._remove_own)

    def _remove_own(self) -> None:
        if os.getpid() != self._owner:
            return  # (a process forked from this one inherits the handler)
        with self._lock:
            slots, self._slots, self._free = list(self._slots), set(), []
        for slot in slots:
            slot.remove()

    def _give_back(self, slot: _Slot) -> None:
        """The call in ``slot`` is over and its read ends closed: the next call may take it."""
        with self._lock:
            kept = not self._closed and self._root is not None and slot.path.startswith(self._root)
            if kept:
                slot.waited = True  # its waiter reads the next call on `go` (it said this call's status)
                self._free.append(slot)
        if not kept:
            self._forget(slot)

    def _forget(self, slot: _Slot) -> None:
        """Remove ``slot`` (its waiter ends)."""
        with self._lock:
            self._slots.discard(slot)
        slot.remove()

    def _stop_taking(self) -> None:
        """The server's loop ends at the end of its stdin, once its calls are over."""
        with self._lock:
            requests, self._requests = self._requests, -1
            free = list(self._free)
        for slot in free:  # their waiters end (the server ends once its waiters have)
            slot.stop()
        if requests >= 0:
            os.close(requests)

    def _end(self) -> None:
        """Reap the server and remove its slots (its calls are over: none is in use)."""
        with self._lock:
            slots = list(self._slots)
        for slot in slots:  # every waiter ends, that of a call whose slot is not given back yet too
            slot.stop()
        super()._end()
        with self._lock:
            root, self._root = self._root, None
            free, self._free = self._free, []
            self._slots.clear()
        for slot in free:
            slot.close()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
            process_linux.remove_at_death(root, False)


# (and ``go``, whose write end is this process's, and ``wake``, the bash's own: see bash_warm.sh)
_FIFOS = ("out", "err", "st", "progress")
MEMORY_DIRECTORY = "/dev/shm"  # a tmpfs on Linux: nothing there waits for a disk's journal


def _private_directory() -> str:
    """A new private directory (0700) for a server's slots: in memory where this user may make one, else in the
    temporary directory."""
    with contextlib.suppress(OSError):
        return tempfile.mkdtemp(prefix="toolexec-warm-", dir=MEMORY_DIRECTORY)
    return tempfile.mkdtemp(prefix="toolexec-warm-")


class _Slot:
    """A directory of a server's, for one call at a time: its FIFOs, and its request and script files, kept open here
    to be rewritten in place."""

    def __init__(self, root: str, name: str) -> None:
        self.path, self.name = os.path.join(root, name), name  # (the server finds it by its name in its directory)
        path = self.path
        self._files: list[int] = []
        self._go = -1  # the write end of `go` (the waiter's read end: its end of file ends the waiter)
        self._going = threading.Lock()  # (stop may come from the server's end and from the slot's removal at once)
        self.waited = False  # a waiter serves it: a call is handed over on `go` (else named on the server's stdin)
        os.mkdir(path, 0o700)
        try:
            for fifo in (*_FIFOS, "go", "wake"):
                os.mkfifo(os.path.join(path, fifo), 0o600)
            go = os.path.join(path, "go")
            # (a write end alone, never blocking: opened beside a read end that is closed at once)
            either = os.open(go, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                self._go = os.open(go, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
            finally:
                os.close(either)
            for file in ("in", "call"):
                flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                self._files.append(os.open(os.path.join(path, file), flags, 0o600))
        except BaseException:
            self.remove()
            raise

    def open(self, progress: bool) -> list[int] | None:
        """The read ends of the FIFOs the call uses; None when one has a writer or unread data (see the module)."""
        fds: list[int] = []
        try:
            for name in _FIFOS[: 4 if progress else 3]:
                fds.append(os.open(os.path.join(self.path, name), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC))
                if os.read(fds[-1], 1) != b"":  # end of file: no writer, nothing left
                    raise BlockingIOError
        except BlockingIOError:
            for fd in fds:
                os.close(fd)
            return None
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def write(self, request: bytes, script: bytes) -> None:
        """The call's request and script, in place of the last call's."""
        for fd, data in zip(self._files, (request, script), strict=True):
            view = memoryview(data)
            offset = 0
            while offset < len(data):
                offset += os.pwrite(fd, view[offset:], offset)
            os.ftruncate(fd, len(data))  # (never to 0 first: on ext4 that starts the file's writeback)

    def go(self, mode: bytes) -> bool:
        """Hand the slot's waiter its next call (its ``mode``); False when no waiter serves it (its first call, or its
        waiter is gone: ``go`` has no reader), and the server must fork one. OSError when ``go`` is full (of lines
        toolexec did not write), or closed: the call is not started, and the slot is not used again."""
        with self._going:
            if self._go < 0:  # (a waiter forked now would wait for a writer forever)
                raise OSError("the slot's go FIFO is closed")
            if not self.waited:
                return False
            self.waited = False
            try:
                return os.write(self._go, mode + b"\n") == len(mode) + 1
            except BrokenPipeError:
                return False

    def stop(self) -> None:
        """End the slot's waiter: the end of file of ``go``. Once only (the fd is not closed twice)."""
        with self._going:
            fd, self._go = self._go, -1
        if fd >= 0:
            os.close(fd)

    def close(self) -> None:
        self.stop()
        for fd in self._files:
            os.close(fd)
        self._files = []

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)


class _Status:
    """The status FIFO's read end: the call's exit waiter. Closing it gives the call's slot back once the waiter's
    end of the FIFO is seen closed (:meth:`drain`); a slot of a call not seen through is removed."""

    def __init__(self, fd: int, slot: _Slot, server: BashServer) -> None:
        self._fd, self._slot, self._server = fd, slot, server
        self._clean = False

    def fileno(self) -> int:
        return self._fd

    def drain(self) -> None:
        """After the status: read to the end of the FIFO, which the waiter closes as it exits (at once, unless it is
        stopped: then the slot is not used again)."""
        try:
            while select.select([self._fd], [], [], DRAIN_SECONDS)[0]:
                if not os.read(self._fd, 64):
                    self._clean = True
                    return
        except OSError:
            return

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            if self._clean:
                self._server._give_back(self._slot)
            else:
                self._server._forget(self._slot)


class BashCall(CallProcess):
    """A call's process forked by a :class:`BashServer`; the status FIFO is its waiter."""

    def __init__(self, server: BashServer, slot: _Slot, fds: list[int], call: WarmCall) -> None:
        try:
            env = dict(call.env)
            if call.file_limit is not None:
                env["TOOLEXEC_FILE_LIMIT"] = str(call.file_limit)
            if call.progress >= 0:
                env["LLM_PROGRESS"] = os.path.join(slot.path, "progress")
            # (what the call changes of the server's environment: the bash that sourced the tool started in it)
            script = call_script(env, call.cwd or os.getcwd(), base=server.spec.env)  # no cgroup
            slot.write(_read_all(call.stdin), script)
        except BaseException:
            for fd in fds:
                os.close(fd)
            server._forget(slot)
            raise
        self._status = _Status(fds[2], slot, server)
        self._waiter = -1  # a pidfd of the call's own waiter (the call's process is its child; see bash_warm.sh)
        super().__init__(server, self._status, fds[0], fds[1], fds[3] if len(fds) > 3 else -1)

    def _started_by(self, said: bytes) -> int:
        """``P<pid> <its waiter's pid>``: the waiter is alive then (it waits for the call), so its pidfd is its own."""
        pid, _, waiter = said.partition(b" ")
        with contextlib.suppress(OSError, ValueError):
            self._waiter = os.pidfd_open(int(waiter))
        return int(pid)

    def wait(self) -> int:
        """The call's exit status (see :meth:`CallProcess.wait`), then the end of its status FIFO."""
        if self.returncode is None:
            super().wait()
            if self.reported:
                self._status.drain()
            self._reap_waiter()
        assert self.returncode is not None
        return self.returncode

    def _reap_waiter(self) -> None:
        """Reap the call's waiter when it was re-parented here (this process is a subreaper): the slot's waiter that
        forked it ahead of the call had been killed. It is not this process's child otherwise (ECHILD at once)."""
        fd, self._waiter = self._waiter, -1
        if fd < 0:
            return
        try:
            if os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOHANG) is None:  # ours, and about to exit (it said the status)
                if not select.select([fd], [], [], DRAIN_SECONDS)[0]:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)  # (stopped, say: an orphan of ours, never left)
                os.waitid(os.P_PIDFD, fd, os.WEXITED)
        except OSError:
            pass  # (ECHILD: the slot's waiter reaps it, as it should)
        finally:
            os.close(fd)

    def exit_code(self, status: int) -> int:
        """As bash's ``wait`` gives it: 128 + N for a call ended by signal N."""
        return status

    def abandon(self) -> None:
        """The server did not start the call: release everything."""
        for fd in (self._out, self._err, self.progress):
            if fd >= 0 and self.stdout is None:
                os.close(fd)
        self._reap_waiter()
        super().abandon()


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
