"""The host side of a fork server (zygote): start it, hand it calls, read back each call's pid and wait status.

The server program is the runtime's (``python_zygote.py`` for Python); the protocol is
``_python_zygote.py``'s: one ``SOCK_SEQPACKET`` socket for calls (a marshal'ed message with the call's descriptors
passed by SCM_RIGHTS), and per call a reply socket on which the server writes ``P<pid>`` once the call's process
exists and ``X<wait status>`` once it has reaped it. The reply socket is the call's exit waiter: it becomes readable
when the status comes, or at end of file should the server die (then the call counts as killed).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import socket
import subprocess
import threading

from toolexec.runtimes import process_linux
from toolexec.runtimes.process import _stdin_file

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import IO

    from toolexec.runtimes.warm import WarmCall, WarmSpec

FD_VARIABLE = "TOOLEXEC_ZYGOTE_FD"
# In a server's environment, so in what /proc shows of every process it forks that has not run a program since (a
# process's environment there is the one it started with): such a process is a warm call's or the server's.
SERVER_VARIABLE = "TOOLEXEC_WARM_SERVER"
_running: set[int] = set()  # the pids of the servers alive in this process (a test tells them from their calls)


def running_servers() -> frozenset[int]:
    """The process ids of the fork servers this process runs."""
    return frozenset(_running)


START_SECONDS = 60.0  # the longest a tool may take to load before it runs cold instead
REPLY_SECONDS = 10.0  # the longest a live server takes to fork a call


class ForkServer:
    """One tool's fork server (see the module's docstring); thread-safe."""

    def __init__(self, spec: WarmSpec) -> None:
        self.spec = spec
        self.problem: str | None = None  # why the tool cannot run warm, once start() said so
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._lock = threading.Lock()
        self._busy = 0
        self._closed = False

    def start(self) -> bool:
        """Start the server and wait until the tool has loaded; False (and :attr:`problem`) when it cannot serve."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        stdin = -1
        try:
            stdin = _stdin_file(self.spec.payload)
            env = {**self.spec.env, FD_VARIABLE: str(theirs.fileno()), SERVER_VARIABLE: self.spec.tool}
            self._proc = subprocess.Popen(
                process_linux.with_death_signal(list(self.spec.argv)),
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=self.spec.cwd,
                start_new_session=True,
                close_fds=True,
                pass_fds=(theirs.fileno(),),
            )
            _running.add(self._proc.pid)
        except OSError as exc:
            ours.close()
            self.problem = f"the warm server cannot start: {exc}"
            return False
        finally:
            theirs.close()
            if stdin >= 0:
                os.close(stdin)
        ours.settimeout(START_SECONDS)
        try:
            answer = ours.recv(1 << 16)
        except OSError:
            answer = b""
        ours.settimeout(None)
        if answer != b"R":
            self.problem = answer[1:].decode("utf-8", "replace") if answer[:1] == b"F" else "the warm server ended at start"
            ours.close()
            self._end()
            return False
        self._control = ours
        return True

    def spawn(self, call: WarmCall, stdout: int, stderr: int) -> ForkedCall | None:
        """Hand ``call`` to the server; the started call, or None when the server is gone (or closed)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fds = [call.stdin, call.stdout, call.stderr, theirs.fileno(), *([call.progress] if call.progress >= 0 else [])]
        message = marshal.dumps({"env": dict(call.env), "cwd": call.cwd, "fsize": call.file_limit}, 2)
        with self._lock:
            control = None if self._closed else self._control
            if control is not None:
                self._busy += 1
        if control is None:
            mine.close()
            theirs.close()
            return None
        try:
            socket.send_fds(control, [message], fds)
        except OSError:
            self._done()
            mine.close()
            return None
        finally:
            theirs.close()
        forked = ForkedCall(self, mine, stdout, stderr)
        if not forked.started():
            forked.abandon()
            return None
        return forked

    def busy(self) -> int:
        """Calls handed over and not yet waited for."""
        with self._lock:
            return self._busy

    def close(self) -> None:
        """Take no more calls; the server ends once its calls are over (and is reaped then)."""
        with self._lock:
            self._closed = True
            control, self._control = self._control, None
            idle = self._busy == 0
        if control is not None:
            control.close()  # the server sees the end of file: it exits once its children are reaped
        if idle:
            self._end()

    def _done(self) -> None:
        with self._lock:
            self._busy -= 1
            last = self._closed and self._busy == 0
        if last:
            self._end()

    def _end(self) -> None:
        """Reap the server (it exits by itself once closed and idle; killed if it does not)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
        _running.discard(proc.pid)


class _Waiter:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()


class ForkedCall:
    """A call's process forked by a :class:`ForkServer`: as much of ``subprocess.Popen`` as the process helper uses."""

    def __init__(self, server: ForkServer, reply: socket.socket, stdout: int, stderr: int) -> None:
        self._server = server
        self._reply = reply
        self._buffer = b""
        self._counted = True
        self.pid = 0
        self.returncode: int | None = None
        self._out, self._err = stdout, stderr
        self.stdout: IO[bytes] | None = None  # opened once started: until then the caller owns the descriptors
        self.stderr: IO[bytes] | None = None
        self.waiter = _Waiter(reply)

    def _line(self, timeout: float | None) -> bytes:
        self._reply.settimeout(timeout)
        try:
            while b"\n" not in self._buffer:
                data = self._reply.recv(64)
                if not data:
                    return b""
                self._buffer += data
        except OSError:
            return b""
        finally:
            with contextlib.suppress(OSError):
                self._reply.settimeout(None)
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def started(self) -> bool:
        """Read the call's pid; False when the server did not fork it."""
        line = self._line(REPLY_SECONDS)
        if line[:1] != b"P":
            return False
        self.pid = int(line[1:])
        self.stdout = open(self._out, "rb", buffering=0)  # noqa: SIM115 - closed by the process helper
        self.stderr = open(self._err, "rb", buffering=0)  # noqa: SIM115
        return True

    def wait(self) -> int:
        """The call's exit status (negative: the signal that ended it), once the server has reaped it."""
        if self.returncode is None:
            line = self._line(None)
            status = int(line[1:]) if line[:1] == b"X" else None
            # No status: the server died (or was killed) with the call: it counts as killed.
            self.returncode = os.waitstatus_to_exitcode(status) if status is not None else -9
            if self._counted:
                self._counted = False
                self._server._done()
        return self.returncode

    def abandon(self) -> None:
        """The server did not fork the call: release the reply socket (the caller keeps its pipes)."""
        if self._counted:
            self._counted = False
            self._server._done()
        self.waiter.close()
