"""The program a sandbox set up ahead waits in: ``python -S -I -B _spare_launcher.py [PLACE…]``.

It runs inside a spare's sandbox (:mod:`toolexec.runtimes.sandbox_spare`), made before its call: bwrap's namespaces,
view, private ``/tmp``, seccomp filter and dropped capabilities are in place, and it blocks reading its standard input,
a socket whose other end toolexec holds (``PLACE`` arguments are not read: they name what the call's program needs
seen, for the view). The call is one message: descriptors (the call's stdin, and its progress pipe) by
``SCM_RIGHTS``, then its program, environment and limits. It takes the descriptors as the call's own (stdin on 0, the
progress pipe on 3), sets the limits (soft and hard, as :func:`toolexec.runtimes.baseline._limit` sets a cold call's;
the CPU's hard one a second later, so SIGXCPU comes first) and ``exec``\\s the program: nothing of the tool runs before
its limits are set. The end of its input before a message (toolexec closed, or died) ends it, and its sandbox with it.

A limit that cannot be set under a declared policy (``strict``) ends it before the tool runs, saying so on stderr after
:data:`PREFIX`, status 1 (the engine turns that into an ``unavailable`` result, as for a cold call). A program that
cannot be run is reported as bwrap reports it. Standard library only.

The message: 8 bytes (its length, big-endian) with the descriptors, then ``strict`` (``0``/``1``), the four limits
(``-1``: none; address space, CPU seconds, processes, file size), the count of argv items, the argv and then the
environment (``NAME=value``), each item ended by a NUL.
"""

from __future__ import annotations

import os
import resource
import socket
import sys

PREFIX = "toolexec-sandbox: "  # toolexec.runtimes.launcher.PREFIX
PROGRESS_FD = 3  # toolexec.runtimes.process.WARM_PROGRESS_FD: where the call finds its progress pipe
LIMITS = (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE)


def main() -> None:
    """Wait for the call, then become it."""
    control = socket.socket(fileno=0)
    fds: list[int] = []
    head = b""
    while len(head) < 8:
        data, ancillary, _, _ = control.recvmsg(8 - len(head), socket.CMSG_SPACE(2 * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += [int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, len(payload) - 3, 4)]
        if not data:
            os._exit(0)  # no call: toolexec discarded this spare (or is gone)
        head += data
    size = int.from_bytes(head, "big")
    body = bytearray()
    while len(body) < size:
        data = control.recv(min(size - len(body), 1 << 20))
        if not data:
            os._exit(0)
        body += data
    items = bytes(body).split(b"\0")
    strict = items[0] == b"1"
    limits = [int(item) for item in items[1:5]]
    count = int(items[5])
    argv = items[6 : 6 + count]
    env = dict(item.split(b"=", 1) for item in items[6 + count : -1])
    for target, fd in zip((0, PROGRESS_FD), fds, strict=False):  # stdin first: never the progress pipe's place
        if fd != target:
            os.dup2(fd, target)  # (the control socket on 0 is closed by it: nothing of toolexec's is left here)
            os.close(fd)
        else:
            os.set_inheritable(fd, True)
    for kind, soft in zip(LIMITS, limits, strict=True):
        if soft < 0:
            continue
        try:
            resource.setrlimit(kind, (soft, soft + 1 if kind == resource.RLIMIT_CPU else soft))
        except (OSError, ValueError) as exc:
            if strict:
                sys.stderr.write(f"{PREFIX}cannot set the call's limit {kind}: {exc}\n")
                sys.stderr.flush()
                os._exit(1)
    try:
        os.execvpe(argv[0], argv, env)  # type: ignore[arg-type]  # bytes throughout: any byte may be in them
    except OSError as exc:
        sys.stderr.write(f"bwrap: execvp {os.fsdecode(argv[0])}: {exc.strerror or exc}\n")
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main()
