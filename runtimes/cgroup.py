"""A memory cgroup per confined call, where this host lets toolexec make one.

``RLIMIT_AS`` bounds address space, not memory: a tool can map far more than it touches, and a runtime that
reserves much (Node.js) needs a large one. Where a cgroup can be made, a call whose policy declares ``memory``
also runs in a cgroup of its own whose ``memory.max`` (cgroup v2) or ``memory.limit_in_bytes`` (v1) is that
amount, swap included where the kernel accounts it; when the kernel's OOM killer ends the tool there, the
cgroup's ``oom_kill`` counter says so, and the call's reason is ``memory_limit`` whatever the tool printed.

Where: a child of toolexec's own memory cgroup (v1), or (v2) of the nearest of its own cgroup and that
cgroup's parent that hands the memory controller to its children and that this user may write. The tool
stays inside every bound toolexec itself has, but the one of toolexec's own v2 cgroup (a cgroup with
processes cannot hand controllers down). Nowhere writable: no cgroup, the rlimit alone. The cgroup is removed
when the call is over (:func:`remove_soon`); its processes are gone by then.

Every call cgroup (these and a root toolexec's pids ones) is made by :func:`make`, whose names this process's guard
(:mod:`toolexec.runtimes.process_linux`) knows before the first is made: should this process be killed (SIGKILL)
before it removed one, the guard kills what runs there and removes it. A one-shot ``toolexec run`` leaves the removal to the
guard altogether (:func:`leave_to_guard`): the kernel takes a grace period (~10 ms) to remove a cgroup, which the
run's exit would otherwise wait for.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time

from toolexec.runtimes import process_linux
from toolexec.runtimes.chores import Chores

_found: list[tuple[str, int] | None] = []  # (where calls' cgroups are made, cgroup version), once looked for


def memory_parent() -> tuple[str, int] | None:
    """Where a call's memory cgroup is made, and the cgroup version (1 or 2); None where none can be made."""
    if not _found:
        _found.append(look(_read("/proc/self/cgroup"), _read("/proc/self/mountinfo")))
    return _found[0]


def make_memory(limit: int) -> str | None:
    """A new memory cgroup limited to ``limit`` bytes (a process joins it by writing 0 to its :func:`join_file`);
    None where none can be made."""
    found = memory_parent()
    if found is None:
        return None
    parent, version = found
    try:
        path = make(parent)
    except OSError:
        return None
    try:
        if version == 2:
            _write(path, "memory.max", limit)
            _write(path, "memory.swap.max", 0, optional=True)
        else:
            _write(path, "memory.limit_in_bytes", limit)
            _write(path, "memory.memsw.limit_in_bytes", limit, optional=True)  # memory and swap together
    except OSError:
        remove(path)
        return None
    return path


def make(parent: str) -> str:
    """A new call cgroup under ``parent``, ``toolexec-PID-TOKENKEY`` (TOKEN: 16 hex digits of this process's own, KEY:
    8 random ones), which this process's guard removes should this process end before :func:`remove` does (the guard
    is told of the place before the first is made there). OSError when it cannot be made (what dead toolexec processes
    left there is removed first, once)."""
    sweep_once(parent)
    token = _token()
    process_linux.remove_cgroups_at_end(parent, token)
    path = os.path.join(parent, f"toolexec-{os.getpid()}-{token}{os.urandom(4).hex()}")
    os.mkdir(path, 0o755)
    return path


_tokens: dict[int, str] = {}  # this process's pid -> its token (a forked child has a pid, and a token, of its own)


def _token() -> str:
    pid = os.getpid()
    if pid not in _tokens:
        _tokens.clear()
        _tokens[pid] = os.urandom(8).hex()
    return _tokens[pid]


KEPT_PIDS = 16  # empty pids cgroups kept per place for the next calls (as many as calls that usually overlap)
_kept: dict[str, list[str]] = {}  # place -> this process's empty pids cgroups there, each made by make()
_kept_lock = threading.Lock()


def take_pids(parent: str, processes: int) -> str:
    """A pids cgroup under ``parent`` whose ``pids.max`` is ``processes``: one a call of this process gave back
    (:func:`give_back`), when nothing is in it or counted by it now, else a new one (:func:`make`). OSError when none
    can be made. A long-lived process so spares each call a cgroup made and removed (and the thread that removes it
    woken); what a kept one held before is checked at the take, not trusted from the give back."""
    while True:
        with _kept_lock:
            kept = _kept.get(parent)
            path = kept.pop() if kept else None
        if path is None:
            break
        try:
            if _empty(path):
                _write(path, "pids.max", processes)
                return path
        except OSError:
            pass
        remove_soon(path)
    path = make(parent)
    try:
        _write(path, "pids.max", processes)
    except BaseException:
        remove(path)
        raise
    return path


def give_back(path: str) -> None:
    """A call's pids cgroup (from :func:`take_pids`) once its call is over: kept for a later call of this process when
    nothing is in it or counted by it, else removed off the call's path (:func:`remove_soon`), as is every one of a
    process that leaves its cgroups to its guard, or past :data:`KEPT_PIDS`."""
    parent = os.path.dirname(path)
    ours = _tokens.get(os.getpid()) is not None and f"-{os.getpid()}-" in os.path.basename(path)
    if not _left_to_guard and ours:  # (whether it is empty is for the take to see)
        with _kept_lock:
            kept = _kept.setdefault(parent, [])
            if len(kept) < KEPT_PIDS:
                kept.append(path)
                _drained_at_exit()
                return
    remove_soon(path)


def _empty(path: str) -> bool:
    """Whether no process is in the pids cgroup at ``path`` nor counted by it: its ``pids.current`` reads 0 (the
    kernel charges a task to its pids cgroup from its attach, or fork, until it is reaped: a zombie counts too). Read
    by descriptor: a buffered text file costs four system calls more."""
    try:
        fd = os.open(os.path.join(path, "pids.current"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.read(fd, 64).strip() == b"0"
    except OSError:
        return False
    finally:
        os.close(fd)


def _forget_kept_after_fork() -> None:
    """In a forked child: the parent's kept cgroups are the parent's (its guard removes them; so may its next call)."""
    global _kept_lock
    _kept.clear()
    _kept_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_kept_after_fork)


def join_file(path: str) -> str:
    """The file a process writes ``0`` to, to move itself into the cgroup at ``path``: cgroup v1's ``tasks`` where there
    is one (it moves the writing thread alone, which the kernel does without the lock that makes moving a whole process
    wait an RCU grace period, ~10 ms; a single-threaded process is then wholly moved), else ``cgroup.procs``."""
    tasks = os.path.join(path, "tasks")
    return tasks if os.path.exists(tasks) else os.path.join(path, "cgroup.procs")


def join_prefix(paths: list[str], *, strict: bool) -> list[str]:
    """An argv prefix: a shell that moves itself into the cgroups at ``paths`` (:func:`join_file`), then becomes the
    rest of the argv, so that everything it starts is born there (no process is moved from outside, which waits a
    grace period). ``strict``: a cgroup it cannot join ends it (status 1) before anything runs; else it goes on."""
    join = 'echo 0 > "$1" || exit 1' if strict else '{ echo 0 > "$1"; } 2>/dev/null'
    script = f'while [ "$1" != -- ]; do {join}; shift; done; shift; exec "$@"'
    return ["/bin/sh", "-c", script, "sh", *(join_file(path) for path in paths), "--"]


def holds(path: str, pid: int) -> bool:
    """Whether process ``pid`` is in the cgroup at ``path`` (whose name is unique: ``toolexec-PID-RANDOM``)."""
    name = "/" + os.path.basename(path)
    return any(line.endswith(name) for line in _read(f"/proc/{pid}/cgroup").splitlines())


def oom_killed(path: str) -> bool:
    """Whether the kernel's OOM killer ended a process of the cgroup at ``path``."""
    for name in ("memory.events", "memory.oom_control"):  # v2, v1 (whose oom_kill line came with Linux 4.13)
        for line in _read(os.path.join(path, name)).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value) > 0
    return False


_swept: set[str] = set()  # where this process has removed what dead toolexec processes left
_LEFT_FOR = 60.0  # seconds: a cgroup younger than this may be another toolexec's (in another PID namespace) not yet joined


def sweep_once(parent: str) -> None:
    """:func:`sweep` ``parent``, the first time this process makes a cgroup there."""
    if parent not in _swept:
        _swept.add(parent)
        sweep(parent)


def sweep(parent: str) -> list[str]:
    """Remove the empty call cgroups under ``parent`` that a toolexec process which is gone left behind (one killed by
    SIGKILL mid-call never removes its own): ``toolexec-PID-…`` whose PID runs no process, made a while ago. A cgroup
    with processes in it is not removed (the kernel refuses). The paths removed."""
    removed: list[str] = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        owner = name.split("-")[1] if name.startswith("toolexec-") and name.count("-") == 2 else ""
        if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
            continue
        path = os.path.join(parent, name)
        try:
            if now - os.stat(path).st_mtime >= _LEFT_FOR:
                os.rmdir(path)
                removed.append(path)
        except OSError:
            continue
    return removed


def remove(path: str) -> None:
    """Remove a call's cgroup. Its processes are gone (with its PID namespace, or killed), but the kernel may still be
    finishing their exit (the cgroup is busy until then): it is tried again for a while; one still there then is left
    to this process's guard."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            os.rmdir(path)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return
        time.sleep(0.001)


_removals = Chores("toolexec-cgroup-remover")  # removes them, one after another, off the calls' paths
_drain_at_exit: list[bool] = []
_left_to_guard: list[bool] = []  # leave_to_guard() was called


def leave_to_guard() -> None:
    """This process makes one call and ends (a one-shot ``toolexec run``): its calls' cgroups are removed by its guard
    once this process has ended, never by this process, whose exit would wait a grace period per cgroup. One the
    guard was not told of (none could start) is removed as a long-lived process's are (:func:`remove_soon`)."""
    _left_to_guard.append(True)


def remove_soon(path: str) -> None:
    """Remove a call's cgroup off the call's path: the kernel takes a grace period to remove one (~10 ms, mostly
    waiting), which the call's result need not wait for. :func:`drain` waits until every one is removed; so does the
    end of this process. After :func:`leave_to_guard`, the guard removes it once this process has ended."""
    if _left_to_guard and process_linux.removes_cgroups_at_end(os.path.dirname(path)):
        return
    _drained_at_exit()
    _removals.add(lambda: remove(path))


def _drained_at_exit() -> None:
    if not _drain_at_exit:
        import atexit

        atexit.register(drain)
        _drain_at_exit.append(True)


def drain(timeout: float = 10.0) -> None:
    """Wait until the cgroups of calls that are over are removed, those kept for later calls too (an executor's close,
    this process's exit)."""
    with _kept_lock:
        kept = [path for paths in _kept.values() for path in paths]
        _kept.clear()
    for path in kept:
        remove_soon(path)
    _removals.drain(timeout)


def look(own: str, mountinfo: str) -> tuple[str, int] | None:
    """Where a call's memory cgroup can be made, from this process's ``/proc/self/cgroup`` and ``mountinfo`` texts."""
    mounts = _mounts(mountinfo)
    for line in own.splitlines():
        number, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        if "memory" in controllers.split(",") and "memory" in mounts:  # cgroup v1's memory hierarchy
            own = os.path.join(mounts["memory"], path.lstrip("/"))
            if os.path.isfile(os.path.join(own, "memory.limit_in_bytes")) and os.access(own, os.W_OK):
                return own, 1
        if number == "0" and controllers == "" and "" in mounts:  # the v2 hierarchy
            own = os.path.join(mounts[""], path.lstrip("/"))
            for place in (own, os.path.dirname(own)):
                if not place.startswith(mounts[""]):
                    break
                delegated = "memory" in _read(os.path.join(place, "cgroup.subtree_control")).split()
                if delegated and os.access(place, os.W_OK):
                    return place, 2
    return None


def _mounts(mountinfo: str) -> dict[str, str]:
    """Where each cgroup hierarchy is mounted: "memory" (v1's), "" (v2's)."""
    found: dict[str, str] = {}
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, kind = left.split(), right.split()
        if len(fields) < 5 or len(kind) < 3:
            continue
        point = fields[4].replace("\\040", " ")
        if kind[0] == "cgroup2":
            found.setdefault("", point)
        elif kind[0] == "cgroup" and "memory" in kind[2].split(","):
            found.setdefault("memory", point)
    return found


def _write(path: str, name: str, value: int, *, optional: bool = False) -> None:
    try:
        fd = os.open(os.path.join(path, name), os.O_WRONLY | os.O_CLOEXEC)  # (a cgroup's files: made by the kernel)
        try:
            os.write(fd, str(value).encode())
        finally:
            os.close(fd)
    except OSError:
        if not optional:
            raise


def _read(path: str) -> str:
    with contextlib.suppress(OSError), open(path) as handle:
        return handle.read()
    return ""
