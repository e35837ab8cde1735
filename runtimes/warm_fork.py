"""The host side of a fork server (zygote): start it, hand it calls, read back each call's pid and wait status.

The server program is the runtime's (``python_zygote.py`` for Python); the protocol is
``_python_zygote.py``'s: one ``SOCK_SEQPACKET`` socket for calls (a marshal'ed message with the call's descriptors
passed by SCM_RIGHTS), on which the server also offers each spare it makes ahead (``S<pid>`` with the socket the spare
waits on: the call is sent there, and ``T<pid>`` with its reply socket to the server), and per call a reply socket on
which the call's process writes ``P`` once it has the call (its pid in the credentials) and the server
``X<wait status>`` once the call is over. The reply socket is the call's exit waiter: it becomes readable when the
status comes, or at end of file should the server die (then the call counts as killed).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import threading

from toolexec.runtimes import baseline, cgroup, loaded, process_linux, sandbox, warm_limits
from toolexec.runtimes.netproxy import Proxy
from toolexec.runtimes.process import MARKER, _stdin_file
from toolexec.runtimes.starter import lasting

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import IO

    from toolexec.runtimes.warm import WaiterLike, WarmCall, WarmSpec

FD_VARIABLE = "TOOLEXEC_ZYGOTE_FD"
# In a server's environment, so in what /proc shows of every process it forks that has not run a program since (a
# process's environment there is the one it started with): such a process is a warm call's or the server's.
SERVER_VARIABLE = "TOOLEXEC_WARM_SERVER"
_running: set[int] = set()  # the pids of the servers alive in this process (a test tells them from their calls)


def running_servers() -> frozenset[int]:
    """The process ids of the warm servers this process runs."""
    return frozenset(_running)


def register(pid: int) -> None:
    """``pid`` is a warm server of this process (until :func:`unregister`): never taken for a call's orphan."""
    _running.add(pid)
    process_linux.exempt(pid)


def unregister(pid: int) -> None:
    """``pid`` was a warm server of this process and has been reaped."""
    _running.discard(pid)
    process_linux.unexempt(pid)


ISOLATE_VARIABLE = "TOOLEXEC_ZYGOTE_ISOLATE"
MARK_PLACEHOLDER = "-" * 24  # as long as a call's marker (process.run_process: 12 random bytes in hex)
# UID:GID:PRIVATE_TMP:OWN:HOME of a server in its tool's sandbox (_python_confined)
CONFINE_VARIABLE = "TOOLEXEC_ZYGOTE_CONFINE"


def isolated_argv(argv: list[str]) -> list[str]:
    """``argv`` run inside the sandbox baseline's namespaces (bwrap: :func:`toolexec.runtimes.baseline._namespaces`),
    made once for a server that makes a PID namespace per call: it keeps CAP_SYS_ADMIN there (an ordinary user's,
    only inside its own user namespace), and CAP_SETPCAP, without which a call could not empty its bounding set:
    each call drops every capability, from every set. bwrap's ``--die-with-parent`` (in the baseline's namespaces) ends
    the server, and with it every call it forked, should this process die: a sealed call's process is not told to this
    process's guard (:func:`toolexec.runtimes.process_linux.register`)."""
    binary = sandbox.bwrap()
    assert binary is not None
    keep = ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"] if os.geteuid() != 0 else []
    return [*baseline._namespaces(binary), *keep, "--", *argv]


START_SECONDS = 60.0  # the longest a tool may take to load before it runs cold instead
REPLY_SECONDS = 30.0  # the longest a live server takes to fork a call (a loaded machine is slow)
WAKE_SECONDS = 0.5  # a call's start slower than this looks whether a tool stopped the server (ServerProcess.wake)
GIVE_UP_SECONDS = 5.0  # a call killed and given up on: how long its server has to say its status before it is ended


class ServerProcess:
    """What every warm server's host side shares: its process, the count of calls in flight, and an end that waits
    for them. A subclass starts ``_proc``, counts a call with :meth:`_take` and :meth:`_done`, and says in
    :meth:`_stop_taking` how its process learns that no call will come (it then ends once its calls are over)."""

    def __init__(self, spec: WarmSpec) -> None:
        self.spec = spec
        self.problem: str | None = None  # why the tool cannot run warm, once start() said so
        self.loaded: loaded.Loaded | None = None  # what it loaded besides the tool's source (set once it said R)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._busy = 0
        self._closed = False
        self._killed = False  # ended by kill(): its group is reaped with it
        self._inits: list[tuple[int, int | None]] = []  # an isolated server's namespace init (bwrap does not wait for it)

    def _popen(self, argv: list[str], stdin: int, env: dict[str, str], pass_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
        """The server's process, started by the one thread that lives as long as this process
        (:func:`toolexec.runtimes.starter.lasting`): an isolated server's bwrap dies with the thread that started it
        (``--die-with-parent``), and the calling thread may end while the server serves on. It has no death signal of
        its own: it ends at the end of its socket or stdin, or with this process. Its group is announced to the
        parent-death guard (withdrawn once it is reaped, :meth:`_end`): a server still starting (its tool's top level
        running, reading neither) is killed with its group should this process die."""
        proc = self._start(argv, stdin, env, pass_fds)
        if process_linux.available():
            process_linux.announce(proc.pid)
        return proc

    def _start(self, argv: list[str], stdin: int, env: dict[str, str], pass_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
        return lasting(
            lambda: subprocess.Popen(
                argv,
                stdin=stdin,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=self.spec.cwd,
                start_new_session=True,
                close_fds=True,
                pass_fds=pass_fds,
            )
        )

    def busy(self) -> int:
        """Calls handed over and not yet waited for."""
        with self._lock:
            return self._busy

    def alive(self) -> bool:
        """Whether the server's process still runs and takes calls."""
        proc = self._proc
        return proc is not None and not self._closed and proc.poll() is None

    def wake(self) -> bool:
        """Continue the server's processes should one be stopped (toolexec never stops a server, but under ``sandbox:
        off`` a call's tool can: the server is its parent, ``kill -STOP $PPID``), so that it says its calls' statuses.
        True when one was: the server is then retired (it ends once its calls are over; the next call gets a new one).
        Looked at only when a call is late: at its timeout or cancellation, or when its start is slow."""
        proc = self._proc
        if proc is None or not process_linux.stopped_in_group(proc.pid):
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGCONT)
        with self._lock:
            self._closed = True
        self._stop_taking()
        return True

    def kill(self) -> None:
        """End the server at once (it said no status of a call killed seconds ago): its calls in flight count as
        killed, their channels closed with it; it is reaped once their last is over (with what of its group it left)."""
        proc = self._proc
        with self._lock:
            self._closed = self._killed = True
        self._stop_taking()
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def close(self) -> None:
        """Take no more calls; the server ends once its calls are over (and is reaped then)."""
        with self._lock:
            self._closed = True
            idle = self._busy == 0
        self._stop_taking()
        if idle:
            self._end()

    def _stop_taking(self) -> None:
        raise NotImplementedError

    def _take(self) -> bool:
        """Count one more call in flight; False once closed."""
        with self._lock:
            if self._closed:
                return False
            self._busy += 1
            return True

    def _done(self) -> None:
        """A call is over (or never started); the last one of a closed server reaps it."""
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
        if process_linux.stopped_in_group(proc.pid):  # stopped by a call's tool (sandbox off): it goes on to end
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGCONT)
        if not self._killed:
            process_linux.await_end(
                proc.pid, 5.0
            )  # (not reaped: while it is a zombie its number is its group's, no other process's)
        # Killed, or ended by itself: what its group still holds goes too (a Bash server's call waiters; a process the
        # tool's top level started, which a cold call's end would have ended), and what of it was re-parented here.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        if proc.returncode is None:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        process_linux.reap_group_orphans(proc.pid)
        process_linux.withdraw(proc.pid)  # (before the reap: until then the number is its group's, no other's)
        proc.wait()
        unregister(proc.pid)
        inits, self._inits = self._inits, []
        for pid, start in inits:  # re-parented here should this process be a subreaper now (calls in flight): reaped
            process_linux.reap_orphan(pid, start)

    def _keep_init(self) -> None:
        """Note the namespace's init of a server started by :func:`isolated_argv` (bwrap's child: bwrap may end before
        it), so that :meth:`_end` reaps it should it be re-parented here: bwrap's child, or (bwrap gone already, a server
        that ended at start) a child of this process in the server's session; nothing where the kernel lists none."""
        proc = self._proc
        if proc is None or not self.spec.isolated:
            return
        with contextlib.suppress(OSError, ValueError):
            found = process_linux._task_children(proc.pid, proc.pid)
            if not found:
                me = os.getpid()
                for task in os.listdir(f"/proc/{me}/task"):
                    found |= process_linux._task_children(me, task)
            for child in found:
                info = process_linux._stat(child)
                if child != proc.pid and info.session == proc.pid:
                    self._inits.append((child, info.start))


class ForkServer(ServerProcess):
    """One tool's fork server (see the module's docstring); thread-safe."""

    def __init__(self, spec: WarmSpec) -> None:
        super().__init__(spec)
        self._control: socket.socket | None = None
        # A confined server's network allow-list proxy: one for all its calls, which all have the same list (one tool,
        # one policy: its key). ``_taken`` counts the calls handed over, so that a call tells its own refusals.
        self.proxy: Proxy | None = None
        self._taken = 0
        self._held: sandbox.Held | None = None  # the server's own cgroups (warm_limits), given back at its end
        # Spares the server offered (``S<pid>`` with the socket the spare waits on): the next call goes to one
        # directly, with no hop through the server (_spawn)
        self._offers: list[tuple[int, socket.socket]] = []
        self._due = False  # a call went to an offered spare since the last offer came: the server offers another

    def start(self) -> bool:
        """Start the server and wait until the tool has loaded; False (and :attr:`problem`) when it cannot serve."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        stdin = -1
        started, started_wall = loaded.clocks()
        held: sandbox.Held | None = None
        try:
            stdin = _stdin_file(self.spec.payload)
            env = {**self.spec.env, FD_VARIABLE: str(theirs.fileno()), SERVER_VARIABLE: self.spec.tool}
            env[MARKER] = MARK_PLACEHOLDER  # each call's process writes its own marker over it (_python_zygote._find_mark)
            argv = list(self.spec.argv)
            if self.spec.confinement is not None:  # the tool's own sandbox, as a cold confined call's bwrap makes it
                env[ISOLATE_VARIABLE] = "1"
                confinement = self.spec.confinement
                tmp = ("/tmp", "/tmp/")  # a policy that reads or writes /tmp itself: a cold call's /tmp is the host's
                private = not any(path in tmp for path in (*confinement.writable, *confinement.visible, *confinement.revealed))
                own = "n" if confinement.network == "none" and not confinement.allowed else ""  # each call its loopback
                places = (*confinement.writable, *confinement.visible, *confinement.revealed)
                own += "" if any(path == "/dev" or path.startswith("/dev/") for path in places) else "d"  # and /dev/shm
                env[CONFINE_VARIABLE] = f"{os.getuid()}:{os.getgid()}:{int(private)}:{own}:{self.spec.home}"
                if self.spec.confinement.allowed:
                    self.proxy = Proxy(self.spec.confinement.allowed)
                forwarder = self.proxy.prefix(sys.executable) if self.proxy is not None else ()
                argv, held = sandbox.wrap(self.spec.confinement, argv, forwarder=forwarder, server=True)
            elif self.spec.isolated:  # under the limits of its calls' cold ones (their own pids cgroup aside)
                env[ISOLATE_VARIABLE] = "1"
                argv, held = warm_limits.under(self.spec.limits, isolated_argv(argv))
            else:
                argv = warm_limits.plain(self.spec.limits, argv)
            proxied = (self.proxy.inside,) if self.proxy is not None else ()
            fds = (theirs.fileno(), *(held.descriptors if held is not None else ()), *proxied)
            self._proc = self._popen(argv, stdin, env, fds)
            register(self._proc.pid)
        except OSError as exc:
            ours.close()
            self.problem = f"the warm server cannot start: {exc}"
            self._close_proxy()
            sandbox.release(held)
            held = None
            return False
        finally:
            if self.proxy is not None:
                self.proxy.launched()
            theirs.close()
            if stdin >= 0:
                os.close(stdin)
            if held is not None:  # its seccomp filter, read by bwrap at its start; its cgroups, kept for its life
                held.close_descriptors()
                self._held = held
        ours.settimeout(START_SECONDS)
        try:
            answer = ours.recv(loaded.READY_BYTES)
        except OSError:
            answer = b""
        ours.settimeout(None)
        self._keep_init()
        if answer[:1] != b"R":
            self.problem = answer[1:].decode("utf-8", "replace") if answer[:1] == b"F" else "the warm server ended at start"
            ours.close()
            self._end()
            return False
        self.loaded = loaded.taken(loaded.parse(answer), started, started_wall)
        # The server offers its first spare at once (a fork): the first call is sent to it, as every later one
        with contextlib.suppress(OSError):
            if select.select([ours], [], [], WAKE_SECONDS)[0]:
                with self._lock:
                    self._offers += [offer] if (offer := self._offer(ours)) is not None else []
        self._control = ours
        return True

    def spawn(self, call: WarmCall) -> ForkedCall | None:
        """Hand ``call`` to the server; the started call, or None when the server is gone (or closed)."""
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        try:
            forked = self._spawn(call, out_write, err_write, out_read, err_read)
        finally:
            os.close(out_write)
            os.close(err_write)
        if forked is None:
            os.close(out_read)
            os.close(err_read)
        return forked

    def _spawn(self, call: WarmCall, stdout: int, stderr: int, out_read: int, err_read: int) -> ForkedCall | None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # the call's pid comes as the credentials of the P its process says, in this namespace's numbers
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        fds = [call.stdin, stdout, stderr, theirs.fileno(), *([call.progress] if call.progress >= 0 else [])]
        request: dict[str, object] = {"env": dict(call.env), "cwd": call.cwd, "fsize": call.file_limit}
        if call.isolated is not None:
            request["limits"] = dict(call.isolated)
        if call.files:
            request["files"] = list(call.files)
        joins: list[int] = []  # a confined call's cgroups (read-only in its view): it joins them through these
        try:
            for path in call.cgroups:
                joins.append(os.open(cgroup.join_file(path), os.O_WRONLY | os.O_CLOEXEC))
        except OSError:
            for fd in joins:
                os.close(fd)
            mine.close()
            theirs.close()
            return None
        if joins:
            request["cgroups"] = len(joins)
            fds += joins
        message = marshal.dumps(request, 2)
        control = self._control
        if control is None or not self._take():
            mine.close()
            theirs.close()
            for fd in joins:
                os.close(fd)
            return None
        with self._lock:
            self._taken += 1
            refused = (len(self.proxy.refusals), self._taken, self._busy == 1) if self.proxy is not None else None
            offer = self._offer(control)
            due, alone = self._due, self._busy == 1
        if offer is None and due and alone:
            offer = self._awaited(control)
        try:
            if offer is not None:
                with self._lock:
                    self._due = True
            if not (offer is not None and _send_to_spare(control, offer, message, fds)):
                with self._lock:
                    self._due = self._due and offer is None
                socket.send_fds(control, [message], fds)  # (the server hands it to a spare: one made now if none waits)
        except OSError:
            self._done()
            mine.close()
            return None
        finally:
            theirs.close()
            for fd in joins:
                os.close(fd)
        forked = ForkedCall(self, mine, out_read, err_read, refused=refused, isolated=call.isolated is not None)
        if not forked.started():
            forked.abandon()
            return None
        return forked

    def offered(self, timeout: float = 0.0) -> bool:
        """Whether the server has offered a spare that no call took yet (waiting up to ``timeout`` seconds for one):
        the next call is sent to it directly."""
        control = self._control
        if control is None:
            return False
        with contextlib.suppress(OSError):
            if self._offers or select.select([control], [], [], timeout)[0]:
                with self._lock:
                    self._offers += [offer] if (offer := self._offer(control)) is not None else []
        return bool(self._offers)

    def _awaited(self, control: socket.socket) -> tuple[int, socket.socket] | None:
        """The spare the server offers once the last call sent to an offered one is over (it forks it then), waited for
        up to :data:`WAKE_SECONDS`: sent before it, this call would have the server fork another spare on its path (a
        call that follows another at once, as over MCP at concurrency 1). None when none came (and none is awaited
        again until a call goes to an offered spare)."""
        with contextlib.suppress(OSError):
            select.select([control], [], [], WAKE_SECONDS)
        with self._lock:
            offer = self._offer(control)
            self._due = False
        return offer

    def _offer(self, control: socket.socket) -> tuple[int, socket.socket] | None:
        """A spare the server offered, to send the call to (None: none is offered now); with the lock held. The end
        of the control socket (the server is gone) lets go of every offer: a spare whose server is gone says no status
        (and, outside a namespace, outlives it until its socket closes), so no call is sent to one: the call then
        finds the server gone, as its message to the server would."""
        while True:
            try:  # (not socket.recv_fds, which drops its flags before Python 3.13)
                data, ancillary, _, _ = control.recvmsg(32, _OFFER_SPACE, socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC)
            except OSError:  # (nothing more now: BlockingIOError)
                break
            fds = _descriptors(ancillary)
            if data[:1] == b"S" and data[1:].isdigit() and fds:
                self._offers.append((int(data[1:]), socket.socket(fileno=fds.pop(0))))
                self._due = False
            for fd in fds:
                os.close(fd)
            if not data:  # (the server sends no empty message)
                for _, spare in self._offers:
                    spare.close()
                self._offers = []
                break
        return self._offers.pop() if self._offers else None

    def _stop_taking(self) -> None:
        control, self._control = self._control, None
        with self._lock:
            offers, self._offers = self._offers, []
        for _, spare in offers:
            spare.close()  # (with the control socket's end: the spares offered see the end of theirs, and exit)
        if control is not None:
            control.close()  # the server sees the end of file: it exits once its children are reaped

    def _end(self) -> None:
        super()._end()
        self._close_proxy()
        held, self._held = self._held, None
        sandbox.release(held)  # (its processes are gone: reaped, with its PID namespace)

    def _close_proxy(self) -> None:
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            proxy.close()

    def refusals(self, since: tuple[int, int, bool]) -> tuple[str, ...]:
        """What the server's proxy refused since a call started (``since``: the refusals then, the calls handed over
        then, and whether that call was alone): a call's own notes when no other call of the server ran meanwhile,
        else none (they could be another call's)."""
        proxy = self.proxy
        with self._lock:
            alone = since[2] and self._taken == since[1]
        return tuple(proxy.refusals[since[0] :]) if proxy is not None and alone else ()


def _send_to_spare(control: socket.socket, offer: tuple[int, socket.socket], message: bytes, fds: list[int]) -> bool:
    """Send a call straight to the spare its server offered (``offer``: its pid and the socket it waits on), then say
    ``T<pid>`` to the server with the call's reply socket (``fds[3]``), on which it says the status; False when the
    spare took nothing (it ended meanwhile: the server hands the call on instead)."""
    pid, spare = offer
    try:
        socket.send_fds(spare, [message], fds)
    except OSError:
        return False
    finally:
        spare.close()
    with contextlib.suppress(OSError):  # (a server gone: the call's end of file counts as killed, as ever)
        socket.send_fds(control, [b"T%d" % pid], fds[3:4])
    return True


class _Waiter:
    """A forked call's reply socket, and the pidfd of its process that the server sent with ``P`` (-1: none)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.leader = -1

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()
        if self.leader >= 0:
            os.close(self.leader)
            self.leader = -1


class _Ready:
    """A waiter already readable: the call's status is read (a descriptor with a byte waiting), and its channel."""

    def __init__(self, channel: WaiterLike) -> None:
        self._channel = channel
        self._read, write = os.pipe()
        os.write(write, b"x")
        os.close(write)

    def fileno(self) -> int:
        return self._read

    def close(self) -> None:
        if self._read >= 0:
            os.close(self._read)
            self._read = -1
        self._channel.close()


class CallProcess:
    """A warm call's process: as much of ``subprocess.Popen`` as the process helper uses. ``P<pid>`` comes on the
    ``waiter`` channel once the process exists (``P`` alone: the pid is the sender's, in the message's credentials)
    and ``X<status>`` once it has ended (end of file without a status: the server died with the call, which counts
    as killed)."""

    def __init__(self, server: ServerProcess, waiter: WaiterLike, stdout: int, stderr: int, progress: int = -1) -> None:
        self._server = server
        self._buffer = b""
        self._counted = True
        self._out, self._err = stdout, stderr
        self.pid = 0
        self._sender = 0  # the pid in the credentials of the last message read (0: none came)
        self.progress = progress  # -1: progress goes to the pipe the call was given
        self.returncode: int | None = None
        self.reported = False  # the server said the status (not an end of file: the server died)
        self.stdout: IO[bytes] | None = None  # opened once started: until then the caller owns the descriptors
        self.stderr: IO[bytes] | None = None
        self.waiter = waiter

    def _line(self, timeout: float | None) -> bytes:
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self.waiter.fileno()], [], [], timeout)
            if not ready:
                return b""
            try:
                data = self._read()
            except BlockingIOError:
                continue
            except OSError:
                return b""
            if not data:
                return b""
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def started(self) -> bool:
        """Read the call's pid; False when the server did not start the call."""
        line = self._line(WAKE_SECONDS)
        if not line:  # slow: a server stopped by an earlier call's tool goes on (and is retired once this call is over)
            self._server.wake()
            line = self._line(REPLY_SECONDS)
        if line[:1] != b"P":
            return False
        self.pid = self._started_by(line[1:]) if line[1:] else self._sender
        if self.pid <= 0:
            return False
        if b"\n" in self._buffer:  # the status came in the same read: the channel has nothing more to say so
            self.waiter = _Ready(self.waiter)
        self.stdout = open(self._out, "rb", buffering=0)  # noqa: SIM115 - closed by the process helper
        self.stderr = open(self._err, "rb", buffering=0)  # noqa: SIM115
        return True

    def _started_by(self, said: bytes) -> int:
        """The call's pid, from what follows ``P``."""
        return int(said)

    def _read(self) -> bytes:
        return os.read(self.waiter.fileno(), 64)

    def exit_code(self, status: int) -> int:
        """``returncode`` from the status the server wrote: a wait status (negative: the signal that ended it)."""
        return os.waitstatus_to_exitcode(status)

    def wait(self) -> int:
        """The call's exit status, once the server has it."""
        if self.returncode is None:
            line = self._line(None)
            self.reported = line[:1] == b"X"
            self.returncode = self.exit_code(int(line[1:])) if self.reported else -9
            self._release()
        return self.returncode

    def wake_server(self) -> None:
        """The call is late (its timeout, or its cancellation): a server its tool stopped goes on (see
        :meth:`ServerProcess.wake`), so that the call ends as a cold one would."""
        self._server.wake()

    def give_up(self) -> None:
        """The supervisor stopped waiting for the call's end (its group was killed a second ago, no status came): wake
        the server, give it :data:`GIVE_UP_SECONDS` to say the status, and end it if it does not (the call then counts
        as killed), so that :meth:`wait` returns."""
        if self.returncode is not None or b"\n" in self._buffer:
            return
        self._server.wake()
        if not select.select([self.waiter.fileno()], [], [], GIVE_UP_SECONDS)[0]:
            self._server.kill()

    def abandon(self) -> None:
        """The server did not start the call: release its channel (the caller keeps the output descriptors)."""
        self._release()
        self.waiter.close()

    def _release(self) -> None:
        if self._counted:
            self._counted = False
            self._server._done()


class ForkedCall(CallProcess):
    """A call's process forked by a :class:`ForkServer`; its reply socket is the waiter."""

    def __init__(
        self,
        server: ForkServer,
        reply: socket.socket,
        stdout: int,
        stderr: int,
        *,
        refused: tuple[int, int, bool] | None = None,
        isolated: bool = False,
    ) -> None:
        self._channel = _Waiter(reply)
        super().__init__(server, self._channel, stdout, stderr)
        self._reply = reply
        self._fork_server = server
        self._refused = refused
        self._isolated = isolated  # its server runs in the sandbox's namespaces (the baseline, or a policy)

    @property
    def leader(self) -> int:
        """A pidfd of the call's process (-1: none), which its server (under ``sandbox: off``) sent with ``P`` before
        it could reap that process: the process helper signals the call's group through it, never by a number another
        session may have taken once the server has reaped the call (:func:`toolexec.runtimes.process_linux.signal_group`).
        Closed with the call's channel, once the process helper is done with the call."""
        return self._channel.leader

    def refusals(self) -> tuple[str, ...]:
        """What its server's network allow-list proxy refused this call (see :meth:`ForkServer.refusals`)."""
        return self._fork_server.refusals(self._refused) if self._refused is not None else ()

    def _read(self) -> bytes:
        """What came on the reply socket, noting its sender's pid (an isolated call's init says ``P`` alone)."""
        data, ancillary, _, _ = self._reply.recvmsg(64, _REPLY_SPACE)
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(value) >= 12:
                self._sender = int.from_bytes(value[:4], sys.byteorder, signed=True)
            elif level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = [int.from_bytes(value[at : at + 4], sys.byteorder) for at in range(0, len(value) - 3, 4)]
                # Only the pidfd an unconfined server sends with P is kept: an isolated server (the tool's own top
                # level, inside its sandbox) is never trusted to name the process toolexec signals
                if fds and not self._isolated and self.pid == 0 and self._channel.leader < 0 and not self._buffer:
                    self._channel.leader = fds.pop(0)
                for fd in fds:
                    os.close(fd)
        return data


_CREDENTIALS_SPACE = socket.CMSG_SPACE(12)  # struct ucred: pid, uid, gid
_REPLY_SPACE = _CREDENTIALS_SPACE + socket.CMSG_SPACE(4)  # and one descriptor: the pidfd said with P
_OFFER_SPACE = socket.CMSG_SPACE(2 * 4)  # an offer's descriptor (and room to see one more, which is closed)


def _descriptors(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors a message carried (SCM_RIGHTS)."""
    fds: list[int] = []
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(value) - len(value) % 4
            fds += [int.from_bytes(value[at : at + 4], sys.byteorder, signed=True) for at in range(0, usable, 4)]
    return fds
