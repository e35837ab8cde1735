"""A seccomp filter for a confined tool: what Landlock does not cover, refused by the kernel at the system call.

Used with :mod:`toolexec.runtimes.landlock` where bubblewrap cannot start. The filter (classic BPF, made here:
a dozen comparisons need no library) refuses, with ``EPERM``:

- what reaches past the tool's own processes: ``ptrace``, ``process_vm_readv``/``writev``, the kernel keyrings
  (``keyctl``, ``add_key``, ``request_key``: shared with toolexec), ``perf_event_open``, ``bpf``, ``userfaultfd``,
  ``io_uring`` (its own socket and connect would pass this filter), kernel modules and ``kexec``;
- a signal to the toolexec process that started it (``kill``, ``tgkill``, ``rt_sigqueueinfo``,
  ``rt_tgsigqueueinfo``, ``pidfd_open`` naming it or one of its threads at the call's start, ``kill(-1)`` and its process group; ``tkill`` always; and
  ``pidfd_send_signal`` before Landlock ABI 6, which scopes signals);
- ``truncate`` by path where Landlock cannot govern it (before ABI 3);
- under ``network: none``, every ``socket`` (``EACCES``): UDP, raw and packet sockets too, which Landlock's TCP
  rules do not cover; and in every case a Unix one, the way to services outside the sandbox that Landlock does not
  govern (the user's D-Bus, which can start programs through systemd; ``docker.sock``; an SSH agent; X11).
  ``socketpair`` stays: a tool's pipes to its own children (Node's, for one) are made with it;
- any other architecture's system calls (an x86_64 process's i386 and x32 calls): the process is killed.

Under bubblewrap (which has namespaces for the rest) a smaller filter, :func:`bwrap_program`, is loaded by bwrap
itself (``--seccomp FD``): no Unix socket in any network mode, no ``io_uring``, no other architecture's calls.

Standard library and ctypes only, no other toolexec module: the launcher imports this file as a top-level module.
"""

from __future__ import annotations

import errno
import os
import struct

# (audit architecture, system call numbers) of the architectures the filter knows
ARCHES = {
    "x86_64": (
        0xC000003E,
        {
            "socket": 41,
            "kill": 62,
            "truncate": 76,
            "ptrace": 101,
            "rt_sigqueueinfo": 129,
            "init_module": 175,
            "delete_module": 176,
            "tkill": 200,
            "tgkill": 234,
            "kexec_load": 246,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "rt_tgsigqueueinfo": 297,
            "perf_event_open": 298,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "finit_module": 313,
            "kexec_file_load": 320,
            "bpf": 321,
            "userfaultfd": 323,
            "pidfd_send_signal": 424,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "pidfd_open": 434,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "truncate": 45,
            "kexec_load": 104,
            "init_module": 105,
            "delete_module": 106,
            "ptrace": 117,
            "kill": 129,
            "tkill": 130,
            "tgkill": 131,
            "rt_sigqueueinfo": 138,
            "socket": 198,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "rt_tgsigqueueinfo": 240,
            "perf_event_open": 241,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "finit_module": 273,
            "bpf": 280,
            "userfaultfd": 282,
            "kexec_file_load": 294,
            "pidfd_send_signal": 424,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "pidfd_open": 434,
        },
    ),
}
DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "bpf",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "tkill",
)
# whose first argument names a process: refused when it names the protected one
BY_PROCESS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open")
AF_UNIX = 1
_MAX_THREADS = 512  # a filter holds at most 4096 instructions

_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_ALLOW = 0x7FFF0000
_X32 = 0x40000000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (the low half of args[0]: little-endian machines)


def supported() -> bool:
    """Whether this machine's architecture is one the filter knows."""
    return os.uname().machine in ARCHES


def program(
    *, network: str, protect: tuple[int, int], threads: tuple[int, ...] = (), landlock_abi: int, machine: str | None = None
) -> bytes:
    """The filter, as ``struct sock_filter`` entries: ``protect`` is (pid, process group) of the process no signal
    may reach, ``threads`` its other threads' ids (``kill`` of any of them reaches it too); ``landlock_abi`` says what
    Landlock already covers."""
    arch, numbers = ARCHES[machine or os.uname().machine]
    denied = tuple(numbers[name] for name in DENIED) + ((numbers["truncate"],) if landlock_abi < 3 else ())
    if landlock_abi < 6:  # a descriptor of /proc/PID is a pidfd too: without Landlock's signal scope, none is used
        denied += (numbers["pidfd_send_signal"],)
    pid, group = protect
    code: list[tuple[int, int, int, int]] = [(_LD_ABS_W, 0, 0, _ARCH), (_JEQ, 1, 0, arch), (_RET, 0, 0, _KILL_PROCESS)]
    code.append((_LD_ABS_W, 0, 0, _NR))
    eperm = _ERRNO | errno.EPERM
    if arch == ARCHES["x86_64"][0]:
        code += [(_JGE, 0, 1, _X32), (_RET, 0, 0, eperm)]
    for number in denied:
        code += [(_JEQ, 0, 1, number), (_RET, 0, 0, eperm)]
    for name in BY_PROCESS:
        named = [pid]
        if name in ("kill", "rt_sigqueueinfo"):  # a thread's id reaches its whole process
            named += threads[:_MAX_THREADS]
        if name == "kill":
            named += [-1 & 0xFFFFFFFF, -group & 0xFFFFFFFF]
        block = [(_LD_ABS_W, 0, 0, _ARG0)]
        for value in named:
            block += [(_JEQ, 0, 1, value), (_RET, 0, 0, eperm)]
        block.append((_RET, 0, 0, _ALLOW))
        code += [(_JEQ, 0, len(block), numbers[name]), *block]
    eacces = _ERRNO | errno.EACCES
    if network == "none":
        code += [(_JEQ, 0, 1, numbers["socket"]), (_RET, 0, 0, eacces)]
    else:  # a Unix socket could reach the user's D-Bus (and through it start a program outside), docker.sock, an agent
        block = [(_LD_ABS_W, 0, 0, _ARG0), (_JEQ, 0, 1, AF_UNIX), (_RET, 0, 0, eacces), (_RET, 0, 0, _ALLOW)]
        code += [(_JEQ, 0, len(block), numbers["socket"]), *block]
    code.append((_RET, 0, 0, _ALLOW))
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)


def bwrap_program(machine: str | None = None) -> bytes:
    """The filter bwrap loads for a confined call (``--seccomp FD``, applied just before the first program of the
    sandbox runs): ``socket(AF_UNIX, …)`` refused with ``EACCES`` in every network mode (a named socket is a file of
    the read-only filesystem, and connecting to one needs no write: the user's D-Bus, which can start programs outside
    the sandbox through systemd, ``docker.sock``, an SSH agent; an abstract one under ``network: all``), ``socketpair``
    left alone (a tool's pipes to its own children); ``io_uring`` refused (its own socket operation would pass this
    filter); any other architecture's system calls (i386's ``socketcall``, x32's) end the process or are refused."""
    arch, numbers = ARCHES[machine or os.uname().machine]
    eperm, eacces = _ERRNO | errno.EPERM, _ERRNO | errno.EACCES
    code: list[tuple[int, int, int, int]] = [(_LD_ABS_W, 0, 0, _ARCH), (_JEQ, 1, 0, arch), (_RET, 0, 0, _KILL_PROCESS)]
    code.append((_LD_ABS_W, 0, 0, _NR))
    if arch == ARCHES["x86_64"][0]:
        code += [(_JGE, 0, 1, _X32), (_RET, 0, 0, eperm)]
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        code += [(_JEQ, 0, 1, numbers[name]), (_RET, 0, 0, eperm)]
    block = [(_LD_ABS_W, 0, 0, _ARG0), (_JEQ, 0, 1, AF_UNIX), (_RET, 0, 0, eacces), (_RET, 0, 0, _ALLOW)]
    code += [(_JEQ, 0, len(block), numbers["socket"]), *block, (_RET, 0, 0, _ALLOW)]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)


def install(filter_code: bytes, libc: object) -> None:
    """Load ``filter_code`` for this process and all it starts (no_new_privs must be set already)."""
    import ctypes  # noqa: PLC0415 - only the launcher loads a filter: toolexec builds bwrap's without ctypes' import

    buffer = ctypes.create_string_buffer(filter_code, len(filter_code))
    prog = struct.pack("=HxxxxxxQ", len(filter_code) // 8, ctypes.addressof(buffer))  # struct sock_fprog
    prog_buffer = ctypes.create_string_buffer(prog, len(prog))
    pr_set_seccomp, seccomp_mode_filter = 22, 2
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, prog_buffer, 0, 0) != 0:  # type: ignore[attr-defined]
        error = ctypes.get_errno()
        raise OSError(error, f"seccomp: {os.strerror(error)}")
