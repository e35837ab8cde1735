"""The program a sandbox set up ahead waits in: ``python -S -I -B _spare_launcher.py [PLACE…]``.

It runs inside a spare's sandbox (:mod:`toolexec.runtimes.sandbox_spare`), made before its call: bwrap's namespaces,
view, private ``/tmp``, seccomp filter and dropped capabilities are in place, and it says so (one byte) and blocks reading its standard input,
a socket whose other end toolexec holds (``PLACE`` arguments are not read: they name what the call's program needs
seen, for the view). The call's limits are set on this process from outside before its go, as a cold call's are set
on its namespace's init (:func:`toolexec.runtimes.baseline._limit`). The call is one message: descriptors (the call's
stdin, and its progress pipe) by ``SCM_RIGHTS``, then its program and environment. It takes the descriptors as the
call's own (stdin on 0, the progress pipe on 3) and ``exec``\\s the program. The end of its input before a message
(toolexec closed, or died) ends it, and its sandbox with it. A program that cannot be run is reported as bwrap reports
it. Standard library only.

The message: 8 bytes (its length, big-endian) with the descriptors, then the count of argv items, the argv and the
environment (``NAME=value``), each item ended by a NUL.
"""

from __future__ import annotations

import _signal  # not signal (enum): the C module every interpreter has loaded already
import _socket  # not socket: its import (enum, selectors, …) would make every spare ~20 ms slower to be ready
import os
import sys

PROGRESS_FD = 3  # toolexec.runtimes.process.WARM_PROGRESS_FD: where the call finds its progress pipe
READY = b"R"  # said once it waits (toolexec.runtimes.sandbox_spare.READY)
# Names, in a go's environment, the file this process writes ``0`` to, to join the call's pids cgroup (removed first).
CGROUP_VARIABLE = b"TOOLEXEC_EARLY_CGROUP"
# Names, in a go's environment, the pid_max this process sets in its PID namespace (a root call's process cap on a
# kernel that keeps one per namespace: toolexec.runtimes.baseline.pid_max_capped), removed first.
PID_MAX_VARIABLE = b"TOOLEXEC_EARLY_PID_MAX"
PID_MAX = "/proc/sys/kernel/pid_max"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def argv(python: str | None = None) -> list[str]:
    """This launcher's command line: on ``python`` (toolexec's by default), isolated from its environment and site."""
    return [python or sys.executable, "-S", "-I", "-B", os.path.abspath(__file__)]


def main() -> None:
    """Wait for the call, then become it."""
    program, env = receive()
    for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ"):  # Python ignores them; an exec'd program would keep that
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    try:
        os.execvpe(program[0], program, env)  # type: ignore[arg-type]  # bytes throughout: any byte may be in them
    except OSError as exc:
        sys.stderr.write(f"bwrap: execvp {os.fsdecode(program[0])}: {exc.strerror or exc}\n")
        sys.stderr.flush()
        os._exit(1)


def send(control: _socket.socket, argv: Sequence[str], env: Mapping[str, str], stdin: int, progress: int) -> None:
    """toolexec's side: hand the call to the process waiting on the other end of ``control`` (its stdin, its
    progress pipe, -1 for none, its program and environment). OSError when it does not take it."""
    items = [b"%d" % len(argv)]
    items += [os.fsencode(arg) for arg in argv]
    items += [os.fsencode(name) + b"=" + os.fsencode(value) for name, value in env.items()]
    payload = b"\0".join(items) + b"\0"
    fds = [stdin, *([progress] if progress >= 0 else [])]
    rights = b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds)
    control.sendmsg([len(payload).to_bytes(8, "big")], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
    control.sendall(payload)


def receive() -> tuple[list[bytes], dict[bytes, bytes]]:
    """Say this process waits, then take its call (see the module): its descriptors in their places, and its program
    and environment (bytes). The end of the socket before a whole message ends this process. Also what a one-shot
    run's early Python spare waits in (``python_bootstrap.py`` under ``TOOLEXEC_EARLY``, :mod:`toolexec.early`),
    whatever Python the tool names: nothing here is newer than 3.8."""
    control = _socket.socket(fileno=0)
    control.sendall(READY)  # (toolexec gone: a broken pipe ends it)
    fds: list[int] = []
    head = b""
    while len(head) < 8:
        data, ancillary, _, _ = control.recvmsg(8 - len(head), _socket.CMSG_SPACE(2 * 4))
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
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
    control.detach()  # its descriptor (0) is the call's stdin's place now: never closed by this object
    items = bytes(body).split(b"\0")
    count = int(items[0])
    argv = items[1 : 1 + count]
    env = dict(item.split(b"=", 1) for item in items[1 + count : -1])
    # moved by itself (a process moved from outside waits ~10 ms), capped, best effort as a cold start's shell
    for variable, path in ((CGROUP_VARIABLE, None), (PID_MAX_VARIABLE, PID_MAX)):
        value = env.pop(variable, None)
        if value is not None:
            try:
                with open(path or value, "wb") as handle:
                    handle.write(value if path else b"0")
            except OSError:
                pass
    for target, fd in zip((0, PROGRESS_FD), fds):  # noqa: B905 - (3.8: a tool's Python) stdin first, never the progress pipe's place
        if fd != target:
            os.dup2(fd, target)  # (the control socket on 0 is closed by it: nothing of toolexec's is left here)
            os.close(fd)
        else:
            os.set_inheritable(fd, True)
    return argv, env


if __name__ == "__main__":
    main()
