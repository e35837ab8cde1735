"""Confinement where bubblewrap cannot start: Landlock, seccomp and rlimits, applied by a launcher before ``exec``.

The same policy as under bubblewrap, by other means (what differs is in docs/sandbox.md, "What each platform
enforces"):

- the filesystem: readable but for the hidden paths (their names can still be listed, not their contents), the
  rest of ``/tmp`` and ``/dev`` (but ``null``, ``zero``, ``full``, ``random``, ``urandom``); writable only in the
  declared places (but toolexec's own files inside them), the call's files and a private ``TMPDIR`` made for the
  call and removed after it (:mod:`~toolexec.runtimes.landlock`);
- ``network: none``: no socket (seccomp), no TCP bind or connect (Landlock ABI 4), no abstract Unix socket outside
  (ABI 6); allow-lists are refused (nothing here can tell one host from another); in every mode no Unix socket
  (seccomp): Landlock does not govern connecting to one, and one may be the user's D-Bus;
- no signal to toolexec (Landlock ABI 6 scopes signals; seccomp refuses them by pid before), no ``ptrace`` out;
- every capability dropped (a tool run by root), no privilege gained by ``exec``;
- the rlimits, set in the launcher; a process limit is a pids cgroup where one can be made, else
  ``RLIMIT_NPROC`` counted from the user's processes and threads at the start of the call (the kernel counts a
  user's tasks, not a call's); a memory cgroup where one can be made (:mod:`~toolexec.runtimes.cgroup`).

There is no PID namespace: a process the tool leaves behind is found by the call's marker and the subreaper, as
for an unconfined tool (:mod:`~toolexec.runtimes.process_linux`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from toolexec.runtimes import landlock, seccomp
from toolexec.runtimes.sandbox import Held, _cgroup, _installed_under_tmp, _limits, _pids_root, cgroups, release

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Sequence

    from toolexec.runtimes.sandbox import Confinement

LAUNCHER = Path(__file__).with_name("launcher.py")
# What a tool may still use of /dev (it also reaches its own descriptors through /dev/fd, /dev/stdout: links to /proc).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
ABI_VARIABLE = "TOOLEXEC_LANDLOCK_ABI"
_abi: list[int] = []


def abi() -> int:
    """This kernel's Landlock ABI (0 without Landlock), asked once; ``$TOOLEXEC_LANDLOCK_ABI`` lowers it (``0``: as if
    the kernel had none; the tests use it to make the fallback look missing, or older)."""
    if not _abi:
        _abi.append(landlock.abi() if sys.platform.startswith("linux") else 0)
    given = os.environ.get(ABI_VARIABLE, "")
    return min(_abi[0], int(given)) if given.isdigit() else _abi[0]


def unavailable() -> str | None:
    """Why this host cannot confine this way (naming what it lacks), or None when it can."""
    if not abi():
        return "the kernel has no Landlock (Linux 5.13 or later, with landlock in its list of security modules)"
    if not sys.executable:
        return "the launcher needs the path of the Python that runs toolexec (sys.executable is empty)"
    if not seccomp.supported():
        return f"the seccomp filter knows no system calls of {os.uname().machine} (x86_64 and aarch64 only)"
    return None


def problem(confinement: Confinement) -> str | None:
    """Why ``confinement`` cannot be enforced this way, or None when it can."""
    # an allow-list needs a network namespace of the call's own, where the call's proxy is the only way out
    if confinement.network not in ("none", "all") or confinement.allowed:
        return "network allow-lists need bubblewrap (a network namespace of the call's own): install bubblewrap"
    return None


def wrap(confinement: Confinement, argv: Sequence[str], env_tmpdir: str | None = None) -> tuple[list[str], Held]:
    """The argv that runs ``argv`` confined by the launcher, and what the call holds (release it with :func:`release`)."""
    held = Held(pid_namespace=False)
    try:
        base = os.path.realpath(env_tmpdir or os.environ.get("TMPDIR") or "/tmp")
        held.tmpdir = os.path.join(base, f"toolexec-sandbox-{os.urandom(8).hex()}")
        os.mkdir(held.tmpdir, 0o700)
        lines = [f"abi {abi()}", f"env TMPDIR {_hex(held.tmpdir)}", f"network {confinement.network}"]
        threads = [name for name in os.listdir("/proc/self/task") if name != str(os.getpid())]
        lines.append(" ".join(["protect", str(os.getpid()), str(os.getpgrp()), *threads]))
        grants: list[tuple[str, int]] = [("/", landlock.READ)]
        grants += [(path, landlock.READ) for path in (*_installed_under_tmp(argv), *confinement.visible, *confinement.revealed)]
        grants += [(path, landlock.READ | landlock.WRITE) for path in (*confinement.writable, held.tmpdir)]
        grants += [(path, landlock.READ_FILE | landlock.WRITE_FILE | landlock.TRUNCATE) for path in confinement.files]
        grants += [(path, landlock.READ_FILE | landlock.WRITE_FILE) for path in DEVICES]
        hidden = landlock.ALL & ~landlock.READ_DIR  # a hidden place can still be listed, not read
        exclusions = [(path, hidden) for path in ("/tmp", "/dev", *confinement.hidden) if path not in confinement.revealed]
        exclusions += [(path, landlock.WRITE) for path in confinement.protected]
        for path, rights in grants:
            lines.append(f"grant {rights} {_hex(os.path.realpath(path))}")
        for path, rights in exclusions:
            lines.append(f"except {rights} {_hex(os.path.realpath(path))}")
        made = cgroups(confinement)
        held.cgroups, held.memory = made.cgroups, made.memory
        if confinement.processes is not None and os.geteuid() != 0:
            # the kernel counts a user's tasks, not a call's: a pids cgroup where one can be made, else the rlimit
            pids = _cgroup(confinement.processes) if _pids_root() is not None else None
            if pids is not None:
                held.cgroups.append(pids)
            else:
                start = _tasks_of(os.getuid()) + confinement.processes
                lines.append(f"rlimit nproc {start} {start}")
        lines += [f"cgroup {_hex(path)}" for path in held.cgroups]
        for option in _limits(confinement):  # prlimit's options (``--as=N``, ``--cpu=SOFT:HARD``), as under bwrap
            name, _, value = option.removeprefix("--").partition("=")
            soft, _, hard = value.partition(":")
            if name != "nproc":  # counted above
                lines.append(f"rlimit {name} {soft} {hard or soft}")
    except BaseException:
        release(held)
        raise
    return [sys.executable, "-S", "-I", "-B", str(LAUNCHER), "\n".join(lines), *argv], held


def _tasks_of(uid: int) -> int:
    """How many tasks (threads) the user ``uid`` runs now: what ``RLIMIT_NPROC`` counts."""
    total = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                with open(f"/proc/{name}/stat", "rb") as handle:
                    total += int(handle.read().rsplit(b")", 1)[1].split()[17])
            except (OSError, IndexError, ValueError):
                continue
    return total


def _hex(path: str) -> str:
    return os.fsencode(path).hex()
