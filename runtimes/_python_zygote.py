"""A warm Python tool's fork server (zygote): it loads the tool once, then forks a fresh child per call.

Started by ``python python_zygote.py TOOL_PATH [FUNCTION]`` (see :mod:`toolexec.runtimes.warm_fork`) with the tool's
source text on stdin (marshal's format after a NUL, as the cold bootstrap's request) and, named by
``TOOLEXEC_ZYGOTE_FD``, one end of a ``SOCK_SEQPACKET`` socket to toolexec. It loads the tool (its imports run here,
once), answers ``R`` (ready) or ``F`` + why not (the load failed, or the tool started threads: a process with threads
cannot fork safely), and then serves calls until toolexec closes the socket.

A call is one message: marshal's ``{"env", "cwd", "fsize", "limits"}`` with the call's descriptors (SCM_RIGHTS):
stdin (its request), stdout, stderr, a reply socket and, when the call listens for progress, the progress pipe. The
call's process, in a session of its own, takes those as its descriptors 0, 1, 2 (and 3), the call's environment,
working directory and file size bound, and runs the call as the cold bootstrap does (:func:`_python_runner.start`).
Toolexec hears ``P\\n`` on the reply socket from the call's process once it has the call (its pid in the message's
credentials) and ``X<wait status>\\n`` once the call is over; then the socket closes. The zygote itself runs no thread:
it waits in ``select`` for calls and for SIGCHLD.

The message mostly goes past the zygote: each spare made ahead is offered to toolexec (``S<pid>`` on the control
socket, with the socket the spare waits on: :meth:`_Spares.offer`), which sends its next call to that spare itself
and then tells the zygote (``T<pid>`` with the call's reply socket: :func:`_taken_directly`), which says the status
as for a call it handed over. One process less to wake before the call runs, and a call's message never enters the
memory that later spares are forked from. A call that finds no offer (calls at once, a spare that ended) is sent to
the zygote, which hands it to a spare made then.

Isolated (``TOOLEXEC_ZYGOTE_ISOLATE=1``: the zygote runs inside the sandbox baseline's namespaces, made once by bwrap,
holding CAP_SYS_ADMIN there), each call gets the baseline's own guarantees: the zygote forks its next child alone in
a new PID namespace (clone(2) with CLONE_NEWPID; where that is refused, it unshares one for that child and returns to
its own at once), so that child is the init of a namespace of its own; that init
takes a mount namespace of its own with a fresh /proc (the call sees its own processes only, no other call's and
never toolexec's) and forks the call's process, which drops every capability (as bwrap leaves an ordinary user's
tool), takes the call's limits (``limits``: CPU seconds, address space, processes, and its pids cgroup) and says
``P`` itself (its pid reaches toolexec as the socket's credentials, in toolexec's own numbering). A namespace's init
ignores every signal it has no handler for (even from toolexec, but SIGKILL), so the tool is not the init: it gets
toolexec's SIGTERM as a cold call's tool would. Once the tool's process has ended, the init kills and reaps whatever
else the call left in its namespace and says the tool's status (128 + the signal, as bwrap's own init reports it) on a
pipe to the zygote, which writes it to toolexec at once (:func:`_end_call`): the whole call is gone by then, and the
init's own exit (its copy of the zygote's memory, its namespaces) is off the call's path. Where the call's process
keeps capabilities (root's, under the baseline) it could take that socket from its init (``pidfd_getfd``), or the
init itself (``ptrace``), and say a status in its place: there the zygote takes the word only as an exit code, and
only once it has killed the init and found it had no child left (:func:`_ended_alone`: the namespace held the init
alone, and nothing of it runs again); else the init's kill ends the namespace, and its reap says the status (killed).

Nothing of that is on a call's path: the call's process (and its init) is made ahead, a spare (:func:`_spare`) that
waits for its call, which toolexec sends it (or the zygote hands it on). The next spare is made once the call has
ended (see :class:`_Spares`). What a spare's process writes first (reference counts) it copies from the
zygote page by page: the zygote freezes what it loaded (``gc.freeze``), so that a collection in a call never walks
(and copies) all of it.

Like the cold bootstrap, this runs under whatever Python the tool names: no syntax newer than 3.8, no third-party
import.
"""

import array
import contextlib
import errno
import gc
import marshal
import os
import resource
import select
import signal
import socket
import sys
import time

import _python_confined
import _python_runner

_MAX_MESSAGE = 1 << 20
_MAX_FDS = 8  # stdin, stdout, stderr, the reply socket, progress, and a confined call's cgroups (two at most)
_CLONE_NEWNS = 0x00020000
_PR_SET_DUMPABLE = 4
_CLONE_NEWPID = 0x20000000
# clone(2)'s number where its first argument is the flags (a null stack: the child runs on a copy of the caller's, as
# after fork); elsewhere a call's init is made by unshare and fork (and, in a confined server, a helper)
_CLONE_NUMBERS = {"x86_64": 56, "aarch64": 220}
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_SLAVE = 2, 4, 8, 0x4000, 0x80000


class _Namespaces:
    """What an isolated zygote needs to give each call a PID namespace of its own (made once, at its start)."""

    def __init__(self):
        import ctypes

        self.libc = ctypes.CDLL(None, use_errno=True)
        self.ctypes = ctypes
        self.own = os.open("/proc/self/ns/pid", os.O_RDONLY)  # where the zygote's next children go back to

    def _check(self, result, what):
        if result != 0:
            code = self.ctypes.get_errno()
            raise OSError(code, f"{what}: {os.strerror(code)}")

    def next_child_alone(self):
        """The next process this one forks is the init of a new PID namespace."""
        self._check(self.libc.unshare(_CLONE_NEWPID), "unshare(CLONE_NEWPID)")

    def back(self):
        """Later children are born in this process's own PID namespace again (so that the next unshare may work)."""
        self._check(self.libc.setns(self.own, _CLONE_NEWPID), "setns")

    cloning = True  # clone(2) makes a call's init here (False once the kernel refused it: the other way then)
    _syscall = None

    def clone_alone(self):
        """``os.fork()`` whose child is alone in a new PID namespace, in one system call (clone with CLONE_NEWPID):
        no unshare and setns around the fork, and in a confined server no helper process, itself a fork of the whole
        loaded zygote, made and reaped per call (:meth:`_python_confined.Confined.fork_alone`). Python's own fork
        bookkeeping runs around it, as os.fork runs it (PyOS_BeforeFork, PyOS_AfterFork_Child or _Parent). The
        child's pid here, 0 in the child, -1 when no process can be made now; None where clone is not known here or
        the kernel refused it (the caller makes the init the other way)."""
        number = _CLONE_NUMBERS.get(os.uname().machine) if self.cloning else None
        if number is None:
            return None
        ctypes = self.ctypes
        api = ctypes.pythonapi
        if self._syscall is None:  # (a PyDLL's: the GIL held throughout, the child goes on in Python at once)
            self._syscall = ctypes.PyDLL(None, use_errno=True).syscall
            self._syscall.restype = ctypes.c_long
        call = self._syscall
        api.PyOS_BeforeFork()
        pid = call(ctypes.c_long(number), ctypes.c_long(_CLONE_NEWPID | signal.SIGCHLD), *([ctypes.c_long(0)] * 4))
        if pid == 0:
            api.PyOS_AfterFork_Child()
            return 0
        failed = ctypes.get_errno()
        api.PyOS_AfterFork_Parent()
        if pid > 0:
            return pid
        if failed in (errno.EAGAIN, errno.ENOMEM):  # no process now (the next spare tries again)
            return -1
        self.cloning = False  # EPERM (a seccomp filter), EINVAL, ENOSYS: never again in this server
        return None

    def die_with_parent(self):
        """SIGKILL when the zygote ends (a namespace's init takes it from its parent's namespace)."""
        self._check(self.libc.prctl(1, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")

    def own_proc(self):
        """In the new namespace's init: a mount namespace of its own, private, with a /proc of the new namespace."""
        self._check(self.libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        # A slave of the zygote's mounts: what the host mounts later still shows; what is mounted here goes nowhere.
        self._check(self.libc.mount(b"none", b"/", None, _MS_REC | _MS_SLAVE, None), "mount --make-rslave /")
        flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        self._check(self.libc.mount(b"proc", b"/proc", b"proc", flags, None), "mount proc")

    bounded = False  # the bounding and ambient sets are empty (:meth:`drop_bounding`)

    def drop_bounding(self, always=False):
        """Empty the bounding set (what an exec could take back) and the ambient set. It takes nothing from what this
        process holds (its effective and permitted sets: :meth:`drop_capabilities` empties them), so a confined call's
        process does it ahead of its call, while it waits (42 system calls off the call's path), and still binds its
        own files once it has its call."""
        if (os.getuid() == 0 and not always) or self.bounded:
            return
        for cap in range(64):  # (PR_CAPBSET_DROP needs CAP_SETPCAP, which bwrap kept: dropped with the rest after)
            if self.libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP; EINVAL past the last capability
                if self.ctypes.get_errno() != 22:  # anything else leaves a capability an exec could take back
                    self._check(-1, f"prctl(PR_CAPBSET_DROP, {cap})")
                break
        self.libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
        self.bounded = True

    def drop_capabilities(self, always=False):
        """No capability left (bwrap leaves none to an ordinary user's tool; root keeps root's, as a cold call's under
        the baseline, unless ``always``: a confined call's bwrap leaves root none either)."""
        if os.getuid() == 0 and not always:
            return
        ctypes = self.ctypes
        self.drop_bounding(always)  # the bounding set first (unless done ahead)
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice (64 capabilities), all empty
        self._check(self.libc.capset(header, data), "capset")


def _threads():
    """The threads of this process (the kernel's count: threads a C extension started count too)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def _load(control, confined=False):
    data = sys.stdin.buffer.read()
    request = marshal.loads(data[1:]) if data[:1] == b"\0" else {}
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # what the tool prints while it loads is not any call's output
        os.dup2(devnull, fd)
    os.close(devnull)
    before = set(sys.modules)
    try:
        module = _python_runner._load(sys.argv[1], request.get("source"))
    except BaseException as exc:  # the cold call reports it, as it always does
        control.send(b"F" + f"the tool failed to load: {type(exc).__name__}: {exc}".encode("utf-8", "replace"))
        return None
    _import_ahead()
    if _threads() > 1:
        control.send(b"F" + b"the tool starts threads when it loads; a process with threads cannot be forked safely")
        return None
    if confined and _others():  # they would outlive the load in the server's sandbox, beside every call
        control.send(b"F" + b"the tool starts processes when it loads; a confined warm server runs none but its calls")
        return None
    control.send(ready_word(_loaded_files(before, sys.argv[1])))
    return module


# What a call's process imports on its way out (:mod:`_python_runner`): atexit for its exit, json to render a value
# that is not text. Imported in a call's process each would cost it 0.3 ms (atexit: the import machinery's pages
# copied) to 2 ms (json: its modules, and re's patterns compiled), every call.
_AHEAD = ("atexit", "json")


def _import_ahead():
    """Import :data:`_AHEAD` once, after the tool (found as a call's process would find them, through the tool's
    sys.path; listed among the files the tool loaded when they are not the interpreter's own): every call's process
    then finds them loaded. One that fails is left to the call, which fails as a cold call does."""
    for name in _AHEAD:
        with contextlib.suppress(BaseException):  # (the call's own import reports it)
            __import__(name)


def _others():
    """The processes of this (confined) server's PID namespace but itself, of which it is the init."""
    try:
        return [name for name in os.listdir("/proc") if name.isdigit() and int(name) != os.getpid()]
    except OSError:
        return ["?"]


_READY_BYTES = 1 << 19  # a longer list of files ends in "+" (toolexec then trusts this server with no later call)


def ready_word(files):
    """``R`` and the files the tool loaded, NUL-separated (the host keeps their identities: toolexec.runtimes.loaded)."""
    word = b"\0".join([b"R"] + [os.fsencode(path) for path in files])
    return word if len(word) <= _READY_BYTES else word[: word.rfind(b"\0", 0, _READY_BYTES)] + b"\0+"


def _loaded_files(before, tool):
    """The files of the modules loaded since ``before`` (the names in sys.modules then) but the tool's own (what runs
    is its source text, not the file) and those of the interpreter's library and site-packages: a sibling module, a
    package beside the tool, a library outside site-packages."""
    import site
    import sysconfig

    places = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError, OSError, ValueError):
            places.add(os.path.realpath(sysconfig.get_path(key)))
    for found in (getattr(site, "getsitepackages", list)(), [getattr(site, "getusersitepackages", str)()]):
        places.update(os.path.realpath(place) for place in found if place)
    places = tuple(place.rstrip(os.sep) + os.sep for place in places if place)
    own = os.path.realpath(tool)
    files = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name in before or not isinstance(path, str):
            continue
        archive = getattr(getattr(module, "__loader__", None), "archive", None)  # a zip import: the archive's file
        path = os.path.abspath(archive if isinstance(archive, str) else path)
        real = os.path.realpath(path)
        if real != own and not real.startswith(places):
            files.append(path)
    return files


def _spare(namespaces, module, calls, said=-1):
    """A spare, made ahead of its call (off the call's path), which waits on ``calls`` for it.

    Without ``namespaces`` it is the call's process itself (:func:`_tool`). With them it is the call's init, alone in a
    new PID namespace: it takes a mount namespace and a /proc of its own, forks the call's process ahead (which
    inherits them, and waits on ``calls`` for the call), lets go of ``calls`` and waits for that process; it exits
    with the tool's status once that has ended (128 + the signal, as bwrap's own init reports it). With ``said`` (a
    socket to the zygote, on which it also gets the call's reply socket) it first ends and reaps whatever else the
    call left, and says the status itself (:func:`_end_call`): the call is over before this init's own exit tears
    down its copy of the zygote."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)  # (the zygote's: _retire_at_cpu_limit) a call meets its CPU limit as cold
    # Nothing of the zygote's but ``calls`` and ``said``: another call's reply socket held here would keep its end
    # from toolexec
    _close_all_but(calls.fileno(), said)
    if namespaces is None:
        _tool(module, calls, None)
    os.setsid()
    try:
        namespaces.die_with_parent()
        namespaces.own_proc()
        # PR_SET_DUMPABLE 0 before the tool's process exists: no process of the call without CAP_SYS_PTRACE (an
        # ordinary user's) may list or open what /proc shows of this init (fd, environ, mem...), trace it, read its
        # memory or take its descriptors (``said``), from the call's first instruction on
        _check_prctl(namespaces.libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0))
    except OSError:
        os._exit(70)  # the zygote's next call finds its socket closed: it makes another spare
    pid = _fork()
    if pid == 0:
        try:
            # the tool's process is as dumpable as a cold call's (the flag is inherited at fork)
            _check_prctl(namespaces.libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0))
            if said >= 0:  # the call's status is its init's to say, never the tool's
                os.close(said)
            _tool(module, calls, namespaces)
        finally:
            os._exit(70)
    calls.close()  # a call sent once the tool's process is gone fails at once (the zygote then makes another spare)
    if pid < 0:
        os._exit(70)
    zygote = socket.socket(fileno=said) if said >= 0 else None  # (made while the spare waits, not at the call's end)
    _exit_with(pid, (lambda code: _end_call(zygote, code)) if zygote is not None else None)


def _check_prctl(result):
    if result != 0:
        raise OSError("prctl(PR_SET_DUMPABLE) failed")


def _end_call(said, code):
    """As a call's namespace init, once the tool's own process has ended with ``code``: SIGKILL whatever else is in
    the namespace (``kill(-1)`` from its init reaches every process of it, and none outside), reap it all (every
    process of a PID namespace descends from its init: none left to wait for means the namespace holds this init
    alone), then say the status: to toolexec itself, on the call's reply socket the zygote sent here once it had
    handed the call over (one process less to wake on the call's path), then ``S`` to the zygote on ``said``; or,
    when that socket has not come, ``code`` to the zygote, which tells toolexec. Either way this init's own exit (its
    copy of the zygote's memory, its namespaces) is torn down off the call's path. The reply socket comes only once
    the tool's process is gone: it never held it, nor could it reach it here (it holds no capability, this init does)."""
    while not _alone():  # a process of the call still runs (or stops): killed, and waited for
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, InterruptedError):
            os.waitpid(-1, 0)
    reply = _reply_sent(said)
    word = b"%d" % code
    if reply >= 0:
        with contextlib.suppress(OSError):
            _Reply(reply).sendall(b"X%d\n" % (code << 8))  # a wait status, as the zygote's reap of this init gives
        os.close(reply)
        word = b"S"
    with contextlib.suppress(OSError):
        said.send(word)


def _reply_sent(said):
    """The call's reply socket, when the zygote has sent it on ``said`` (-1: not yet, or never)."""
    fds = array.array("i")
    try:
        _, ancillary, _, _ = said.recvmsg(1, socket.CMSG_SPACE(fds.itemsize), socket.MSG_DONTWAIT)
    except OSError:
        return -1
    for level, kind, cdata in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
    for fd in fds[1:]:
        os.close(fd)
    return fds[0] if fds else -1


def _alone():
    """As a namespace's init: reap every child that has ended; True when none is left (nor, then, any other process
    of the namespace: they all descend from its init)."""
    while True:
        try:
            ended, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        except InterruptedError:
            continue
        if ended == 0:
            return False


def _close_all_but(*kept):
    """Close every descriptor from 3 on but ``kept`` (negative ones are none)."""
    low = 3
    for fd in sorted(fd for fd in kept if fd >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, _max_fd())


def _exit_with(pid, ended_hook=None):
    """As a call's namespace init: reap every child (orphans of the call come here too) until ``pid``, the tool's own
    process, ends; then exit with its status (``ended_hook(status)`` first, when given: the warm Bash server's). The
    zygote says the status once this init is reaped: its namespace is empty by then."""
    while True:
        try:
            ended, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)
        if ended == pid:
            code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            if ended_hook is not None:
                ended_hook(code)
            os._exit(code)


def _tool(module, calls, namespaces):
    """The call's process, made ahead: a session of its own (and, in a namespace, no capability left), then it waits
    on ``calls`` for its call (from toolexec itself, or handed on by the zygote); it says ``P`` (its pid reaches
    toolexec as the credentials of the message, in toolexec's own numbering), takes the call's limits and runs it."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a cold call's interpreter has it
    # A confined call's process binds its own files before it drops its capabilities: until then no code of the
    # tool's runs in it (its rehearsal leaves the tool alone)
    late = getattr(namespaces, "late_drop", False)
    if late:  # nor a finalizer of the tool's, run by a collection
        gc.disable()
    if namespaces is not None:
        try:
            namespaces.drop_bounding() if late else namespaces.drop_capabilities()  # (late: the rest at its call)
        except OSError:
            os._exit(70)
    _rehearse(module, tool_code=not late)
    try:
        data, fds = _receive(calls)
    except OSError:
        os._exit(0)
    calls.close()
    if not data or len(fds) < 4:  # the zygote is closing: no call comes
        os._exit(0)
    request = marshal.loads(data)
    joins = fds[len(fds) - request.get("cgroups", 0) :] if request.get("cgroups") else []
    fds = fds[: len(fds) - len(joins)]
    if late and namespaces.added_env:
        request["env"] = {**request["env"], **namespaces.added_env}
    if namespaces is not None:
        reply = _Reply(fds[3])  # (its credentials go with what it writes: the host's end has SO_PASSCRED)
        try:
            if late:  # before P: what cannot be set leaves the call unstarted (toolexec starts it cold, or refuses it)
                namespaces.own_files(request.get("files"))
                namespaces.drop_capabilities()
                gc.enable()
                _limit(request.get("limits") or {})
                for fd in joins:  # its cgroups (read-only in its view), through what toolexec opened for it
                    os.write(fd, b"0")
                    os.close(fd)
            reply.sendall(b"P\n")
            if not late:
                _limit(request.get("limits") or {})
        except (OSError, ValueError) as exc:
            os.write(fds[2], f"toolexec: cannot start the call in its own namespace ({exc})\n".encode())
            os._exit(70)
        reply.close()
    else:  # P, its pid in the credentials (the zygote says only the status: the call may have come past it)
        reply = _Reply(fds[3])
        _say_started(reply)
        reply.close()
    _child(module, request, fds[:3] + fds[4:])


def _rehearse(module, tool_code=True):
    """Go through what a call's process does before and after the tool runs, with nothing of a call: each page of the
    zygote's that this writes to (reference counts, the allocator's free blocks) is copied now, while the spare waits,
    not in the call (a copy-on-write fault costs microseconds, and a call's set-up met hundreds of them)."""
    try:
        env = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        # a call's message of its shape, made of the server's own environment: never an earlier call's (a spare is
        # forked from the zygote, and its call could read whatever the zygote keeps: that call's arguments)
        marshal.loads(marshal.dumps({"env": env, "cwd": os.getcwd(), "files": [], "limits": {}}, 2))
        os.chdir(os.getcwd())
        _python_runner._parse(b"\0" + marshal.dumps({"arguments": {}}, 2))
        resource.setrlimit(resource.RLIMIT_FSIZE, resource.getrlimit(resource.RLIMIT_FSIZE))
        os.path.exists(os.devnull)
        with open(os.devnull, "w") as out:
            out.write("0")
        _python_runner._write_file(os.devnull, _python_runner._render("ok").encode("utf-8", "surrogateescape"))
        if tool_code:  # (a module's __getattr__, an object's attributes, what the tool made of json: the tool's code)
            _python_runner._awaitable(getattr(module, sys.argv[2] if len(sys.argv) > 2 else "run", None))
            _python_runner._render({"rehearsal": [0, 0.5, True, None]})
    except BaseException:  # a rehearsal only saves time: nothing of it may stop the spare
        pass


def _limit(limits):
    """The call's limits on this process (inherited by everything it starts): soft and hard, CPU's hard one a second
    later (so that SIGXCPU comes first); then its pids cgroup."""
    for name, kind, above in (("memory", "RLIMIT_AS", 0), ("cpu", "RLIMIT_CPU", 1), ("processes", "RLIMIT_NPROC", 0)):
        value = limits.get(name)
        if value is not None:
            resource.setrlimit(getattr(resource, kind), (value, value + above))
    cgroup = limits.get("cgroup")
    if cgroup:
        try:  # v1's tasks: this single thread moves without waiting a grace period
            procs = os.open(os.path.join(cgroup, "tasks"), os.O_WRONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            procs = os.open(os.path.join(cgroup, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(procs, b"0")
        finally:
            os.close(procs)


# The CPU seconds the zygote had used once the tool had loaded (its start and the tool's top level): what a cold call's
# process uses before the tool runs
_loaded_in = [0.0]


def _child(module, request, fds):
    """Become the call's process, run it and exit (``fds``: stdin, stdout, stderr and, when the call listens for
    progress, its pipe).

    The call's CPU limit is its own (set by :func:`_limit`; the server's may be higher: toolexec gives one server the
    calls of every lower bound), and its process's CPU time starts at zero: a call whose bound the load alone reached
    meets it at once (SIGXCPU, as its cold call's process would have met it while loading)."""
    cpu = (request.get("limits") or {}).get("cpu")
    if cpu is not None and _loaded_in[0] >= cpu:
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGXCPU)
    stdin, stdout, stderr = fds[:3]
    progress = fds[3] if len(fds) > 3 else -1
    os.dup2(stdin, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    if progress >= 0:
        os.dup2(progress, 3)
    os.closerange(4 if progress >= 0 else 3, _max_fd())
    os.environ.clear()
    os.environ.update(request["env"])
    _write_mark(request["env"].get(_MARK_NAME, ""))
    try:
        if request.get("cwd"):
            os.chdir(request["cwd"])
        if request.get("fsize") is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (request["fsize"], request["fsize"]))
    except (OSError, ValueError) as exc:
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


_MARK_NAME = "TOOLEXEC_CALL_MARK"  # toolexec.runtimes.process.MARKER
_mark_at = [0, 0, None]  # the address and length of its value in this process's first environment, and ctypes


def _find_mark():
    """Where the call marker's value (a placeholder, set by toolexec when it started this zygote) lies in the
    environment this process started with: that block is what /proc shows as the environment of every process forked
    from it that runs no program since. A call's process writes its own marker there (:func:`_write_mark`), so that a
    process the tool forks and leaves behind without running a program (``fork()`` then ``setsid()``) carries the
    call's marker, as a cold call's does, and is found and killed with the call (sandbox off: there is no namespace
    of the call's to end it). Nothing found (no placeholder, no /proc): such a process is found only while its
    parent runs, through the tree."""
    try:
        import ctypes

        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50 and 51)
        block = ctypes.string_at(start, end - start)
        name = _MARK_NAME.encode() + b"="
        at = 0 if block.startswith(name) else block.find(b"\0" + name) + 1
        if at == 0 and not block.startswith(name):
            return
        value = at + len(name)
        length = block.find(b"\0", value) - value
        if length > 0:
            _mark_at[:] = [start + value, length, ctypes]
    except (ImportError, OSError, IndexError, ValueError):
        return


def _write_mark(mark):
    """This call's marker over the placeholder (see :func:`_find_mark`); a marker of another length is not written."""
    address, length, ctypes = _mark_at
    if address and len(mark) == length:
        ctypes.memmove(address, mark.encode("ascii", "replace"), length)


def _max_fd():
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (AttributeError, ValueError, OSError):
        return 1 << 16


def _receive(sock):
    data, ancillary, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, _MAX_FDS) if hasattr(socket, "recv_fds") else _recv_fds(sock)
    return data, list(ancillary)


def _take(control, children, spares, hand_over=None):
    """One call from toolexec, handed to ``hand_over`` (this module's :func:`_hand_over` by default); False once it
    has closed the socket.

    The call's message (its environment: its arguments in LLM_TOOL_RAW_JSON, its files' names) is read into
    :data:`_MESSAGE`, handed on from there and then overwritten with zeros: nothing of it stays in this process's
    memory, which every later spare is forked from (and a spare may be made while a call runs: calls back to back)."""
    try:
        size, fds = _receive_into(control, _MESSAGE)
    except InterruptedError:
        return True
    data = memoryview(_MESSAGE)[:size]
    try:
        if not size:
            for fd in fds:
                os.close(fd)
            return False
        if len(fds) < (1 if data[:1] == b"T" else 4):  # (T: a call toolexec sent to its spare itself)
            for fd in fds:
                os.close(fd)
            return True
        (hand_over or _hand_over)(spares, data, fds, children)
        return True
    finally:
        data.release()
        _MESSAGE[:size] = bytes(size)


_MESSAGE = bytearray(_MAX_MESSAGE)  # where the zygote reads each call's message (see :func:`_take`)


def _receive_into(sock, buffer):
    """A message read into ``buffer``: its size, and the descriptors it carried."""
    fds = array.array("i")
    size, ancillary, _, _ = sock.recvmsg_into([buffer], socket.CMSG_SPACE(_MAX_FDS * fds.itemsize))
    for level, kind, cdata in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
    return size, list(fds)


def _fork():
    try:
        return os.fork()
    except OSError:
        return -1


# Calls that follow one another closer than this (from a status said to the next call) are back to back: a spare
# made once a call's status is said would not be ready for the next one (making it takes a few milliseconds)
_FOLLOWING_SECONDS = 0.01


class _Spares:
    """The zygote's spare (:func:`_spare`): one made ahead, handed the next call.

    The next one is made once the zygote has nothing else to do (the call it would serve has ended, and its status
    is said), so that making it (a fork of the whole loaded interpreter, twice under the baseline) never competes with
    a running call for the machine; a call that finds none makes one at once. Calls that come back to back (a client
    that sends the next as soon as it has the last one's result: :data:`_FOLLOWING_SECONDS`) would each wait for the
    spare made after the one before: there the next spare is made as soon as a call is handed over, while it runs."""

    def __init__(self, namespaces, control, module):
        self.namespaces = namespaces
        self.control = control
        self.module = module
        self.waiting = None  # (pid, the socket it waits on, the pipe its init says the call's status on or -1)
        self.offered = None  # (pid, the socket its init says the status on or None): a spare toolexec holds (offer)
        self.ended_early = {}  # pid -> wait status: offered spares reaped before toolexec said it took them
        self.made = set()  # spares alive without a call, and inits whose call's status they said: reaped quietly
        self.own_mounts = os.stat("/proc/self/ns/mnt").st_ino if namespaces is not None else 0
        self.said_at = -1.0  # when a call's status was last said (time.monotonic)
        # An init says its call's status to toolexec itself (:func:`_end_call`) where the call's process holds no
        # capability that could reach the init's descriptors and say it early: root keeps root's under the baseline
        self.early = namespaces is not None and (getattr(namespaces, "late_drop", False) or os.getuid() != 0)
        # Every isolated init says its tool's status to the zygote; where it is not early, the zygote says it once it
        # has ended the init and found nothing of the call left (:func:`_ended_alone`): the word may be the tool's
        self.word = namespaces is not None

    def ended(self):
        """A call's status is said: the next call's spare is made now (unless one waits). Back to back counts from
        then (:meth:`taken`): a call that came at once waited for this spare, whose making is no gap of the client's."""
        self.offer()
        self.said_at = time.monotonic()

    def taken(self):
        """A call was handed over (and its message let go, :func:`_take`): when calls come back to back (this one came
        soon after the last status was said) the next call's spare is made now, while this one runs."""
        if self.said_at >= 0 and time.monotonic() - self.said_at < _FOLLOWING_SECONDS:
            self.offer()

    def offer(self):
        """A new spare, offered to toolexec (``S<pid>`` on the control socket, with the socket the spare waits on):
        toolexec sends the next call to it itself, with no hop through the zygote, and tells the zygote it did
        (``T<pid>``, :func:`_taken_directly`). The call's message never enters the zygote's memory then, which every
        later spare is forked from. One offer at a time: none while toolexec holds one, or a spare waits here."""
        if self.offered is not None or self.waiting is not None:
            return
        self.make()
        if self.waiting is None:
            return
        pid, sock, said = self.waiting
        self.waiting = None
        try:
            socket.send_fds(self.control, [b"S%d" % pid], [sock.fileno()]) if hasattr(socket, "send_fds") else _send_fds(
                self.control, b"S%d" % pid, [sock.fileno()]
            )
        except OSError:  # (toolexec is closing: the spare sees the end of its socket and exits)
            if said is not None:
                said.close()
            return
        finally:
            sock.close()
        self.offered = (pid, said)

    def lost(self, pid, status):
        """Offered spare ``pid`` was reaped (wait ``status``): its call, should toolexec have sent it one, is over
        (it says ``T`` still; :func:`_taken_directly` says this status then). The next call gets a new spare."""
        said = self.offered[1]
        self.offered = None
        if said is not None:
            said.close()
        self.ended_early[pid] = status
        while len(self.ended_early) > 16:  # (spares that died with no call: toolexec never says T for them)
            del self.ended_early[next(iter(self.ended_early))]

    def make(self):
        """A new spare, unless one waits (none when it cannot be made: the next call tries again)."""
        if self.waiting is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # the socket the init says the call's status on, and gets the call's reply socket on (see _end_call)
        said = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if self.word else None
        pid = self.fork()
        if pid == -2:
            for sock in (ours, theirs, *(said or ())):
                sock.close()
            return
        if pid == 0:
            try:
                self.control.close()
                ours.close()
                if said is not None:
                    said[0].close()
                _spare(self.namespaces, self.module, theirs, said[1].detach() if said is not None else -1)
            finally:
                os._exit(70)
        theirs.close()
        if said is not None:
            said[1].close()
        if pid < 0:
            ours.close()
            if said is not None:
                said[0].close()
            return
        self.waiting = (pid, ours, said[0] if said is not None else None)
        self.made.add(pid)

    def fork(self):
        """os.fork(); isolated, the child is alone in a new PID namespace. -1: fork failed, -2: no namespace."""
        if self.namespaces is None:
            return _fork()
        pid = self.namespaces.clone_alone()
        if pid is not None:
            return pid
        if hasattr(self.namespaces, "fork_alone"):
            return self.namespaces.fork_alone()
        try:
            self.namespaces.next_child_alone()
        except OSError:
            return -2
        pid = _fork()
        if pid != 0:  # (the child is in the new namespace: it cannot go back)
            self.namespaces.back()
        return pid

    def hand(self, data, fds):
        """Hand a call to the waiting spare (made now if none waits): its pid (-1 when no spare took it), the socket its
        init says the status on (-1: none; the call's reply socket is sent there, for the init to say the status to
        toolexec itself: :func:`_end_call`) and, isolated, the call's mount namespace held (:meth:`hold`; -1: none)."""
        for _ in range(2):  # a spare that died meanwhile: one more, made now
            self.make()
            if self.waiting is None:
                return -1, -1, -1
            pid, sock, said = self.waiting
            self.waiting = None
            held = self.hold(pid) if self.namespaces is not None else -1  # before the call runs: it may end at once
            try:
                socket.send_fds(sock, [data], fds) if hasattr(socket, "send_fds") else _send_fds(sock, data, fds)
            except OSError:
                _close(held)
                if said is not None:
                    said.close()
                continue
            finally:
                sock.close()
            self.made.discard(pid)
            if said is None:
                return pid, -1, held
            if self.early:  # (an init gone meanwhile: the zygote says the status once it reaps it)
                with contextlib.suppress(OSError):
                    _send_fds(said, b"R", fds[3:4])
            return pid, said.detach(), held
        return -1, -1, -1

    def hold(self, pid):
        """A descriptor of the mount namespace of the call whose init is ``pid`` (-1: none, or not its own yet).

        The last process of a mount namespace to exit tears it down (its /proc unmounted, a grace period waited for)
        before its parent hears of the exit: ~1 ms between the tool's end and its status. Held here, the namespace
        outlives the call's processes, and goes once the status is said (:meth:`_Reply.close`). It holds no process:
        the status still comes only once every process of the call has ended."""
        try:
            held = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        except PermissionError:  # the init is undumpable (see _spare): its only child, the call's process, is not
            try:
                with open(f"/proc/{pid}/task/{pid}/children", "rb") as children:
                    child = int(children.read().split()[0])
                held = os.open(f"/proc/{child}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            except (OSError, ValueError, IndexError):
                return -1
        except OSError:
            return -1
        try:
            if os.fstat(held).st_ino != self.own_mounts:
                return held
        except OSError:
            pass
        os.close(held)  # the zygote's own: the spare has not made its own yet (the call pays the teardown)
        return -1

    def forget_waiting(self):
        """Let go of the spare that waits here (it ended, or is to end: it sees the end of its socket and exits)."""
        if self.waiting is not None:
            self.waiting[1].close()
            if self.waiting[2] is not None:
                self.waiting[2].close()
            self.waiting = None

    def close(self):
        """No call comes any more: let go of every spare (an offered one sees the end of its socket once toolexec
        has closed its own end, the control socket's, on which it was offered)."""
        self.forget_waiting()
        if self.offered is not None:  # (its socket's other end is toolexec's, closed with the control socket)
            if self.offered[1] is not None:
                self.offered[1].close()
            self.offered = None


def _close(fd):
    if fd >= 0:
        os.close(fd)


class _Reply:
    """A call's reply socket (its descriptor: no socket object, whose making costs three system calls) and, isolated,
    the pipe its init says the status on (``said``, see :func:`_end_call`) and what the zygote holds of the call's
    namespace until the status is said (:meth:`_Spares.hold`)."""

    def __init__(self, fd, held=-1, said=-1):
        self.fd = fd
        self.held = held
        self.said = said

    def sendall(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self):
        """Close the socket (toolexec has the status by then), then let go of the call's mount namespace: the kernel
        tears it down now, after the status, not on the call's path when its init exits."""
        for fd in (self.fd, self.held, self.said):
            _close(fd)
        self.fd = self.held = self.said = -1


def _hand_over(spares, data, fds, children):
    """Give the call to a spare; toolexec hears ``P`` from the call's process once it has it. ``T<pid>`` (with the
    call's reply socket alone) is no call: toolexec sent its call to the spare it was offered (:meth:`_Spares.offer`)
    itself, and tells the zygote, which says the status (:func:`_taken_directly`)."""
    if data[:1] == b"T":
        pid = bytes(data[1:])
        _taken_directly(spares, int(pid) if pid.isdigit() else 0, fds, children)  # (0: no spare's)
        return
    pid, said, held = spares.hand(data, fds)
    reply = _Reply(fds[3], held, said)
    for fd in fds[:3] + fds[4:]:
        os.close(fd)
    if pid < 0:  # the call is not started (toolexec runs it cold)
        reply.close()
        return
    children[pid] = reply


def _taken_directly(spares, pid, fds, children):
    """Toolexec sent a call straight to spare ``pid`` (the one offered to it), and the call's reply socket here: the
    zygote says the call's status on it, as for a call it handed over. A spare that ended before this word came (its
    call may be over already) has its status said now, from its reap (:meth:`_Spares.lost`); a pid that is no spare
    offered gets its socket closed (the call then counts as killed)."""
    for fd in fds[1:]:
        os.close(fd)
    if not fds:
        return
    reply = _Reply(fds[0])
    status = spares.ended_early.pop(pid, None)
    offered = spares.offered
    if status is not None or offered is None or offered[0] != pid:
        if status is not None:
            with contextlib.suppress(OSError):
                reply.sendall(b"X%d\n" % status)
        reply.close()
        if status is not None:  # a call's status is said: the next spare is made (as once a reap or a word says one)
            spares.ended()
        return
    spares.offered = None
    spares.made.discard(pid)
    said = offered[1]
    reply.held = spares.hold(pid) if spares.namespaces is not None else -1
    if said is not None:
        if spares.early:  # (as hand() sends it: the init says the status itself, once the call's process is gone)
            with contextlib.suppress(OSError):
                _send_fds(said, b"R", fds[:1])
        reply.said = said.detach()
    children[pid] = reply


def _say_started(reply):
    """``P`` on the call's reply socket (this process's pid in the credentials), with a pidfd of this process where
    this Python opens one (3.9+): toolexec signals the call's group through it (PIDFD_SIGNAL_PROCESS_GROUP) whatever
    becomes of its number once the zygote has reaped it (a process started since in a session of its own may have
    that number: another call's tool, a program of the host's). Said before any code of the call runs."""
    pidfd = -1
    if hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(os.getpid())
    try:
        if pidfd < 0:
            reply.sendall(b"P\n")
        else:
            sock = socket.socket(fileno=reply.fd)
            try:
                _send_fds(sock, b"P\n", [pidfd])
            finally:
                sock.detach()
    except OSError:
        pass
    finally:
        _close(pidfd)


def _send_fds(sock, data, fds):
    """socket.send_fds for Pythons before 3.9."""
    import array

    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def _recv_fds(sock):
    """socket.recv_fds for Pythons before 3.9."""
    import array

    fds = array.array("i")
    data, ancdata, flags, addr = sock.recvmsg(_MAX_MESSAGE, socket.CMSG_SPACE(_MAX_FDS * fds.itemsize))
    for level, kind, cdata in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
    return data, list(fds), flags, addr


def _reap(children, spares):
    """Reap what has ended and say each call's status; True when a call ended."""
    ended = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        spares.made.discard(pid)
        if spares.waiting and spares.waiting[0] == pid:  # the spare died waiting: the next call makes one
            spares.forget_waiting()
        if getattr(spares, "offered", None) and spares.offered[0] == pid:  # (its call may have come: see lost)
            spares.lost(pid, status)
        reply = children.pop(pid, None)
        if reply is not None:
            ended = True
            with contextlib.suppress(OSError):
                reply.sendall(b"X%d\n" % status)
            reply.close()


def serve():
    control = socket.socket(fileno=int(os.environ.pop("TOOLEXEC_ZYGOTE_FD")))
    os.environ.pop("TOOLEXEC_WARM_SERVER", None)  # (left in what /proc shows: see warm_fork.SERVER_VARIABLE)
    confine = os.environ.pop("TOOLEXEC_ZYGOTE_CONFINE", None)
    if os.environ.pop("TOOLEXEC_ZYGOTE_ISOLATE", None) == "1":
        try:
            namespaces = _Namespaces()
            if confine:  # the server's own namespaces first, inside its sandbox (before anything of the tool's)
                os.close(namespaces.own)
                namespaces = _python_confined.enter(confine, namespaces)
            else:
                namespaces.next_child_alone()  # proof that it can, before the tool loads
                namespaces.back()
        except OSError as exc:
            control.send(b"F" + f"no PID namespace can be made for each call: {exc}".encode("utf-8", "replace"))
            os._exit(0)
    else:
        namespaces = None
        _find_mark()
    module = _load(control, confined=bool(confine))
    if module is None:
        os._exit(0)
    used = resource.getrusage(resource.RUSAGE_SELF)
    _loaded_in[0] = used.ru_utime + used.ru_stime
    _retire_at_cpu_limit(control)
    if hasattr(gc, "freeze"):  # (3.7+) the loaded objects are never collected in a call: its collections skip them,
        gc.freeze()  # rather than touch (and so copy) every page that holds one
    spares = _Spares(namespaces, control, module)
    wake_read = _woken_by_children()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # toolexec ends it by closing the socket (or killing it)
    spares.offer()
    # once a call is over and its status said: the next call's spare, while nothing else runs
    _serve_calls(control, spares, wake_read, _hand_over, reaped=spares.ended, taken=spares.taken)


def _retire_at_cpu_limit(control):
    """Under a CPU limit (its calls', which its load ran under: toolexec's runtimes/warm_limits.py), the server's own
    time grows with each call it forks: at the soft limit it takes no more calls (toolexec's next one runs cold, and
    the one after starts a new server) and ends once those it serves are over, a second before the hard limit would
    end it and every call in flight with it."""
    if resource.getrlimit(resource.RLIMIT_CPU)[0] != resource.RLIM_INFINITY:
        signal.signal(signal.SIGXCPU, lambda *_: control.shutdown(socket.SHUT_RD))


def _woken_by_children():
    """The read end of a pipe a child's exit (SIGCHLD) writes to, for select to wait on."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    return wake_read


def _heard(children, spares, pid):
    """Read what call ``pid``'s init said on its socket (:func:`_end_call`): ``S`` (it said the status to toolexec
    itself) or the status, said to toolexec now (the init is then reaped quietly either way), or nothing (it ended
    without a word: its reap says the status). True when said. An init that is not early (root's, under the
    baseline) says only the status, taken once it is ended with nothing of the call left (:func:`_ended_alone`)."""
    reply = children[pid]
    try:
        word = os.read(reply.said, 32)
    except OSError:
        word = b""
    _close(reply.said)
    reply.said = -1
    if not (word == b"S" or (word.isdigit() and int(word) < 256)):  # (an exit code: the tool's, or 128 + a signal)
        return False
    if not spares.early and (word == b"S" or not _ended_alone(pid)):  # (then its reap says the status)
        return False
    del children[pid]
    spares.made.add(pid)
    if word != b"S":
        with contextlib.suppress(OSError):
            reply.sendall(b"X%d\n" % (int(word) << 8))  # a wait status, as the init's reap would give
    reply.close()
    return True


def _ended_alone(pid):
    """Whether the call whose init is ``pid`` has nothing left but that init, which is then ended (SIGKILL: no code
    of it runs from there on, nor can it start a process). Asked when an init that is not early (root's, under the
    baseline) says its tool's status: its tool kept root's capabilities, and could have taken the socket the word
    comes on (``pidfd_getfd``), or the init itself (``ptrace``). Every process of a PID namespace descends from its
    init (an orphan goes to it; none can be made with its parent outside), so an init with no child (on any of its
    threads) is alone in its namespace; a live process of the call, or one that is a zombie still, says no. No: the
    init's kill ends the namespace, and the zygote says the status once it has reaped the init (killed).

    The init is looked at before the kill: once killed, its own end kills and reaps the rest of its namespace, so a
    look after it alone, held up meanwhile (a loaded machine), found no child where the tool still ran when the word
    came, and took the tool's word. And once more after it: a child the init made between the two says no too."""
    try:
        alone = not _has_child(pid)
    except OSError:
        alone = False
    try:
        os.kill(pid, signal.SIGKILL)
        return alone and not _has_child(pid)
    except OSError:
        return False


def _has_child(pid):
    """Whether process ``pid`` has a child, on any of its threads (OSError: it cannot be seen)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
            if handle.read().strip():
                return True
    return False


def _serve_calls(control, spares, wake_read, hand_over, reaped=None, taken=None):
    """Take calls from ``control`` (each to ``hand_over``) and reap what ends, until toolexec has closed the socket
    and every call and spare is over; then exit. ``reaped``: run when a call's status was said, the socket open;
    ``taken``: once a call's message is handed over and let go (:func:`_take`)."""
    children = {}
    open_ = True
    while open_ or children or spares.made:
        saying = {reply.said: pid for pid, reply in children.items() if getattr(reply, "said", -1) >= 0}
        try:
            ready, _, _ = select.select([control, wake_read, *saying] if open_ else [wake_read, *saying], [], [])
        except InterruptedError:
            continue
        if wake_read in ready:
            try:
                while os.read(wake_read, 512):
                    pass
            except BlockingIOError:
                pass
        said = _reap(children, spares)
        for fd in ready:
            pid = saying.get(fd)
            if pid in children and children[pid].said == fd:  # (not reaped meanwhile)
                said = _heard(children, spares, pid) or said
        if said and open_ and reaped is not None:
            reaped()
        if open_ and control in ready:
            open_ = _take(control, children, spares, hand_over)
            if open_ and taken is not None:
                taken()
            if not open_:
                spares.close()
    os._exit(0)
