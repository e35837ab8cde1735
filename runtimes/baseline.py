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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from toolexec.runtimes.sandbox import Confinement

# The process cap no ordinary tool meets (threads count too: a JVM or a browser has a few hundred at most); a fork
# bomb stops there.
PROCESSES = 1024
_usable: dict[str, bool] = {}  # bwrap path -> whether it makes the baseline's namespaces on this host


def cpu_seconds(timeout: float | None) -> int | None:
    """The CPU seconds a call's processes may each use: more than they can use before ``timeout`` (on every CPU of
    this machine at once), so only a call whose timeout cannot fire meets it. None without a timeout."""
    if not timeout or timeout <= 0:
        return None
    return math.ceil(timeout) * (os.cpu_count() or 1) + 1


def processes() -> int | None:
    """The default process cap, or None where it cannot be applied to one call alone: the kernel exempts root from
    ``RLIMIT_NPROC``, and a root toolexec caps a call only through a pids cgroup, where one can be made."""
    return PROCESSES if os.geteuid() != 0 or sandbox._pids_root() is not None else None


def usable() -> bool:
    """Whether this host makes the baseline's namespaces (bwrap runs, and may make a PID namespace); tried once per
    process and bwrap."""
    binary = sandbox.bwrap()
    if binary is None:
        return False
    if binary not in _usable:
        import subprocess

        try:
            done = subprocess.run(
                [*_namespaces(binary), "--", "/bin/true"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=10,
                check=False,
            )
            _usable[binary] = done.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _usable[binary] = False
    return _usable[binary]


def wrap(confinement: Confinement, argv: Sequence[str]) -> tuple[list[str], str | None, bool]:
    """The argv that runs ``argv`` under the baseline, the pids cgroup made for it (remove it with
    :func:`toolexec.runtimes.sandbox.release`), and whether it runs in a PID namespace of its own."""
    if not usable():  # the limits alone; RLIMIT_NPROC would count every process of the user here, so none is set
        limits = sandbox._limits(replace(confinement, processes=None))
        program = sandbox._prlimit()
        return ([program, *limits, "--", *argv] if limits and program else list(argv)), None, False
    binary = sandbox.bwrap()
    assert binary is not None
    args = _namespaces(binary)
    limits = sandbox._limits(confinement)
    program = sandbox._prlimit()
    if limits and program:
        args += ["--", program, *limits]
    args += ["--", *argv]
    cgroup = sandbox._cgroup(confinement.processes) if confinement.processes is not None and os.geteuid() == 0 else None
    if cgroup is not None:  # the shell moves itself into the cgroup, then becomes bwrap
        args = ["/bin/sh", "-c", 'echo 0 > "$0/cgroup.procs" && exec "$@"', cgroup, *args]
    return args, cgroup, True


def _namespaces(binary: str) -> list[str]:
    """bwrap making a PID namespace (and, for an ordinary user, the user namespace that allows it) over the whole
    filesystem as it is (devices, writes and all), with a /proc of the namespace's own. Root keeps its powers: a user
    namespace would cut it off from every file it does not own."""
    user = [] if os.geteuid() == 0 else ["--unshare-user"]
    return [binary, *user, "--unshare-pid", "--die-with-parent", "--dev-bind", "/", "/", "--proc", "/proc"]
