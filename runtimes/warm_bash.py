"""The host side of a warm Bash server (``bash_warm.sh``): a bash that has sourced the tool forks a subshell per call.

A bash cannot receive descriptors, so a call's channels are named: a private directory (0700) per call holds its
request (``in``), its environment and working directory (``env``), and FIFOs for stdout, stderr, the status (and
progress) whose read ends this process opens before it names the directory on the server's stdin. The status FIFO
carries ``P<pid>`` once the call's process has taken its descriptors and ``X<status>`` once it has ended: it is the
call's exit waiter (end of file without a status: the waiter died, and the call counts as killed). The directory
goes when the call's waiter is closed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from toolexec.recordtype import replace
from toolexec.runtimes import loaded
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

BLOCK = 1024  # `ulimit -f` counts 1024-byte blocks: a bound that is no multiple of it runs cold
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

    def start(self) -> bool:
        """Start bash, source the tool, and wait until it says it is ready."""
        ready_read, ready_write = os.pipe()
        requests_read, requests_write = os.pipe()
        started, started_wall = loaded.clocks()
        try:
            self._proc = subprocess.Popen(
                list(self.spec.argv),  # no death signal: it ends at the end of its socket (or stdin), as when this process dies
                stdin=requests_read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**self.spec.env, FD_VARIABLE: str(ready_write), SERVER_VARIABLE: self.spec.tool},
                cwd=self.spec.cwd,
                start_new_session=True,
                close_fds=True,
                pass_fds=(ready_write,),
            )
        except OSError as exc:
            os.close(requests_write)
            self.problem = f"the warm server cannot start: {exc}"
            return False
        finally:
            os.close(ready_write)
            os.close(requests_read)
        register(self._proc.pid)
        try:
            answer = loaded.read_word(ready_read, START_SECONDS)
        finally:
            os.close(ready_read)
        if answer[:1] != b"R":
            os.close(requests_write)
            self.problem = "the tool ended (or took too long) while it was sourced"
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
        directory = tempfile.mkdtemp(prefix="toolexec-warm-")
        forked: BashCall | None = None
        try:
            forked = BashCall(self, directory, call)
            with self._lock:
                line = f"{directory}\n".encode()
                written = not self._closed and os.write(self._requests, line) == len(line)
            if written and forked.started():
                return forked
        except OSError:
            pass
        if forked is not None:
            forked.abandon()
        else:
            shutil.rmtree(directory, ignore_errors=True)
            self._done()
        return None

    def _stop_taking(self) -> None:
        """The server's loop ends at the end of its stdin, once its calls are over."""
        with self._lock:
            requests, self._requests = self._requests, -1
        if requests >= 0:
            os.close(requests)


class _Status:
    """The status FIFO's read end: the call's exit waiter. Closing it removes the call's directory."""

    def __init__(self, fd: int, directory: str) -> None:
        self._fd, self._directory = fd, directory

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        shutil.rmtree(self._directory, ignore_errors=True)


class BashCall(CallProcess):
    """A call's process forked by a :class:`BashServer`; the status FIFO is its waiter."""

    def __init__(self, server: BashServer, directory: str, call: WarmCall) -> None:
        fds: list[int] = []
        try:
            for name in ("out", "err", "st", *(["progress"] if call.progress >= 0 else [])):
                os.mkfifo(os.path.join(directory, name), 0o600)
                fds.append(os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
            with open(os.path.join(directory, "in"), "wb") as request:
                request.write(_read_all(call.stdin))
            env = dict(call.env)
            if call.file_limit is not None:
                env["TOOLEXEC_FILE_LIMIT"] = str(call.file_limit)
            if call.progress >= 0:
                env["LLM_PROGRESS"] = os.path.join(directory, "progress")
            entries = [call.cwd or os.getcwd(), "", *(f"{name}={value}" for name, value in env.items())]  # no cgroup
            with open(os.path.join(directory, "env"), "wb") as out:
                out.write(b"".join(entry.encode("utf-8", "surrogateescape") + b"\0" for entry in entries))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        super().__init__(server, _Status(fds[2], directory), fds[0], fds[1], fds[3] if len(fds) > 3 else -1)

    def exit_code(self, status: int) -> int:
        """As bash's ``wait`` gives it: 128 + N for a call ended by signal N."""
        return status

    def abandon(self) -> None:
        """The server did not start the call: release everything."""
        for fd in (self._out, self._err, self.progress):
            if fd >= 0 and self.stdout is None:
                os.close(fd)
        super().abandon()


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
