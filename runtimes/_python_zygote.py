"""A warm Python tool's fork server (zygote): it loads the tool once, then forks a fresh child per call.

Started by ``python python_zygote.py TOOL_PATH [FUNCTION]`` (see :mod:`toolexec.runtimes.warm_fork`) with the tool's
source text on stdin (marshal's format after a NUL, as the cold bootstrap's request) and, named by
``TOOLEXEC_ZYGOTE_FD``, one end of a ``SOCK_SEQPACKET`` socket to toolexec. It loads the tool (its imports run here,
once), answers ``R`` (ready) or ``F`` + why not (the load failed, or the tool started threads: a process with threads
cannot fork safely), and then serves calls until toolexec closes the socket.

A call is one message: marshal's ``{"env", "cwd", "fsize", "progress"}`` with the call's descriptors (SCM_RIGHTS):
stdin (its request), stdout, stderr, a reply socket and, when the call listens for progress, the progress pipe. The
child starts a new session, takes those as its descriptors 0, 1, 2 (and 3), the call's environment, working
directory and file size bound, and runs the call as the cold bootstrap does (:func:`_python_runner.start`). The
zygote writes ``P<pid>\\n`` on the reply socket once the child exists and ``X<wait status>\\n`` once it has reaped
it, then closes it. The zygote itself runs no thread: it waits in ``select`` for calls and for SIGCHLD.

Like the cold bootstrap, this runs under whatever Python the tool names: no syntax newer than 3.8, no third-party
import.
"""

import contextlib
import marshal
import os
import select
import signal
import socket
import sys

import _python_runner

_MAX_MESSAGE = 1 << 20
_MAX_FDS = 5


def _threads():
    """The threads of this process (the kernel's count: threads a C extension started count too)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def _load(control):
    data = sys.stdin.buffer.read()
    request = marshal.loads(data[1:]) if data[:1] == b"\0" else {}
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # what the tool prints while it loads is not any call's output
        os.dup2(devnull, fd)
    os.close(devnull)
    try:
        module = _python_runner._load(sys.argv[1], request.get("source"))
    except BaseException as exc:  # the cold call reports it, as it always does
        control.send(b"F" + f"the tool failed to load: {type(exc).__name__}: {exc}".encode("utf-8", "replace"))
        return None
    if _threads() > 1:
        control.send(b"F" + b"the tool starts threads when it loads; a process with threads cannot be forked safely")
        return None
    control.send(b"R")
    return module


def _child(module, request, fds):
    """In the forked child: become the call's process, run it and exit."""
    stdin, stdout, stderr = fds[:3]  # fds[3], the reply socket, is the server's
    progress = fds[4] if len(fds) > 4 else -1
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a cold call's interpreter has it
    os.dup2(stdin, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    if progress >= 0:
        os.dup2(progress, 3)
    os.closerange(4 if progress >= 0 else 3, _max_fd())
    os.environ.clear()
    os.environ.update(request["env"])
    try:
        if request.get("cwd"):
            os.chdir(request["cwd"])
        if request.get("fsize") is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (request["fsize"], request["fsize"]))
    except (ImportError, OSError, ValueError) as exc:
        os.write(2, f"toolexec: cannot start the call in its directory with its limits ({exc})\n".encode())
        os._exit(70)
    _python_runner._FAILURE_FILE = os.environ.pop("TOOLEXEC_FAILURE_FILE", None)
    data = b""
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        data += chunk
    _python_runner.start(module, data)


def _max_fd():
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (AttributeError, ValueError, OSError):
        return 1 << 16


def _take(control, module, children):
    """One call from toolexec; False once it has closed the socket."""
    try:
        data, ancillary, _, _ = (
            socket.recv_fds(control, _MAX_MESSAGE, _MAX_FDS) if hasattr(socket, "recv_fds") else _recv_fds(control)
        )
    except InterruptedError:
        return True
    fds = list(ancillary)
    if not data:
        for fd in fds:
            os.close(fd)
        return False
    if len(fds) < 4:
        for fd in fds:
            os.close(fd)
        return True
    request = marshal.loads(data)
    pid = os.fork()
    if pid == 0:
        try:
            control.close()
            _child(module, request, fds)
        finally:
            os._exit(70)
    reply = socket.socket(fileno=fds[3])
    for fd in fds[:3] + fds[4:]:
        os.close(fd)
    with contextlib.suppress(OSError):
        reply.sendall(b"P%d\n" % pid)
    children[pid] = reply
    return True


def _recv_fds(sock):
    """socket.recv_fds for Pythons before 3.9."""
    import array

    fds = array.array("i")
    data, ancdata, flags, addr = sock.recvmsg(_MAX_MESSAGE, socket.CMSG_SPACE(_MAX_FDS * fds.itemsize))
    for level, kind, cdata in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
    return data, list(fds), flags, addr


def _reap(children):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reply = children.pop(pid, None)
        if reply is not None:
            with contextlib.suppress(OSError):
                reply.sendall(b"X%d\n" % status)
            reply.close()


def serve():
    control = socket.socket(fileno=int(os.environ.pop("TOOLEXEC_ZYGOTE_FD")))
    os.environ.pop("TOOLEXEC_WARM_SERVER", None)  # (left in what /proc shows: see warm_fork.SERVER_VARIABLE)
    module = _load(control)
    if module is None:
        os._exit(0)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # toolexec ends it by closing the socket (or killing it)
    children = {}
    open_ = True
    while open_ or children:
        try:
            ready, _, _ = select.select([control, wake_read] if open_ else [wake_read], [], [])
        except InterruptedError:
            continue
        if wake_read in ready:
            try:
                while os.read(wake_read, 512):
                    pass
            except BlockingIOError:
                pass
        _reap(children)
        if open_ and control in ready:
            open_ = _take(control, module, children)
    os._exit(0)
