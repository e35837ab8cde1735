"""The baseline every call gets in every sandbox mode but ``off``: its own PID namespace, and limits.

A call that declares no policy (under ``sandbox: declared``) keeps its whole filesystem, network and
environment, and still runs as ``bwrap --unshare-pid … -- prlimit … -- TOOL``: a PID namespace of its
own (and a user namespace when toolexec is not root, which is what lets an ordinary user make one), so
that no process it starts outlives the call (the kernel ends them all when its main process ends,
``setsid env -i`` escapees included) and none can see or signal toolexec (``kill -STOP $PPID`` reaches
the namespace's init, which ignores it); and limits an ordinary tool never meets: CPU seconds a tool
cannot use up before its timeout fires, the largest file ``max_kept_bytes``, a process cap that stops
a fork bomb. Where no namespace can be made (no bwrap, user namespaces disabled) the call runs as
before, under the limits alone: the baseline is never a reason to refuse a call.

A call under a declared policy (:mod:`toolexec.runtimes.sandbox`) gets the same default limits for what
it does not declare.
"""

from __future__ import annotations

import math
import os

from toolexec.recordtype import replace
from toolexec.runtimes import sandbox
from toolexec.runtimes.sandbox import Confinement, Held

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


# The process cap no ordinary tool meets (threads count too: a JVM or a browser has a few hundred at most); a fork
# bomb stops there.
PROCESSES = 1024
# Where the kernel keeps ``kernel.pid_max`` per PID namespace (Linux 6.14 on), a root call's cap is its namespace's
# pid_max, written inside it before the tool starts: no pids cgroup to make, join and remove (the removal, left to the
# guard by a one-shot run, cost it a shell, cat and rmdir, ~5 ms of CPU). The kernel hands out a namespace's PIDs from
# 1 up to pid_max - 1 and, once they wrap, from RESERVED_PIDS (300) up: pid_max is PROCESSES + RESERVED_PIDS, so that
# PROCESSES tasks (threads count, as in a pids cgroup) may always run, and a fork bomb stops below PROCESSES + 300.
RESERVED_PIDS = 300
PID_MAX = "/proc/sys/kernel/pid_max"
_usable: dict[str, bool] = {}  # bwrap path -> whether it makes the baseline's namespaces on this host


def confinement(timeout: float | None) -> Confinement:
    """What a call gets that runs under no policy, in every mode but ``off``: its own PID namespace where the kernel
    allows, and the default limits; never refused. (Made here, not by :mod:`toolexec.confine`, whose import a
    one-shot run of such a call does without.)"""
    return Confinement(baseline=True, cpu=cpu_seconds(timeout), processes=processes())


def cpu_seconds(timeout: float | None) -> int | None:
    """The CPU seconds a call's processes may each use: more than they can use before ``timeout`` (on every CPU of
    this machine at once), so only a call whose timeout cannot fire meets it. None without a timeout."""
    if not timeout or timeout <= 0:
        return None
    return math.ceil(timeout) * cpus() + 1


def cpus() -> int:
    """The CPUs of this machine (read once: it costs a call ~40 us, reading sysfs)."""
    if not _cpus:
        _cpus.append(os.cpu_count() or 1)
    return _cpus[0]


_cpus: list[int] = []


def processes() -> int | None:
    """The default process cap, or None where it cannot be applied to one call alone: the kernel exempts root from
    ``RLIMIT_NPROC``, and a root toolexec caps a call only through a pids cgroup, where one can be made."""
    return PROCESSES if os.geteuid() != 0 or sandbox._pids_root() is not None else None


def pid_max_capped() -> bool:
    """Whether a root call's process cap is its PID namespace's ``kernel.pid_max`` (:data:`PROCESSES`): root, on a
    kernel that keeps pid_max per PID namespace (Linux 6.14 on). Never on an older one, where the same write inside a
    namespace sets the whole host's pid_max: the kernel's version decides, never a try. ``TOOLEXEC_PIDS_CGROUP=1`` keeps
    the pids cgroup of older kernels (its exact ``pids.max``; the tests of that path)."""
    if os.geteuid() != 0 or os.environ.get("TOOLEXEC_PIDS_CGROUP") == "1":
        return False
    if not _pid_max_capped:
        _pid_max_capped.append(kernel_at_least(os.uname().release, (6, 14)))
    return _pid_max_capped[0]


_pid_max_capped: list[bool] = []


def kernel_at_least(release: str, wanted: tuple[int, int]) -> bool:
    """Whether the kernel ``release`` (``uname -r``: ``6.18.44-fc``) is ``wanted`` (major, minor) or later; False for a
    release that does not start with two numbers."""
    parts = release.split(".", 2)
    digits = [part[: len(part) - len(part.lstrip("0123456789"))] for part in parts[:2]]
    if len(digits) < 2 or not all(digits):
        return False
    return (int(digits[0]), int(digits[1])) >= wanted


def pid_max(processes: int) -> int:
    """The pid_max of a namespace whose cap is ``processes`` (see :data:`RESERVED_PIDS`)."""
    return processes + RESERVED_PIDS


def pid_max_prefix(processes: int) -> list[str]:
    """An argv prefix run inside the call's PID namespace: a shell that sets its pid_max (best effort, as the baseline's
    cgroup was), then becomes the rest of the argv."""
    return ["/bin/sh", "-c", f'{{ echo {pid_max(processes)} >{PID_MAX}; }} 2>/dev/null; exec "$@"', "sh"]


def usable() -> bool:
    """Whether this host makes the baseline's namespaces (bwrap runs, and may make a PID namespace): tried once per
    bwrap, boot and setting (a file in toolexec's cache says it worked, so a one-shot run does not try again)."""
    binary = sandbox.bwrap()
    if binary is None:
        return False
    if binary not in _usable:
        seen = _seen(binary)
        if seen is not None and os.path.exists(seen):
            _usable[binary] = True
        else:
            _usable[binary] = _try(binary)
            if _usable[binary] and seen is not None:
                import contextlib

                with contextlib.suppress(OSError):
                    os.makedirs(os.path.dirname(seen), mode=0o700, exist_ok=True)
                    open(seen, "w").close()  # an empty file: its name is the record
    return _usable[binary]


# What decides whether a namespace can be made, besides the binary: read into the name of the record of a success.
_SETTINGS = (
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/user/max_pid_namespaces",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
)


def _seen(binary: str) -> str | None:
    """Where a success of ``binary`` on this boot, with these settings and this user, is recorded (None: nowhere)."""
    from toolexec.paths import user_cache_dir
    from toolexec.serve_client import fnv1a64  # (a one-shot run has it: no zlib or hashlib to load, ~0.2 ms)

    try:
        status = os.stat(binary)
    except OSError:
        return None
    key = [binary, str(status.st_mtime_ns), str(status.st_size), str(os.geteuid())]
    for setting in _SETTINGS:
        try:
            with open(setting) as handle:
                key.append(handle.read().strip())
        except OSError:
            key.append("-")
    data = "\0".join(key).encode("utf-8", "surrogateescape")
    digest = f"{fnv1a64(data):016x}"
    return os.path.join(str(user_cache_dir()), "sandbox", f"namespaces-{digest}")


def _try(binary: str, *program: str) -> bool:
    """Whether ``program`` (``/bin/true`` when none) succeeds inside the baseline's namespaces made by ``binary``."""
    import subprocess

    try:
        done = subprocess.run(
            # --as-pid-1: bwrap waits for its child, which it does not for an init of its own (re-parented to this
            # process, a subreaper while calls are in flight, that init would stay a zombie)
            [*_namespaces(binary), "--as-pid-1", "--", *(program or ["/bin/true"])],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


# Run inside the baseline's namespaces: make a user namespace, map this user in it, and make one more below it (what
# a confined warm server does before its tool loads: runtimes/_python_confined.py); exit 0 when both could be made.
_NESTS = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
assert libc.unshare(0x10000000) == 0
for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
    with open(f"/proc/self/{name}", "w") as handle:
        handle.write(text)
assert libc.unshare(0x10000000) == 0
"""


def nests() -> bool:
    """Whether a process in the baseline's namespaces may make user namespaces of its own, as a warm server confined
    by a policy does (a host may let bwrap make a sandbox and refuse any namespace inside it: a setuid bwrap where
    ordinary users may make none, a small ``user.max_user_namespaces``). Tried on each call (for ``toolexec
    describe``; a call finds out by its server's start, which then fails and the call runs cold)."""
    import sys

    binary = sandbox.bwrap()
    return binary is not None and usable() and _try(binary, sys.executable, "-I", "-S", "-c", _NESTS)


def wrap(confinement: Confinement, argv: Sequence[str], gate: Gate | None = None) -> tuple[list[str], Held]:
    """The argv that runs ``argv`` under the baseline, and what the call holds (its pids cgroup: give it back with
    :func:`toolexec.runtimes.sandbox.release`; ``pid_namespace``: whether it runs in a PID namespace of its own). With
    ``gate`` the limits are set from here (:meth:`Gate.open`) rather than by prlimit(1) inside: one exec less per call."""
    if not usable():  # the limits alone; RLIMIT_NPROC would count every process of the user here, so none is set
        limits = sandbox._limits(replace(confinement, processes=None))
        program = sandbox._prlimit()
        return ([program, *limits, "--", *argv] if limits and program else list(argv)), Held(pid_namespace=False)
    binary = sandbox.bwrap()
    assert binary is not None
    args = _namespaces(binary)
    inner: list[str] = []
    cgroup = None
    if confinement.processes is not None and pid_max_capped():
        inner = pid_max_prefix(confinement.processes)
    elif confinement.processes is not None and os.geteuid() == 0:
        cgroup = sandbox._cgroup(confinement.processes)
    held = Held(cgroups=[cgroup] if cgroup is not None else [])
    # a shell moves itself into the cgroup, then becomes bwrap: everything after is born there (best effort)
    joining: list[str] = []
    if held.cgroups:
        from toolexec.runtimes.cgroup import join_prefix

        joining = join_prefix(held.cgroups, strict=False)
    if gate is not None:
        return [*joining, *args, *gate.args(), "--", *inner, *argv], held
    limits = sandbox._limits(confinement)
    program = sandbox._prlimit()
    if limits and program:
        args += ["--", program, *limits]
    return [*joining, *args, "--", *inner, *argv], held


class Gate:
    """bwrap's ``--info-fd`` and ``--block-fd``: bwrap says which process will start the tool, and that process
    waits, its namespaces made, until this one has set its limits (and moved it into its pids cgroup): the limits
    are inherited by everything the tool starts, from its first instruction on, without a prlimit(1) exec."""

    def __init__(self, *, block: bool = True) -> None:
        self._info_read, self._info_write = os.pipe()
        self._block_read, self._block_write = os.pipe() if block else (-1, -1)
        self.child: int | None = None  # the namespace's init, once bwrap has said it (outside pid)
        self.child_start: int | None = None  # and when it started (clock ticks), which tells it from a later one

    def args(self) -> list[str]:
        """bwrap's options naming the descriptors the child gets (:meth:`child_fds`)."""
        block = ["--block-fd", str(self._block_read)] if self._block_read >= 0 else []
        return ["--info-fd", str(self._info_write), *block]

    def child_fds(self) -> tuple[int, ...]:
        """The descriptors bwrap must inherit."""
        return tuple(fd for fd in (self._info_write, self._block_read) if fd >= 0)

    def open(self, confinement: Confinement, held: Held | None, *, strict: bool = False) -> None:
        """Once bwrap runs: set the limits of the process that will start the tool, then let it go on. Where bwrap
        could not make its namespaces it says nothing, and ends with its own error. ``strict`` (a declared policy's
        limits, never the baseline's best effort): a limit or cgroup that cannot be set raises OSError, and the tool
        never starts (the caller ends bwrap)."""
        import contextlib

        self._close_child_ends()
        self.child = info_child(self._info_read)
        if self.child is not None:
            from toolexec.runtimes.process_linux import start_of

            self.child_start = start_of(self.child)
            if self._block_write >= 0:
                try:
                    _limit(self.child, confinement, held.cgroups if held is not None else (), strict=strict)
                except BaseException:
                    # the init waits on its block with no parent-death signal yet: ended here, it never goes on to
                    # start the tool (ending bwrap alone would leave it to read the block's end and carry on)
                    with contextlib.suppress(OSError):
                        os.kill(self.child, 9)
                    raise
                with contextlib.suppress(BrokenPipeError):  # it died setting up: it ends with its own error
                    os.write(self._block_write, b"x")
        self.close()

    def _close_child_ends(self) -> None:
        for name in ("_info_write", "_block_read"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)

    def close(self) -> None:
        """Release every descriptor left (on every path: a spawn that failed too)."""
        self._close_child_ends()
        for name in ("_info_read", "_block_write"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)


def info_child(fd: int) -> int | None:
    """The namespace's init that bwrap names on its ``--info-fd`` (read to its end: ``{"child-pid": N, ...}``), None
    when it named none (it could not make its namespaces). Read by hand: compiling the pattern cost a call's start
    ~0.07 ms, the only regular expression on a one-shot call's path."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    key = b'"child-pid":'
    at = data.find(key)
    if at < 0:
        return None
    rest = data[at + len(key) :].lstrip()
    digits = len(rest) - len(rest.lstrip(b"0123456789"))
    return int(rest[:digits]) if digits else None


def _limit(pid: int, confinement: Confinement, cgroups: Sequence[str], *, strict: bool = False) -> None:
    """Set ``pid``'s limits as prlimit(1) would (soft and hard; CPU's hard one a second later, so SIGXCPU comes
    first), and move it into its cgroups. Best effort (the baseline never refuses a call), unless ``strict``: then
    the first that cannot be set raises OSError (ValueError for a limit above the hard one becomes OSError too)."""
    import contextlib
    import resource

    wanted = [
        (resource.RLIMIT_AS, confinement.memory, 0),
        (resource.RLIMIT_CPU, confinement.cpu, 1),
        (resource.RLIMIT_NPROC, confinement.processes, 0),
        (resource.RLIMIT_FSIZE, confinement.file_size, 0),
    ]
    for kind, soft, above in wanted:
        if soft is not None:
            with contextlib.suppress(*(() if strict else (OSError, ValueError))):
                try:
                    resource.prlimit(pid, kind, (soft, soft + above))
                except ValueError as exc:
                    raise OSError(f"cannot set the call's limit {kind}: {exc}") from None
    from toolexec.runtimes import cgroup

    for path in cgroups:  # joined by the shell that became bwrap (:func:`toolexec.runtimes.cgroup.join_prefix`)
        if strict and not cgroup.holds(path, pid):
            raise OSError(f"cannot move the call into its cgroup {path}")


def _namespaces(binary: str) -> list[str]:
    """bwrap making a PID namespace (and, for an ordinary user, the user namespace that allows it) over the whole
    filesystem as it is (devices, writes and all), with a /proc of the namespace's own. Root keeps its powers: a user
    namespace would cut it off from every file it does not own."""
    user = [] if os.geteuid() == 0 else ["--unshare-user"]
    return [binary, *user, "--unshare-pid", "--die-with-parent", "--dev-bind", "/", "/", "--proc", "/proc"]
