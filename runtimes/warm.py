"""Warm pools: a tool's interpreter started once, each call a fresh process forked from it.

The interface is language-neutral. A runtime that can run a tool warm says how in :attr:`Prepared.warm
<toolexec.runtimes.base.Prepared.warm>` (a :class:`WarmSpec`); the engine hands a :class:`WarmStart` (the pool plus
that spec) to the process helper in :attr:`Launch.warm <toolexec.runtimes.process.Launch.warm>`, and
:func:`~toolexec.runtimes.process.run_process` asks it for a :class:`WarmProcess` in place of a spawned one: the same
supervision follows (timeouts, cancellation, the group's TERM→KILL, the escapee search, output caps, progress).
Nothing above the process helper knows which mechanism ran.

A :class:`WarmPool` keeps at most ``max_servers`` warm servers, one per :attr:`WarmSpec.key` (the tool, the digest
of the source text it loaded, its interpreter, the environment it started with): a tool whose source or config
changed gets a new key, so its next call runs the new code (the old server is retired once its calls are over).
A server idle for ``idle`` seconds is stopped. :meth:`WarmPool.close` stops them all.

Each language provides a :class:`WarmServer` class, found by :attr:`WarmSpec.kind` in :data:`SERVERS` (its module is
imported on first use): ``python-fork`` is :mod:`toolexec.runtimes.warm_fork` (a fork server per tool, which
receives each call's descriptors), ``bash-fork`` :mod:`toolexec.runtimes.warm_bash` (a bash that sourced the tool,
whose calls' channels are named FIFOs; under the sandbox's baseline, spares: each a bash that sourced the tool ahead
of its call, alone in a PID namespace of its own), ``node-spare`` :mod:`toolexec.runtimes.warm_node` (a node started
ahead of each call with the tool imported: a fresh process per call).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from importlib import import_module

from toolexec.recordtype import field, record, replace
from toolexec.runtimes.sandbox import places_state

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import IO, Protocol

    from toolexec.runtimes.loaded import Loaded
    from toolexec.runtimes.sandbox import Confinement
else:
    Protocol = object

# kind → "module:Class" of its server (imported when a tool of that kind first runs warm).
SERVERS: dict[str, str] = {
    "python-fork": "toolexec.runtimes.warm_fork:ForkServer",
    "bash-fork": "toolexec.runtimes.warm_bash:server",
    "node-spare": "toolexec.runtimes.warm_node:NodeSpares",
}
# The kinds whose server can give each call a PID namespace of its own (the sandbox's baseline): a bash's spares and a
# node spare are started in one of their own.
ISOLATING: frozenset[str] = frozenset({"python-fork", "bash-fork", "node-spare"})
# The isolating kinds whose call's status comes only once its PID namespace is gone (the server reaped its init, or
# the init said it with no child left): nothing of such a call is left to search for, and its files may be kept.
SEALED: frozenset[str] = frozenset({"python-fork", "bash-fork"})
# The kinds whose server can live inside a tool's own sandbox (a declared policy, or ``sandbox: strict``'s) and give
# each call what a cold confined call gets (:mod:`toolexec.runtimes._python_confined`).
CONFINING: frozenset[str] = frozenset({"python-fork"})
# The kinds whose every call's process sets its own CPU limit (a process's CPU time is its own: a forked child's starts
# at zero) and meets it where the server's load alone would have (:mod:`toolexec.runtimes.warm_limits`): one server
# serves every call of a tool whose CPU bound is at most its own, so calls whose timeouts differ (the baseline's CPU
# seconds come from the timeout) share it. A call with a higher bound starts a server under that one.
CPU_PER_CALL: frozenset[str] = frozenset({"python-fork"})
DEFAULT_MAX_SERVERS = 8
DEFAULT_IDLE_SECONDS = 300.0


@record
class WarmSpec:
    """How a runtime starts one tool warm (what :meth:`Runtime.prepare` adds for a call that may run warm)."""

    kind: str  # the server class, in SERVERS
    tool: str  # the tool's name: a tool with a new key retires its old server
    argv: Sequence[str]  # the server program: the interpreter and its warm bootstrap
    # What the server reads on its stdin when it starts (e.g. the source text it loads).
    payload: bytes = b""
    # The environment the server starts in (no per-call variable: those come with each call).
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    # A digest of everything the server's loaded state depends on (source text, interpreter, env): equal keys share it.
    key: str = ""
    # The server runs inside the sandbox baseline's namespaces and gives each call a PID namespace of its own
    # (:mod:`toolexec.runtimes.warm_fork`); its key says so.
    isolated: bool = False
    # The server's sandbox (a declared policy's, or strict's: :func:`confined_spec`), whose own files are ``home``, the
    # directory its calls' files are made in; None: the baseline's, or none.
    confinement: Confinement | None = None
    home: str = ""
    # The server's limits, its calls' (:func:`server_limits`; under ``sandbox: off`` their file size alone): its load
    # runs under them (runtimes/warm_limits.py).
    limits: Mapping[str, int] = field(default_factory=dict)


@record
class WarmCall:
    """One call handed to a warm server: what a cold call's process is started with. The server makes the call's
    stdout and stderr channels itself (pipes, or FIFOs for a server that cannot receive descriptors)."""

    stdin: int  # the call's request (a nameless file, read from its start)
    env: Mapping[str, str]
    cwd: str | None
    file_limit: int | None = None  # RLIMIT_FSIZE (soft and hard) for the call's process
    progress: int = -1  # write end of the progress pipe (-1: none); the call sees it as LLM_PROGRESS
    # Under the sandbox's baseline: the call runs in a PID namespace of its own, with these limits ("memory", "cpu",
    # "processes", "cgroup": its pids cgroup's directory). None: as toolexec's own child would.
    isolated: Mapping[str, int | str] | None = None
    # A confined call's own files (in its server's home), the only ones of that directory it sees; and the cgroups
    # its process joins before it goes on, through descriptors toolexec opens for it (its memory cgroup, a root
    # toolexec's pids cgroup: read-only in its view).
    files: Sequence[str] = ()
    cgroups: Sequence[str] = ()


class WarmProcess(Protocol):
    """What the process helper supervises: the call's process, as much of ``subprocess.Popen`` as it uses.

    Its ``pid`` leads a process group of its own; ``waiter`` is readable once the process has ended (then
    :meth:`wait` does not block); ``stdout``/``stderr`` are the read ends of its output channels; ``progress`` the
    read end of a progress channel of the server's own (-1: the call writes to the pipe :class:`WarmCall` gave)."""

    pid: int
    returncode: int | None
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None
    progress: int

    @property
    def waiter(self) -> WaiterLike: ...

    def wait(self) -> int: ...


class WaiterLike(Protocol):
    """A descriptor readable once the call's process has ended."""

    def fileno(self) -> int: ...

    def close(self) -> None: ...


class WarmServer(Protocol):
    """One warm process of one tool; made by ``Class(spec)``, started by :meth:`start`."""

    problem: str | None  # why start() said False
    # The files it loaded besides the tool's source (:mod:`toolexec.runtimes.loaded`), once started; None: none to
    # look at (it loads nothing ahead of a call).
    loaded: Loaded | None

    def start(self) -> bool:
        """Start it; False (and :attr:`problem`) when the tool cannot run warm (it failed to load, or started threads):
        it then runs cold."""
        ...

    def spawn(self, call: WarmCall) -> WarmProcess | None:
        """Start ``call``; None when this server cannot (it is gone, or the call needs what it cannot give)."""
        ...

    def busy(self) -> int:
        """Calls started and not yet waited for."""
        ...

    def alive(self) -> bool:
        """Whether the server's process still runs."""
        ...

    def close(self) -> None:
        """Stop taking calls; the process ends once its calls are over (and is reaped)."""
        ...


@record(frozen=False)
class _Entry:
    server: WarmServer | None  # None: this key cannot run warm (its start failed): calls run cold
    used: float
    tool: str
    problem: str | None = None  # why it cannot
    starting: bool = False  # its server is being started (outside the pool's lock)
    cpu: int | None = None  # the CPU seconds its server runs under (None: none); see :data:`CPU_PER_CALL`


_pools: weakref.WeakSet[WarmPool] = weakref.WeakSet()


def live_pools() -> list[WarmPool]:
    """The pools of this process that are not closed (a test closes what the code under test left open)."""
    return [pool for pool in list(_pools) if not pool.closed]


class WarmPool:
    """The warm servers of one executor or server: at most ``max_servers``, each stopped after ``idle`` seconds unused.

    The idle watch is a thread that runs only while servers do; a pool nobody closes ends its servers once they are
    idle that long (and when the process exits: each server ends when its socket closes)."""

    def __init__(self, *, max_servers: int = DEFAULT_MAX_SERVERS, idle: float = DEFAULT_IDLE_SECONDS) -> None:
        self.max_servers = max_servers
        self.idle = idle
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Condition()
        self._closed = False
        self._starting = 0  # servers being started
        self._reaper: threading.Thread | None = None
        self._homes: str | None = None  # the directory of the confined servers' calls' directories (made on first use)
        self._home_of: dict[str, str] = {}  # tool -> its calls' directory, made
        _pools.add(self)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def server(self, spec: WarmSpec) -> WarmServer | None:
        """The running server for ``spec`` (started now if need be), or None: the call runs cold.

        A server starts outside the pool's lock (a tool may take seconds to load): calls of other tools go on; calls
        of the same tool wait for that start."""
        with self._lock:
            if self._closed:
                return None
            while (found := self._entries.get(spec.key)) is not None:
                self._lock.wait_for(lambda found=found: not found.starting)  # type: ignore[misc]
                if self._closed:
                    return None
                if self._entries.get(spec.key) is not found:  # retired, or replaced, meanwhile: looked up again
                    continue
                if _serves(found.cpu, cpu_bound(spec)):
                    found.used = time.monotonic()
                    return found.server
                break
            for key, other in list(self._entries.items()):  # the tool changed (or needs a higher CPU bound): its old server goes
                if other.tool == spec.tool:
                    self._retire(key)
            while len(self._entries) >= self.max_servers:
                settled = [key for key, other in self._entries.items() if not other.starting]
                if not settled:
                    break
                self._retire(min(settled, key=lambda k: self._entries[k].used))
            server = _make(spec)
            entry = _Entry(server=None, used=time.monotonic(), tool=spec.tool, starting=True, cpu=cpu_bound(spec))
            self._entries[spec.key] = entry
            self._starting += 1
        started = False
        try:
            started = server.start()
        finally:
            with self._lock:
                entry.starting = False
                self._starting -= 1
                kept = started and self._entries.get(spec.key) is entry  # not retired (or closed) meanwhile
                if kept:
                    entry.server = server
                    self._ensure_reaper()
                elif not started:
                    entry.problem = server.problem or "the warm server did not start"
                self._lock.notify_all()
            if not kept:
                server.close()
        return server if kept else None

    def home(self, tool: str) -> str | None:
        """The directory the files of ``tool``'s confined warm calls are made in (0700, private to this pool, removed
        at :meth:`close`, or by the guard should this process die): the only one of toolexec's that its servers bind,
        and each call of them sees only its own files there. None once the pool is closed (its calls run cold)."""
        import hashlib

        from toolexec.runtimes.private import guarded, private_path

        with self._lock:
            if self._closed:
                return None
            known = self._home_of.get(tool)
            if known is not None:
                return known
            if self._homes is None:
                self._homes = private_path("toolexec-warm-", "", directory=True)
                guarded(self._homes, True)
            path = os.path.join(self._homes, hashlib.sha256(tool.encode("utf-8", "surrogateescape")).hexdigest()[:16])
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)
            self._home_of[tool] = path
        return path

    def refused(self, spec: WarmSpec) -> str | None:
        """Why the tool of ``spec`` runs cold (it failed to load in its server, or started threads); None: it is not
        known to."""
        with self._lock:
            entry = self._entries.get(spec.key)
            return entry.problem if entry is not None and entry.server is None else None

    def discard(self, spec: WarmSpec, server: WarmServer) -> None:
        """``server`` failed a call's start (it died), or holds files changed since it loaded them: forget it (it ends
        once its calls are over), so that the next call starts a new one."""
        with self._lock:
            entry = self._entries.get(spec.key)
            if entry is not None and entry.server is server:
                self._retire(spec.key)

    def __len__(self) -> int:
        """Running servers (tools whose start failed are not counted)."""
        with self._lock:
            return sum(1 for entry in self._entries.values() if entry.server is not None)

    def close(self) -> None:
        """Stop every server (each ends once its calls are over); later calls run cold. Closing twice is harmless."""
        with self._lock:
            self._closed = True
            for key in list(self._entries):
                self._retire(key)
            self._lock.notify_all()
            self._lock.wait_for(lambda: self._starting == 0)  # each start in progress closes its own server
            reaper, self._reaper = self._reaper, None
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join()
        homes, self._homes = self._homes, None
        self._home_of.clear()
        if homes is not None:  # (a call still running has its files open: removed all the same, as at its end)
            import shutil

            from toolexec.runtimes.private import guarded

            shutil.rmtree(homes, ignore_errors=True)
            guarded(homes, False)

    def _retire(self, key: str) -> None:
        entry = self._entries.pop(key)
        if entry.server is not None:
            entry.server.close()

    def _ensure_reaper(self) -> None:
        """Start the idle watch (under the lock), unless it runs."""
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap_idle, name="toolexec-warm-idle", daemon=True)
            self._reaper.start()

    def _reap_idle(self) -> None:
        """Retire the servers idle for ``idle`` seconds; end once there is none left (server() starts it again)."""
        with self._lock:
            while not self._closed and self._entries:
                now = time.monotonic()
                for key, entry in list(self._entries.items()):
                    busy = entry.server.busy() if entry.server is not None else 0
                    if busy or entry.starting:
                        entry.used = now  # a long call keeps its server: idle counts from when it ends
                    elif now - entry.used >= self.idle:
                        self._retire(key)
                wakes = [entry.used + self.idle for entry in self._entries.values()]
                if wakes:
                    self._lock.wait(max(0.05, min(wakes) - now))
            if self._reaper is threading.current_thread():
                self._reaper = None


@record
class WarmStart:
    """What the engine hands to the process helper: the pool and how to start this tool in it."""

    pool: WarmPool
    spec: WarmSpec

    @property
    def isolates(self) -> bool:
        """Whether this tool's server can give each call a PID namespace of its own (the sandbox's baseline)."""
        return self.spec.kind in ISOLATING

    @property
    def confines(self) -> bool:
        """Whether this tool's server can live inside its sandbox (:data:`CONFINING`)."""
        return self.spec.kind in CONFINING

    @property
    def sealed(self) -> bool:
        """Whether an isolated call's status comes only once its PID namespace is gone (:data:`SEALED`)."""
        return self.spec.kind in SEALED

    def spec_for(self, call: WarmCall) -> WarmSpec:
        """The server ``call`` runs in: an isolated call's is a server of its own, inside the baseline's namespaces."""
        if call.isolated is None:  # (sandbox: off) its load under the call's one limit, its file size
            if call.file_limit is None:
                return self.spec
            return _limited(self.spec, False, {"file_size": call.file_limit})
        return _limited(self.spec, True, server_limits(call))  # a server per set (a tool's calls have one)

    def spawn(self, call: WarmCall, spec: WarmSpec | None = None) -> WarmProcess | None:
        """Start ``call`` in the tool's warm server (``spec``'s when given: :func:`confined_spec`); None: run it cold
        (the tool cannot run warm, or the pool is closed). A server whose loaded files changed since it loaded them is
        replaced first: the call runs the code on disk as the call starts (see :mod:`toolexec.runtimes.loaded`)."""
        began = time.monotonic_ns()
        spec = spec if spec is not None else self.spec_for(call)
        for _ in range(3):  # (a server another call started meanwhile may be stale too; the third: run cold)
            server = self.pool.server(spec)
            if server is None or server.loaded is None or server.loaded.serves(began):
                break
            self.pool.discard(spec, server)
        else:
            return None
        if server is None:
            return None
        proc = server.spawn(call)
        if proc is None and not server.alive():  # the server died since its last call: one new start, else cold
            self.pool.discard(spec, server)
            server = self.pool.server(spec)
            proc = server.spawn(call) if server is not None else None
        return proc


LIMITS = ("memory", "cpu", "processes", "file_size")  # what a server's load runs under (Confinement's fields)


def cpu_bound(spec: WarmSpec) -> int | None:
    """The CPU seconds ``spec``'s server (and its load) runs under: its sandbox's, or its calls' (None: no bound)."""
    if spec.confinement is not None:
        return spec.confinement.cpu
    found = spec.limits.get("cpu")
    return found if isinstance(found, int) else None


def _serves(server: int | None, call: int | None) -> bool:
    """Whether a server under ``server`` CPU seconds may serve a call bound by ``call`` (None: no bound): its process
    can lower the limit it inherits, never raise it."""
    return server is None or (call is not None and call <= server)


def server_limits(call: WarmCall) -> dict[str, int]:
    """The limits an isolated (baseline) call runs under, which its server's load runs under too: its memory, CPU
    seconds and processes (:attr:`WarmCall.isolated`, but its own pids cgroup) and its file size bound."""
    isolated = call.isolated or {}
    found = {name: value for name in LIMITS[:3] if isinstance(value := isolated.get(name), int)}
    if call.file_limit is not None:
        found["file_size"] = call.file_limit
    return found


def _limited(spec: WarmSpec, isolated: bool, limits: dict[str, int]) -> WarmSpec:
    """``spec`` whose server loads under ``limits`` (isolated: in the baseline's namespaces), keyed by them (but the
    CPU seconds where each call sets its own: :data:`CPU_PER_CALL`); made once for the same inputs (a call's path pays
    a dictionary lookup)."""
    memo = (spec.key, spec.tool, spec.cwd, spec.kind, isolated, tuple(sorted(limits.items())))
    found = _limited_specs.get(memo)
    if found is not None:
        return found
    keyed = [(name, value) for name, value in memo[-1] if name != "cpu" or spec.kind not in CPU_PER_CALL]
    key = ":".join([f"{spec.key}:isolated" if isolated else spec.key, *(f"{name}={value}" for name, value in keyed)])
    made = replace(spec, isolated=isolated or spec.isolated, limits=limits, key=key)
    if len(_limited_specs) >= 64:
        with contextlib.suppress(StopIteration, RuntimeError, KeyError):  # (another thread's call changed it meanwhile)
            _limited_specs.pop(next(iter(_limited_specs)))
    _limited_specs[memo] = made
    return made


_limited_specs: dict[tuple[object, ...], WarmSpec] = {}


# Variables of one call (or of the process helper's): never in a server's environment, which outlives the call.
_PER_CALL_PREFIXES = ("LLM_", "TOOLEXEC_")
_KEPT = ("LLM_ROOT_DIR", "LLM_TOOL_NAME", "LLM_TOOL_CACHE_DIR", "LLM_AGENT_VAR_")
_PER_CALL = frozenset({"TRACEPARENT", "TRACESTATE", "BAGGAGE"})


def server_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment a warm server starts in: the call's without what belongs to this one call (each call's own
    process gets the call's whole environment)."""
    return {
        name: value
        for name, value in env.items()
        if name not in _PER_CALL and (not name.startswith(_PER_CALL_PREFIXES) or name.startswith(_KEPT))
    }


def confined_spec(spec: WarmSpec, confinement: Confinement, env: Mapping[str, str], home: str) -> WarmSpec:
    """The server of ``spec``'s tool inside the sandbox of ``confinement`` (a call's, under a declared policy or
    strict), whose calls' files are made in ``home``: started in the environment the confined call has (``env``,
    without what is the call's own), and keyed by everything its view depends on: the policy with every place it names
    (the working directory of ``writes: cwd`` among them), the limits, the hidden paths, whether each place is there now (and a
    directory), and ``home``. Made once for the same inputs (a call's own files are not among them). The server's load
    runs under the call's limits (:mod:`toolexec.runtimes.warm_limits`): its rlimits and, for root, its pids cgroup."""
    server_env = server_environment(env)
    shape = tuple(getattr(confinement, name) for name in _VIEWED)
    states = places_state(confinement)
    memo = (spec.key, shape, home, tuple(server_env.items()), states)
    found = _confined.get(memo)
    if found is not None:
        return found
    import hashlib

    server = replace(confinement, files=(home,))
    digest = hashlib.sha256(spec.key.encode())
    keyed = tuple(value for name, value in zip(_VIEWED, shape, strict=True) if name != "cpu" or spec.kind not in CPU_PER_CALL)
    digest.update(repr((keyed, *memo[2:])).encode("utf-8", "surrogateescape"))
    made = replace(
        spec, isolated=True, env=server_env, confinement=server, home=home, key=f"{spec.key}:confined:{digest.hexdigest()}"
    )
    if len(_confined) >= 64:
        with contextlib.suppress(StopIteration, RuntimeError, KeyError):  # (another thread's call changed it meanwhile)
            _confined.pop(next(iter(_confined)))
    _confined[memo] = made
    return made


# What a confined server's view and bounds are made of (its calls' files are each call's).
_VIEWED = ("baseline", "network", "allowed", "visible", "writable", "protected", "hidden", "revealed", *LIMITS)
_confined: dict[tuple[object, ...], WarmSpec] = {}


def spec_key(argv: Sequence[str], payload: bytes, env: Mapping[str, str]) -> str:
    """The digest that tells warm servers apart: their program, what they loaded and the environment they load in."""
    import hashlib

    digest = hashlib.sha256()
    for part in (*argv, "", *(f"{name}={value}" for name, value in sorted(env.items()))):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(payload)
    return digest.hexdigest()


def _make(spec: WarmSpec) -> WarmServer:
    module, _, name = SERVERS[spec.kind].partition(":")
    factory: Callable[[WarmSpec], WarmServer] = getattr(import_module(module), name)
    return factory(spec)
