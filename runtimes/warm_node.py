"""JavaScript and TypeScript tools warm: pre-warmed spares, a fresh node per call started ahead of need.

Node cannot fork, so a warm Node tool cannot be a fork of a process that imported it (as a warm Python tool is).
Its server keeps one *spare* ready instead: ``node node_bootstrap.cjs TOOL`` started ahead with the tool imported,
waiting on stdin for its one call (``TOOLEXEC_NODE_SPARE`` names its ready and progress descriptors). A call takes
the ready spare: its limits are set on the spare's node, then the call's environment, working directory and request
go down its stdin and it runs exactly as a cold call's process does (its own process, group, stdout and stderr, the
whole tree killed at the end); a new spare is started at once, off the call's path, by the server's own thread.

Under the sandbox's baseline each spare is started inside a PID namespace of its own (the baseline's bwrap), so a
call's escapees end with it and it cannot see or signal toolexec, as a cold call; its process cap is the call's
pids cgroup, which the spare's node joins itself (the thread that starts every process of the tool) on taking the
call. What differs from a cold call: the tool's module is imported before the call, so its top-level code runs
with the spare's environment and working directory; under the call's limits (its spare is started under them, and
a root toolexec's in a pids cgroup of its own: :mod:`toolexec.runtimes.warm_limits`), as a warm Python tool's.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import threading

from toolexec.runtimes import baseline, loaded, process_linux, sandbox
from toolexec.runtimes.process import read_all
from toolexec.runtimes.warm_fork import SERVER_VARIABLE, START_SECONDS, register, unregister

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Callable

    from toolexec.early import Early
    from toolexec.runtimes.warm import WarmCall, WarmSpec

SPARE_VARIABLE = "TOOLEXEC_NODE_SPARE"
PROGRESS_VARIABLE = "LLM_PROGRESS"
_LIMITS = {"memory": (resource.RLIMIT_AS, 0), "cpu": (resource.RLIMIT_CPU, 1), "processes": (resource.RLIMIT_NPROC, 0)}


class Spare:
    """One started node (once :meth:`await_ready` said so: its tool imported, unless it is a one-shot run's lazy
    spare), waiting for its call."""

    def __init__(self, proc: subprocess.Popen[bytes], progress: int, progress_in_spare: int) -> None:
        self.proc = proc
        self.problem: str | None = None
        self.node = 0  # the node's pid in this process's PID namespace (a child of bwrap's init when isolated)
        self.init: tuple[int, int | None] | None = None  # bwrap's init when isolated, and its start (bwrap does not wait)
        self.progress = progress  # the read end of its progress pipe
        self.progress_in_spare = progress_in_spare  # the write end's number there (pass_fds keeps numbers)
        self.files: list[str] | None = []  # what its import loaded (None: more than it could say)
        self.clocks = loaded.clocks()  # (monotonic, wall) ns: when it was started (set before, by start())
        self.held: sandbox.Held | None = None  # its own pids cgroup (a root toolexec's: warm_limits), given back at release

    @classmethod
    def start(cls, spec: WarmSpec) -> Spare:
        """Start a spare of ``spec`` and wait until it has imported the tool (or said why not: :attr:`problem`)."""
        clocks = loaded.clocks()
        ready_read, ready_write = os.pipe()
        progress, progress_write = os.pipe()
        info_read, info_write = os.pipe() if spec.isolated else (-1, -1)
        argv = list(spec.argv)
        held: sandbox.Held | None = None
        if spec.isolated or spec.limits:  # its import under the call's limits (runtimes/warm_limits.py): OSError where
            from toolexec.runtimes import warm_limits  # one cannot be set

            try:
                if spec.isolated:
                    binary = sandbox.bwrap()
                    assert binary is not None
                    namespaces = [*baseline._namespaces(binary), "--info-fd", str(info_write), "--", *argv]
                    argv, held = warm_limits.under(spec.limits, namespaces)
                else:  # (sandbox: off: its file size alone)
                    argv = warm_limits.plain(spec.limits, argv)
            except OSError:
                for fd in (ready_read, ready_write, progress, progress_write, info_read, info_write):
                    _close(fd)
                raise
        env = {**spec.env, SPARE_VARIABLE: f"{ready_write}:{progress_write}", SERVER_VARIABLE: spec.tool}
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=spec.cwd,
                start_new_session=True,
                close_fds=True,
                pass_fds=(ready_write, progress_write, *([info_write] if info_write >= 0 else [])),
            )
        except BaseException:
            for fd in (ready_read, progress, info_read):
                _close(fd)
            sandbox.release(held)
            raise
        finally:
            for fd in (ready_write, progress_write, info_write):
                _close(fd)
        register(proc.pid)
        spare = cls(proc, progress, progress_write)
        spare.held = held
        spare.clocks = clocks
        spare.await_ready(ready_read, info_read)
        return spare

    @classmethod
    def adopt(cls, early: Early) -> Spare:
        """The spare a one-shot run started before toolexec imported itself (:mod:`toolexec.early`)."""
        assert early.proc is not None
        spare = cls(early.proc, early.progress, early.progress_in_spare)
        ready, info = early.ready, early.info
        early.proc, early.progress, early.ready, early.info = None, -1, -1, -1
        spare.await_ready(ready, info)
        return spare

    def await_ready(self, ready: int, info: int) -> None:
        """Wait for the spare's word (see :meth:`_await`), then close the channels it came on."""
        try:
            self._await(ready, info)
        finally:
            _close(ready)
            _close(info)

    def _await(self, ready: int, info: int) -> None:
        """Wait for the spare's word: ``R`` (the tool is imported), ``F`` and why (it is not), or nothing (it died)."""
        answer = b""
        with contextlib.suppress(OSError):
            answer = loaded.read_word(ready, START_SECONDS, self.proc.pid)
        init = 0
        if info >= 0:  # bwrap's init (noted even for a spare that failed: it is reaped with it), then its child: the node
            with contextlib.suppress(OSError):
                init = baseline.info_child(info) or 0
            if init:
                self.init = (init, process_linux._stat(init).start)
        if answer[:1] != b"R":
            self.problem = answer[1:].decode("utf-8", "replace") if answer[:1] == b"F" else "the spare ended at start"
            return
        self.files = loaded.parse(answer)
        self.node = self.proc.pid
        if info >= 0:
            try:
                with open(f"/proc/{init}/task/{init}/children") as handle:
                    self.node = int(handle.read().split()[0])
            except (OSError, IndexError, ValueError):
                self.problem = "the spare's node could not be found in its PID namespace"

    def hand(self, call: WarmCall) -> None:
        """Give the spare its call: its limits first, then the call down its stdin (OSError: the spare is gone)."""
        if call.file_limit is not None:
            resource.prlimit(self.node, resource.RLIMIT_FSIZE, (call.file_limit, call.file_limit))
        limits = dict(call.isolated or {})
        for name, (kind, above) in _LIMITS.items():
            value = limits.get(name)
            if isinstance(value, int):
                with contextlib.suppress(OSError, ValueError):  # best effort, as the baseline's (never a refusal)
                    resource.prlimit(self.node, kind, (value, value + above))
        env = dict(call.env)
        if call.progress >= 0:
            env[PROGRESS_VARIABLE] = f"/dev/fd/{self.progress_in_spare}"
        message = {
            "env": env,
            "cwd": call.cwd or os.getcwd(),
            "cgroup": limits.get("cgroup"),
            "pidMax": limits.get("pid_max"),
            "progress": call.progress >= 0,
            "request": json.loads(read_all(call.stdin) or b"{}"),
        }
        assert self.proc.stdin is not None
        stdin, self.proc.stdin = self.proc.stdin, None
        try:
            stdin.write(json.dumps(message).encode("utf-8", "surrogateescape"))
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def discard(self) -> None:
        """End a spare that will take no call (its stdin closes: it exits without running anything) and reap it."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            self.proc.stdin = None
        process_linux.await_end(self.proc.pid, 5.0)
        with contextlib.suppress(ProcessLookupError):  # (and what its import started, which a cold call's end ends)
            os.killpg(self.proc.pid, 9)
        self.proc.wait()
        self.release()

    def release(self) -> None:
        """Close what this process holds of the spare (its pipes) once its process is reaped."""
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        _close(self.progress)
        self.progress = -1
        unregister(self.proc.pid)
        held, self.held = self.held, None
        sandbox.release(held)  # (its node is reaped: what it left in its cgroup ended with its PID namespace)
        init, self.init = self.init, None
        if init is not None:  # re-parented here should this process be a subreaper now (calls in flight): reaped
            process_linux.reap_orphan(*init)


def _close(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


class NodeSpares:
    """One tool's warm server: a spare kept ready (see the module's docstring); thread-safe.

    Every spare is started by the server's own thread, which lives until the server is closed and its calls are
    over: bwrap's ``--die-with-parent`` follows the thread that started it."""

    def __init__(self, spec: WarmSpec) -> None:
        self.spec = spec
        self.problem: str | None = None
        self.loaded: loaded.Loaded | None = None  # what the first spare's import loaded (every later one's, unchanged)
        self._lock = threading.Condition()
        self._ready: Spare | None = None
        self._busy = 0
        self._closed = False
        self._failed: str | None = None  # why the last spare did not start (the tool no longer loads): calls run cold
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start the server's thread and wait for its first spare; False (and :attr:`problem`) when it did not start."""
        self._thread = threading.Thread(target=self._keep, name=f"toolexec-node-spares-{self.spec.tool}", daemon=True)
        self._thread.start()
        with self._lock:
            self._lock.wait_for(lambda: self._ready is not None or self._failed is not None)
            if self._ready is None:
                self.problem = self._failed
                self._closed = True
                self._lock.notify_all()
        if self.problem is not None:
            self._thread.join()
            return False
        return True

    def spawn(self, call: WarmCall) -> SpareCall | None:
        """Give ``call`` the ready spare (waiting for it while it starts); None when there is none (the server is closed,
        or the tool no longer loads): the call runs cold."""
        with self._lock:
            self._lock.wait_for(lambda: self._ready is not None or self._failed is not None or self._closed)
            spare, self._ready = self._ready, None
            if spare is None or self._closed:
                if spare is not None:
                    self._ready = spare
                return None
            self._busy += 1
            self._lock.notify_all()  # the thread starts the next spare
        try:
            spare.hand(call)
        except OSError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(spare.proc.pid, 9)
            spare.discard()
            self._done()
            return None
        return SpareCall(spare, call.progress >= 0, isolated=self.spec.isolated, done=self._done)

    def busy(self) -> int:
        """Calls handed to a spare and not yet waited for."""
        with self._lock:
            return self._busy

    def alive(self) -> bool:
        """Whether spares still start (a tool that no longer loads has none: the pool starts a new server)."""
        with self._lock:
            return not self._closed and self._failed is None

    def close(self) -> None:
        """Take no more calls: the ready spare ends; the thread ends once the calls in flight are over."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread() and self.busy() == 0:
            thread.join()

    def _done(self) -> None:
        with self._lock:
            self._busy -= 1
            self._lock.notify_all()

    def _keep(self) -> None:
        """The server's thread: a spare ready whenever none is; at the close, the ready one discarded, then wait for
        the calls in flight (their bwrap dies with this thread)."""
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._closed or self._ready is None)
                if self._closed:
                    spare, self._ready = self._ready, None
                    break
            try:
                spare = Spare.start(self.spec)
            except OSError as exc:
                with self._lock:
                    self._failed = f"the spare cannot start: {exc}"
                    self._lock.notify_all()
                break
            if spare.problem is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(spare.proc.pid, 9)
                spare.discard()
                with self._lock:
                    self._failed = spare.problem
                    self._lock.notify_all()
                spare = None
                break
            with self._lock:
                if self.loaded is None:  # the server's record: its later spares load the same files while they hold
                    self.loaded = loaded.taken(spare.files, *spare.clocks)
                self._ready = spare
                self._lock.notify_all()
            spare = None
        if spare is not None:
            spare.discard()
        with self._lock:
            self._lock.wait_for(lambda: self._busy == 0)
            self._closed = True
            self._lock.notify_all()


class SpareCall:
    """A call's process: the spare that took it, as much of ``subprocess.Popen`` as the process helper uses."""

    def __init__(self, spare: Spare, progress: bool, *, isolated: bool, done: Callable[[], None] | None = None) -> None:
        self._spare, self._isolated, self._done = spare, isolated, done
        self.pid = spare.proc.pid
        self.returncode: int | None = None
        self.stdout = spare.proc.stdout
        self.stderr = spare.proc.stderr
        spare.proc.stdout = spare.proc.stderr = None  # the process helper closes them
        self.progress = spare.progress if progress else -1
        if not progress:
            _close(spare.progress)
        spare.progress = -1  # the process helper closes it
        unregister(self.pid)  # a call's process now, no longer a server's
        self.waiter = process_linux.ExitWaiter(spare.proc)

    def wait(self) -> int:
        """The call's exit status; under the baseline, bwrap's 128 + N for a tool killed by signal N is that signal."""
        if self.returncode is None:
            code = self._spare.proc.wait()
            if self._isolated and 128 < code <= 128 + 64:
                code = 128 - code
            self.returncode = code
            self._spare.release()
            if self._done is not None:
                self._done()
        return self.returncode


def adopt_early(early: Early, call: WarmCall, isolated: bool) -> SpareCall | None:
    """Hand ``call`` to the spare a one-shot run started early; None when it cannot take it (it died, or its node
    could not be found): the caller starts the call cold."""
    spare = Spare.adopt(early)
    if spare.problem is None:
        try:
            spare.hand(call)
            return SpareCall(spare, call.progress >= 0, isolated=isolated)
        except OSError:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(spare.proc.pid, 9)
    spare.discard()
    return None
