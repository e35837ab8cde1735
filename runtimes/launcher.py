"""The launcher of a tool confined by Landlock and seccomp: ``python -S -I -B launcher.py SPEC PROGRAM [ARG…]``.

Run in the tool's own process (as the first program of the call, started by the process helper), it joins the
call's cgroups, sets the rlimits, drops every capability (for a tool run by root), applies the Landlock rules and
the seccomp filter, then ``exec``\\s the tool: nothing of the tool runs before the confinement is complete, and
toolexec, which has threads, never runs code between ``fork`` and ``exec`` (no ``preexec_fn``).

``SPEC`` is made by :func:`toolexec.runtimes.sandbox.launcher_argv`: one line per item, a word then its values,
paths as hex (any byte may be in a path). Standard library and ctypes only; its siblings ``landlock`` and
``seccomp`` are imported as top-level modules (``-I`` keeps everything else off ``sys.path``).

Should a step fail, nothing runs: it says so on stderr after :data:`PREFIX` and exits 1, which the engine turns
into an ``unavailable`` result.
"""

from __future__ import annotations

import ctypes
import os
import resource
import struct
import sys

PREFIX = "toolexec-sandbox: "
RLIMITS = {"as": 9, "cpu": 0, "nproc": 6, "fsize": 1}  # RLIMIT_* numbers (the same on x86_64 and aarch64)
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4


def main(argv: list[str]) -> None:
    """Confine this process as ``argv[1]`` says, then become ``argv[2:]``."""
    spec, program = argv[1], argv[2:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import landlock  # noqa: PLC0415 - its sibling, found once its directory is on sys.path (-I leaves it off)
    import seccomp  # noqa: PLC0415 - the same

    grants: list[tuple[str, int]] = []
    exclusions: dict[str, int] = {}
    network, protect, version = "none", (os.getppid(), os.getpgid(os.getppid())), landlock.abi()
    threads: tuple[int, ...] = ()
    for line in spec.splitlines():
        word, *values = line.split(" ")
        if word == "grant":
            grants.append((_path(values[1]), int(values[0])))
        elif word == "except":
            exclusions[_path(values[1])] = exclusions.get(_path(values[1]), 0) | int(values[0])
        elif word == "abi":  # at most the ABI toolexec chose by (the tests make it lower)
            version = min(version, int(values[0]))
        elif word == "network":
            network = values[0]
        elif word == "protect":
            protect = (int(values[0]), int(values[1]))
            threads = tuple(int(value) for value in values[2:])
        elif word == "cgroup":  # before Landlock, which would refuse the write
            cgroup = _path(values[0])  # v1's tasks: this single thread moves without waiting a grace period
            tasks = os.path.join(cgroup, "tasks")
            with open(tasks if os.path.exists(tasks) else os.path.join(cgroup, "cgroup.procs"), "w") as handle:
                handle.write("0")
        elif word == "rlimit":
            resource.setrlimit(RLIMITS[values[0]], (int(values[1]), int(values[2])))
        elif word == "env":
            os.environ[values[0]] = _path(values[1])
        else:
            raise ValueError(f"unknown item {word!r}")
    if not version:
        raise OSError("Landlock is not available in this kernel")
    libc = landlock.libc()
    landlock.no_new_privileges()
    if os.geteuid() == 0 or os.getuid() == 0:
        _drop_capabilities(libc)
    landlock.restrict(grants, exclusions, network=network, version=version)
    seccomp.install(seccomp.program(network=network, protect=protect, threads=threads, landlock_abi=version), libc)
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        sys.stderr.write(f"{PREFIX}cannot run {program[0]}: {exc.strerror or exc}\n")
        sys.exit(1)


def _path(text: str) -> str:
    return os.fsdecode(bytes.fromhex(text))


def _drop_capabilities(libc: object) -> None:
    """Every capability gone, for good: the bounding set emptied (so an ``exec`` gives root none back), the ambient and
    inheritable sets cleared, then the effective and permitted sets."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except OSError:
        last = 63
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # type: ignore[attr-defined]
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # type: ignore[attr-defined]
    header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)  # _LINUX_CAPABILITY_VERSION_3
    data = ctypes.create_string_buffer(24)  # two struct __user_cap_data_struct, all zero
    if libc.capset(header, data) != 0:  # type: ignore[attr-defined]
        error = ctypes.get_errno()
        raise OSError(error, f"capset: {os.strerror(error)}")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except BaseException as exc:  # whatever failed, the tool is not run
        name = sys.argv[2] if len(sys.argv) > 2 else "the tool"
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        sys.stderr.write(f"{PREFIX}cannot confine {name}: {reason}\n")
        sys.exit(1)
