"""The limits a warm server's load runs under: a cold call's of the same tool (issues 21 and 25).

Cold, each call runs the tool's top level under the call's limits; warm, the server runs it once, at its start, and
forks every call from what it loaded. So the server starts under the same limits: the policy's (a confined server's:
:func:`toolexec.runtimes.warm.confined_spec`) or the baseline's (an isolated server's:
:func:`toolexec.runtimes.warm.server_limits`) address space,
CPU seconds, processes and file size as rlimits set by prlimit(1) inside its sandbox, and, for a root toolexec (whom
the kernel exempts from ``RLIMIT_NPROC``), a pids cgroup of its own capped at the call's ``processes``, held for the
server's life. That cgroup is a sibling of its calls': each call joins its own, whose cap is a cold call's, exactly.
The CPU seconds (the baseline's come from a call's timeout) are the one limit a Python server does not share with
every call it serves: it serves any call whose bound is at most its own (toolexec.runtimes.warm.CPU_PER_CALL), each
call's process lowering the limit it inherits to its own, and one whose bound the load alone reached meets it at once.

A top level that goes past a limit as it loads ends (or fails) its server: the call runs cold, and meets the limit
there, with the cold call's outcome. A limit that cannot be set on the server (no prlimit(1), no pids cgroup for root)
starts none: the call runs cold. Everything the server forks inherits its rlimits; a call's process then sets its own
(the same values, or a lower CPU bound), and its CPU time starts at zero (``RLIMIT_CPU`` counts a process's own CPU). The server's own CPU
time grows with each call it forks: it stops taking calls at the soft limit (``SIGXCPU``) and ends once its calls
are over, a second of CPU before the hard one (its next call starts a new server).
"""

from __future__ import annotations

import os

from toolexec.runtimes import sandbox
from toolexec.runtimes.cgroup import join_prefix
from toolexec.runtimes.warm import LIMITS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def plain(limits: Mapping[str, int], argv: Sequence[str]) -> list[str]:
    """``argv`` (a server run as toolexec's own child: ``sandbox: off``, where a call's one limit is its file size)
    started by prlimit(1) with ``limits``. OSError where prlimit is missing: the server does not start."""
    return [*_prlimit(limits), *argv]


def under(limits: Mapping[str, int], argv: Sequence[str]) -> tuple[list[str], sandbox.Held]:
    """``argv`` (a server run inside the baseline's namespaces: its bwrap's argv) with ``limits`` set inside, before
    the server's program: prlimit(1) after bwrap's ``--``; and what the server holds for its life (a root toolexec's
    pids cgroup, which a shell joins before it becomes bwrap: give it back with :func:`sandbox.release`). OSError when
    a limit cannot be set: the server does not start, its calls run cold."""
    args = list(argv)
    end = args.index("--")  # bwrap's own options end here; what follows is the server's program
    args[end + 1 : end + 1] = _prlimit(limits)
    held = sandbox.Held()
    processes = limits.get("processes")
    if processes is not None and os.geteuid() == 0:
        made = sandbox._cgroup(processes)
        if made is None:
            raise OSError("a root toolexec caps a server's processes with a pids cgroup, and none can be made here")
        held.cgroups.append(made)
        args = [*join_prefix(held.cgroups, strict=True), *args]
    return args, held


def _prlimit(limits: Mapping[str, int]) -> list[str]:
    """prlimit(1) and its options for ``limits``, then ``--`` (nothing for none); OSError where it is missing."""
    memory, cpu, processes, file_size = (limits.get(name) for name in LIMITS)
    confinement = sandbox.Confinement(baseline=True, memory=memory, cpu=cpu, processes=processes, file_size=file_size)
    flags = sandbox._limits(confinement)
    if not flags:
        return []
    program = sandbox._prlimit()
    if program is None:
        raise OSError("the server's limits need util-linux's prlimit, which is not on PATH")
    return [program, *flags, "--"]
