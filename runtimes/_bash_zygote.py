"""A warm Bash tool's server under the sandbox's baseline: each call runs in a bash that sourced the tool ahead of
the call, alone in a PID namespace of its own.

A bash can neither make a PID namespace nor receive descriptors, so no process forked from one long-lived warm bash
can be alone in a namespace of its own (``bash_warm.sh``'s server is for ``sandbox: off``). This server, toolexec's
own Python inside the baseline's namespaces made once by bwrap (as the Python zygote,
:mod:`toolexec.runtimes.warm_fork`), makes each call's namespace *ahead* of the call instead: a spare is the init of a
new PID namespace, with a mount namespace and a /proc of its own (:class:`_python_zygote._Namespaces`), whose one
child, process 2, is a bash that has sourced the tool (``bash_warm.sh`` in its spare mode) and waits.

Started by ``python _bash_zygote.py BASH… bash_warm.sh TOOL_PATH [FUNCTION]`` with ``TOOLEXEC_ZYGOTE_FD`` naming one
end of a ``SOCK_SEQPACKET`` socket to toolexec, it speaks the Python zygote's protocol: ``R`` once the first spare has
sourced the tool (``F`` + why not), then one message per call (marshal'ed ``env``, ``cwd``, ``fsize``, ``limits``
with the call's stdin, stdout, stderr, reply socket and progress pipe). This server hands the call to the waiting
spare's init, all but the reply socket, and says ``P`` on that socket itself, with the init's pid in the credentials
(toolexec reads it in its own numbering). The init sets the call's limits on the bash (address space, CPU seconds,
processes, file size), keeps the call's channels where the bash opens them (``/proc/1/fd/10``…: the init is process
1 of the bash's /proc; it dropped every capability before it started the bash, as bwrap leaves an ordinary user's
tool none, so that the bash may open them) and tells the bash to take them; once the bash says it has, the init
becomes undumpable (out of reach of a process without CAP_SYS_PTRACE: its /proc files, ptrace, its memory, its
descriptors) and only then lets the bash run the call. The bash takes its environment, directory and pids cgroup
and runs the call in place: the tool is process 2, under the namespace's init, as under bwrap (``kill -STOP $PPID``
reaches an init that ignores it; toolexec is in no /proc the tool sees). Once the bash has ended, the init exits with
its status: the kernel ends whatever else of the call is left with the namespace, and this server says
``X<wait status>`` once it has reaped the init, so the call's status comes once nothing of it is left.

The init never holds the reply socket, nor says the status: the tool's top level, sourced ahead of the call, runs
while the init is within its reach (same user, no capability more; root's tool keeps root's, CAP_SYS_PTRACE too),
and could have taken whatever the init later held (``pidfd_getfd``), or written its memory, to say a status of its
own while a process of the call lived on, whose files the tool's next call (another client's) would be given.

The fork, the namespaces and the sourcing are all off the call's path: two spares wait (a call that follows
another finds one), and a new one is made once a call's status is told, so that making it never competes with a
call (a call that finds no spare waiting makes one). Each call sources the tool afresh, as a cold call does, in a
process no other call ran in. The call's environment, directory and cgroup come as a script the bash sources
(``_bash_call.py``), in a memory file.
"""

import contextlib
import fcntl
import marshal
import os
import select
import signal
import socket
import struct
import sys

from _bash_call import call_script
from _python_zygote import (
    _READY_BYTES,
    _exit_with,
    _max_fd,
    _Namespaces,
    _receive,
    _send_fds,
    _serve_calls,
    _woken_by_children,
)

SPARES = 2  # spares kept ready ahead of the calls (each: an init and a bash): a call that follows one finds one
CHANNELS = (10, 11, 12, 13, 14)  # where an init keeps a call's stdin, stdout, stderr, script and progress pipe
# What bash_warm.sh unsets as it starts (its first lines): not in the environment its calls start from.
_UNSET_BY_BASH = frozenset(
    {
        "TOOLEXEC_ZYGOTE_FD",
        "TOOLEXEC_WARM_SPARE",
        "TOOLEXEC_WARM_SERVER",
        "TOOLEXEC_WARM_SLOTS",
        "TOOLEXEC_WARM_HELD",
        "TOOLEXEC_WARM_QUIET",
    }
)
_RESTORED = ("SIGINT", "SIGPIPE", "SIGXFSZ", "SIGXFZ")  # ignored by this server (or by Python): as a cold call has them


class _Spares:
    """The spares waiting for a call (oldest first), and those made that have not ended (reaped quietly)."""

    def __init__(self, namespaces, control, argv):
        self.namespaces, self.control, self.argv = namespaces, control, argv
        self.waiting = []  # [(pid, the socket its init waits on)]
        self.made = set()
        self.mounts = {}  # pid -> the mount namespace of that waiting spare's init, held (see _Reply)
        self.own_mounts = os.stat("/proc/self/ns/mnt").st_ino
        # Whether the next spare's init says whether its bash sourced the tool (the first one's answer is the
        # server's; no later one says anything: a socket closed with a word unread would reset its peer's reading)
        self.announce = True

    def make(self):
        """A new spare; None when none can be made (no namespace, no fork)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.namespaces.next_child_alone()
        except OSError:
            ours.close()
            theirs.close()
            return None
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            try:
                self.control.close()
                ours.close()
                for _, sock in self.waiting:
                    sock.close()
                _init(self.namespaces, self.argv, theirs, self.announce)
            finally:
                os._exit(70)
        self.namespaces.back()
        self.announce = False
        theirs.close()
        if pid < 0:
            ours.close()
            return None
        self.made.add(pid)
        self.waiting.append((pid, ours))
        return pid, ours

    def fill(self):
        while len(self.waiting) < SPARES and self.make() is not None:
            pass

    def close(self):
        for _, sock in self.waiting:
            sock.close()  # its init sees the end of file and exits: the kernel ends its bash
        self.waiting = []
        for fd in self.mounts.values():
            os.close(fd)
        self.mounts = {}

    def hold_mounts(self, pids=None):
        """Hold the mount namespace of each waiting spare (of ``pids``) whose init has made its own (see
        :class:`_Reply`): opened while the init waits for a call, dumpable (once it has a call it may become
        undumpable, out of this server's reach: for an ordinary user this server holds no CAP_SYS_PTRACE)."""
        for pid in [pid for pid, _ in self.waiting] if pids is None else pids:
            if pid not in self.mounts:
                try:
                    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    continue
                if os.fstat(fd).st_ino == self.own_mounts:  # not made yet: looked at again later
                    os.close(fd)
                else:
                    self.mounts[pid] = fd

    def mounts_of(self, pid):
        """The held mount namespace of spare ``pid`` (now its own to close), or -1."""
        return self.mounts.pop(pid, -1)


class _Reply:
    """A call's reply socket, and the mount namespace of its init held until the call's status is said.

    When the init of a PID namespace exits, its mount namespace (the copy of this server's mounts, and the /proc of
    the call's namespace) goes with it, unless another process holds it: its mounts are taken down and the kernel
    waits out an RCU grace period (``synchronize_rcu_expedited``) before the init's exit is told to this server, on
    every call's way to its status (~0.1 ms measured, more under load). Held here, it goes once the status is said,
    off the call's way. Nothing runs in it by then (every process of the call's namespace has ended); nothing enters
    it (this server only closes it)."""

    def __init__(self, reply, mounts):
        self.reply, self.mounts = reply, mounts

    def sendall(self, data):
        self.reply.sendall(data)

    def close(self):
        self.reply.close()
        if self.mounts >= 0:
            mounts, self.mounts = self.mounts, -1
            os.close(mounts)


def _init(namespaces, argv, calls, announce):
    """A spare's init, alone in a new PID namespace: start the bash, wait for one call, run it (see the module);
    ``announce``: say ``R`` once the bash has sourced the tool, ``F`` + why when it ended instead."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.closerange(3, calls.fileno())
    os.closerange(calls.fileno() + 1, _max_fd())
    try:
        namespaces.die_with_parent()
        namespaces.own_proc()
        namespaces.drop_capabilities()  # (the bash gets none; /proc/1/fd of a process with more would be closed to it)
    except OSError:
        os._exit(70)
    go_read, go_write = os.pipe()
    ready_read, ready_write = os.pipe()
    # (no round trip where the bash will hold CAP_SYS_PTRACE: being undumpable keeps nothing from it, see _reaches)
    held_read, held_write = (-1, -1) if _reaches(namespaces) else os.pipe()
    try:
        bash = _spawn_bash(argv, go_read, ready_write, held_write, announce)
    except OSError:
        os._exit(70)
    for fd in (go_read, ready_write, held_write):
        if fd >= 0:
            os.close(fd)
    said = _word(ready_read, bash)
    os.close(ready_read)
    if said[:1] not in (b"R", b"F") or said == b"F":  # (F: why the tool is not served, in the bash's words)
        said = b"F" + b"the tool ended (or failed) while it was sourced"
    elif len(said) > _READY_BYTES:  # too many files to say: toolexec trusts the server with no later call
        said = b"R\0+"
    if announce:
        with contextlib.suppress(OSError):
            calls.send(said)
    if said[:1] != b"R":
        os._exit(0)
    try:
        data, fds = _receive(calls)
    except OSError:
        os._exit(0)
    calls.close()
    if not data or len(fds) < 3:  # the server is closing: no call comes (the kernel ends the bash with this init)
        os._exit(0)
    _run(bash, marshal.loads(data), fds, (go_write, held_read), namespaces)


def _word(ready, bash):
    """R and the files sourced (bash_warm.sh), up to the word's end (two NULs); nothing: the bash ended first. Not
    the pipe's end: a process the tool's top level left holds the pipe open as long as it runs."""
    said = b""
    try:
        watched = [ready, os.pidfd_open(bash)]
    except (AttributeError, OSError):
        watched = [ready]
    try:
        while len(said) <= _READY_BYTES:
            readable = select.select(watched, [], [])[0]
            if ready not in readable and not select.select([ready], [], [], 0)[0]:  # the bash ended, its word unended
                return b""
            chunk = os.read(ready, 1 << 16)
            if not chunk:
                return b""
            said += chunk
            if said.endswith(b"\0\0"):
                return said[:-2]
        return said
    finally:
        for fd in watched[1:]:
            os.close(fd)


def _reaches(namespaces):
    """Whether the bash this init starts will hold CAP_SYS_PTRACE over it: root's (this init kept root's capabilities,
    :meth:`_Namespaces.drop_capabilities`), exec'd with CAP_SYS_PTRACE in the bounding set and no SECBIT_NOROOT, in
    this init's own user namespace. Such a process may trace this init, open its /proc files and take its descriptors
    whether it is dumpable or not (the kernel's ptrace check asks for the capability only of a process that is not),
    as a cold call's tool reaches bwrap's init: an undumpable init keeps nothing from it, so the round trip that makes
    it so before the call's code runs (:func:`_hidden`) is skipped. A root without CAP_SYS_PTRACE (a container's
    default) keeps it: there the init's uid is the tool's, and being undumpable is what refuses it."""
    if os.getuid() != 0 or os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/status", "rb") as status:
            lines = dict(line.split(b":", 1) for line in status.read().splitlines() if b":" in line)
        bounding, effective = (int(lines[name].strip(), 16) for name in (b"CapBnd", b"CapEff"))
    except (OSError, KeyError, ValueError):
        return False
    ptrace = 1 << 19  # CAP_SYS_PTRACE
    noroot = namespaces.libc.prctl(27, 0, 0, 0, 0)  # PR_GET_SECUREBITS: SECBIT_NOROOT (bit 0) keeps root's exec bare
    return bool(bounding & ptrace and effective & ptrace) and noroot >= 0 and not noroot & 1


def _spawn_bash(argv, go, ready, held, announce):
    """The spare's bash, started by the init (posix_spawn: no fork of this Python): its stdin the init's word to go,
    ``ready`` the pipe it says R on, ``held`` the one it says it holds its channels on, nothing else of the init's,
    the signals this server ignores at their default. Unless it ``announce``s (the server's first spare), it says R
    alone: the files it loaded are the first one's (the server is keyed by the tool's text, and restarted when one
    of those files changes), so it lists none (``TOOLEXEC_WARM_QUIET``: no subshell forked for the list)."""
    for fd in (ready, held):
        if fd >= 0:
            os.set_inheritable(fd, True)  # (every other descriptor of the init's is close-on-exec)
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    env = dict(os.environ)
    env["TOOLEXEC_ZYGOTE_FD"] = str(ready)
    env["TOOLEXEC_WARM_HELD"] = str(held) if held >= 0 else ""  # (empty: no round trip, see _reaches)
    env["TOOLEXEC_WARM_SPARE"] = "1"
    if not announce:
        env["TOOLEXEC_WARM_QUIET"] = "1"
    restored = [getattr(signal, name) for name in _RESTORED if hasattr(signal, name)]
    actions = [(os.POSIX_SPAWN_DUP2, go, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    try:
        return os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsigdef=restored)
    finally:
        os.close(devnull)


def _run(bash, request, fds, pipes, namespaces):
    """The init's part of the call: set the bash's limits, hand it the channels, put itself out of the tool's reach
    once the bash has opened them (:func:`_hidden`), wait for it to end (see :func:`_exit_with`: the init then exits
    with the bash's status, the kernel ends whatever else is left with the namespace, and the server says the status
    once it has reaped the init)."""
    limits = request.get("limits") or {}
    join = ""
    try:
        _limit(bash, limits, request.get("fsize"))
        cgroup = limits.get("cgroup")
        if cgroup:
            tasks = os.path.join(cgroup, "tasks")  # v1's tasks: the single-threaded bash moves itself at once
            join = tasks if os.path.exists(tasks) else os.path.join(cgroup, "cgroup.procs")
    except (ImportError, OSError, ValueError) as exc:
        os.write(fds[2], f"toolexec: cannot start the call in its own namespace ({exc})\n".encode())
        os._exit(70)
    env = os.memfd_create("toolexec-call", 0)
    # (what the call changes of the environment the bash started in: this init's, less what bash_warm.sh unsets)
    base = {name: value for name, value in os.environ.items() if name not in _UNSET_BY_BASH}
    os.write(env, call_script(request["env"], request.get("cwd") or "/", join, base))
    channels = [fds[0], fds[1], fds[2], env, *fds[3:4]]
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in channels]  # (a received one may have a target's number)
    for fd in channels:
        os.close(fd)
    for fd, target in zip(moved, CHANNELS[: len(moved)], strict=True):
        os.dup2(fd, target)
        os.close(fd)
    _hidden(pipes, namespaces)
    _exit_with(bash)


def _hidden(pipes, namespaces):
    """Tell the bash to take its channels (``g`` on ``go``), wait until it says it has (a byte on ``held``, or its
    end), become undumpable, and only then let it run the call (``s``). So no code of the call runs while the tool
    could reach this init through /proc or ptrace (an ordinary user's: root's bash keeps CAP_SYS_PTRACE, as a cold
    call's). The init holds nothing that could end or speak for the call (the server says ``P`` and the status), so
    this is depth, not the seal: the tool's top level, sourced ahead of the call, ran while the init could be reached."""
    go, held = pipes
    if held < 0:  # the bash reaches this init whatever it does (_reaches): it goes on once it has its channels
        os.write(go, b"g\n")
        os.close(go)
        return
    os.write(go, b"g\n")
    os.read(held, 1)  # (or its end, at the bash's exit: a process its top level left with the pipe would hold R's too)
    # PR_SET_DUMPABLE 0: no process without CAP_SYS_PTRACE may trace this one any more, nor open what /proc shows of
    # it (mem, environ, fd...), read or write its memory (process_vm_readv), or take its descriptors (pidfd_getfd)
    if namespaces.libc.prctl(4, 0, 0, 0, 0) != 0:
        os._exit(70)  # (before any code of the call: the bash reads no word, and exits 70 too)
    with contextlib.suppress(OSError):  # (the bash ended: its status is the call's)
        os.write(go, b"s\n")
    os.close(go)
    os.close(held)


def _limit(pid, limits, fsize):
    """The call's limits on the bash ``pid`` (inherited by everything it starts): soft and hard, CPU's hard one a
    second later (so that SIGXCPU comes first)."""
    import resource

    for name, kind, above in (("memory", "RLIMIT_AS", 0), ("cpu", "RLIMIT_CPU", 1), ("processes", "RLIMIT_NPROC", 0)):
        value = limits.get(name)
        if value is not None:
            resource.prlimit(pid, getattr(resource, kind), (value, value + above))
    if fsize is not None:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (fsize, fsize))


def _hand_over(spares, data, fds, children):
    """Give the call to the oldest waiting spare (one made now when none waits, or those waiting died); the next
    spares are made once its message is let go (:func:`_taken`)."""
    reply = socket.socket(fileno=fds[3])
    channels = fds[:3] + fds[4:]  # stdin, stdout, stderr and progress: never the reply socket (see _started)
    pid = -1
    while pid < 0:
        if spares.waiting:
            spare = spares.waiting.pop(0)
        else:
            spare = spares.make()
            if spare is None:
                break
            spares.waiting.remove(spare)
        spares.hold_mounts([spare[0]])  # (held already, unless it was made since the last call: ~10 us)
        try:
            if hasattr(socket, "send_fds"):
                socket.send_fds(spare[1], [data], channels)
            else:
                _send_fds(spare[1], data, channels)
            pid = spare[0]
            spares.made.discard(pid)
        except OSError:
            held = spares.mounts_of(spare[0])  # (a spare that died waiting: nothing to hold)
            if held >= 0:
                os.close(held)
        spare[1].close()
    for fd in channels:
        os.close(fd)
    if pid >= 0:
        with contextlib.suppress(OSError):  # (toolexec is gone: the call runs, its status goes nowhere)
            _started(reply, pid)
        children[pid] = _Reply(reply, spares.mounts_of(pid))
    else:  # the call is not started (toolexec runs it cold)
        reply.close()
    spares.hold_mounts()  # (once the call runs: the next calls' spares, made since their inits had time to unshare)


def _started(reply, pid):
    """Say ``P`` to toolexec for the init ``pid``, as its own word would: its pid in the credentials (the kernel gives
    it in toolexec's numbering; this server may name a process of a PID namespace it holds CAP_SYS_ADMIN over, which
    it does: it unshares one per call). The init never holds the reply socket: a tool reaches its init (its
    descriptors, its memory: same uid, no capability more; root keeps root's), so what the init held the tool could
    use to say a status of its own while its processes live on."""
    credentials = struct.pack("3i", pid, os.getuid(), os.getgid())
    reply.sendmsg([b"P\n"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, credentials)])


def _taken(spares):
    """After a call's hand-over, its message let go (zeroed: a spare forked before would hold it, for the call it
    serves to read in its init's memory): calls beyond the spares kept get the next one made now; else it is made
    after a call's status."""
    if not spares.waiting:
        spares.fill()


def serve():
    control = socket.socket(fileno=int(os.environ.pop("TOOLEXEC_ZYGOTE_FD")))
    os.environ.pop("TOOLEXEC_ZYGOTE_ISOLATE", None)
    try:
        namespaces = _Namespaces()
        namespaces.next_child_alone()  # proof that it can, before the first spare
        namespaces.back()
    except OSError as exc:
        control.send(b"F" + f"no PID namespace can be made for each call: {exc}".encode("utf-8", "replace"))
        os._exit(0)
    spares = _Spares(namespaces, control, sys.argv[1:])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # toolexec ends it by closing the socket (or killing it)
    first = spares.make()
    answer = b"F" + b"no spare could be made"
    if first is not None:
        with contextlib.suppress(OSError):
            answer = first[1].recv(_READY_BYTES + 1) or b"F" + b"the tool ended (or failed) while it was sourced"
    control.send(answer)
    if answer[:1] != b"R":
        os._exit(0)
    wake_read = _woken_by_children()
    spares.fill()
    _serve_calls(control, spares, wake_read, _hand_over, spares.fill, taken=lambda: _taken(spares))


if __name__ == "__main__":
    serve()
