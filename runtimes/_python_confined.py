"""The namespaces of a warm server confined by a declared sandbox policy, and of each call it forks.

The server is started by the very bwrap a cold confined call of the tool gets (:func:`toolexec.runtimes.sandbox.wrap`
with ``server=True``): its view, network, environment, seccomp filter, every capability dropped; only the server's
own files (its calls' directory) in place of one call's, and, instead of bwrap's ``/proc``, the host's bound (made
its own below). It holds no capability over anything bwrap made. Before the tool loads, :func:`enter` makes, with
user namespaces of its own (as any process there may: a cold call's tool can too):

* a user, mount and PID namespace of the server's own, whose init (this process's child) mounts the server's
  ``/proc`` and covers what bwrap covers in it (``/proc/irq``, ``/proc/bus``, and ``sys``, ``sysrq-trigger`` where
  writable), and keeps one more ``/proc`` of that namespace in its calls' directory under an empty read-only cover,
  where nothing can reach it: the kernel lets a namespace mount a ``/proc`` only where one is wholly visible already
  (bwrap's own, whose covers are locked below, is not: the server's bwrap binds the host's in its place);
* then a user and mount namespace below that one: everything mounted so far is locked (no unmount, no bind of what
  it covers, no read-only place made writable), so the tool's top level, which runs there, cannot undo the view.

Each call's init (the server's own child, made alone in a new PID namespace by one clone(2): :meth:`Confined.clone_alone`;
where clone is refused, :meth:`Confined.fork_alone`: a helper forks it in a new PID namespace and exits, so the server,
the init of its own namespace, adopts it) takes a mount and an IPC namespace (and, under ``network: none``, a network
namespace with its loopback up) of its own, as a cold call's bwrap makes them, a ``/proc`` of its own (the same
covers), bwrap's ``/dev`` read-only with a ``/dev/shm`` of its own (what a call leaves in what the server made once
would be there for the next call), and a new empty private ``/tmp`` with the places the view binds under ``/tmp`` bound again (where the view's ``/tmp`` is private:
a policy that reads or writes ``/tmp`` itself sees the host's, warm as cold). The call's process covers the
server's calls' directory with an empty one and binds back only its own files (:meth:`Confined.own_files`), before
it drops every capability: what it sees is what a cold call's bwrap would show it.

Like the zygote, this runs under whatever Python the tool names: no syntax newer than 3.8, no third-party import.
"""

import fcntl
import os
import socket
import stat
import struct

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_SLAVE = 32, 4096, 0x4000, 0x80000
_HOLD = ".toolexec-hold"  # in the server's calls' directory: where it keeps the /proc no call reaches (covered)
# What bwrap covers read-only in a /proc it mounts: always, and where writable.
_COVERED = ("irq", "bus")
_COVERED_WRITABLE = ("sys", "sysrq-trigger")
_PROXY_VARIABLES = (
    *("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"),
    *("NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY"),
)


class Confined:
    """What a confined server does besides what every isolated one does (``base``: the zygote's ``_Namespaces``)."""

    late_drop = True  # the call's process drops its capabilities once it has its own files bound

    def __init__(self, base, uid, gid, home, private_tmp=True, own_network=False, own_dev=False):
        self.base = base
        self.uid, self.gid, self.home = uid, gid, home
        self.private_tmp = private_tmp  # the view's /tmp is its own (else the host's, bound: a cold call's is too)
        # ``network: none``: each call a network namespace of its own, with its own loopback (as a cold call's bwrap
        # makes one); else the server's (the host's, or the one its allow-list's forwarder listens in)
        self.own_network = own_network
        # bwrap's /dev (no policy place under it): read-only to each call, with a /dev/shm of its own
        self.own_dev = own_dev
        self.libc = base.libc
        # What the forwarder of a network allow-list's proxy set (the server's, for all its calls): each call's too
        self.added_env = {name: os.environ[name] for name in _PROXY_VARIABLES if name in os.environ}

    def _check(self, result, what):
        self.base._check(result, what)

    def _mount(self, source, target, kind, flags, data=None):
        encode = lambda text: None if text is None else os.fsencode(text)  # noqa: E731
        self._check(self.libc.mount(encode(source), encode(target), encode(kind), flags, encode(data)), f"mount {target}")

    def _user_namespace(self, flags):
        """Unshare a user namespace (with ``flags``) in which this process keeps its uid and gid, mapped by itself."""
        outer_uid, outer_gid = os.getuid(), os.getgid()
        self._check(self.libc.unshare(_CLONE_NEWUSER | flags), "unshare(CLONE_NEWUSER)")
        with open("/proc/self/setgroups", "w") as handle:
            handle.write("deny")
        with open("/proc/self/uid_map", "w") as handle:
            handle.write(f"{self.uid} {outer_uid} 1")
        with open("/proc/self/gid_map", "w") as handle:
            handle.write(f"{self.gid} {outer_gid} 1")

    def enter(self):
        """Before the tool loads: the server's own namespaces (see the module). Returns in the server's init; the
        process bwrap started waits for it and exits with its status."""
        self._user_namespace(_CLONE_NEWNS | _CLONE_NEWPID)
        pid = os.fork()
        if pid > 0:  # bwrap's child: nothing but the wait (the init holds the server's descriptors)
            os.closerange(0, _max_fd())
            while True:
                try:
                    _, status = os.waitpid(pid, 0)
                except InterruptedError:
                    continue
                os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
        self.base.die_with_parent()
        self._mount("none", "/", None, _MS_REC | _MS_SLAVE)
        self._proc("/proc")
        hold = os.path.join(self.home, _HOLD)
        os.makedirs(os.path.join(hold, "proc"), 0o700, exist_ok=True)  # (another server of the tool's may have made it)
        self._mount("proc", os.path.join(hold, "proc"), "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        self._mount("tmpfs", hold, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY, "mode=0")
        self._user_namespace(_CLONE_NEWNS)  # everything above is locked from here on

    def _proc(self, where):
        """A /proc of this PID namespace at ``where``, covered as bwrap covers its own."""
        self._mount("proc", where, "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        for name in _COVERED + _COVERED_WRITABLE:
            path = os.path.join(where, name)
            if not os.path.exists(path) or (name in _COVERED_WRITABLE and not os.access(path, os.W_OK)):
                continue
            self._mount(path, path, None, _MS_BIND | _MS_REC)
            self._mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)

    def next_child_alone(self):
        """(The server checks it can make a call's namespace at its start: :meth:`fork_alone` does at each spare.)"""

    def back(self):
        pass

    def die_with_parent(self):
        """Nothing: a call's init outlives the helper that forked it; the server's end ends its namespace, and with it
        every call's."""

    def clone_alone(self):
        """A call's init made by the server itself (the zygote's one system call); None: :meth:`fork_alone` makes it."""
        return self.base.clone_alone()

    def fork_alone(self):
        """Fork a call's init alone in a new PID namespace: its pid (in the server's numbering) here, 0 in it, -1 when
        it cannot be made. A helper unshares the namespace, forks the init and exits (the server adopts the init)."""
        read, write = os.pipe()
        try:
            helper = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            return -1
        if helper == 0:
            os.close(read)
            try:
                self._check(self.libc.unshare(_CLONE_NEWPID), "unshare(CLONE_NEWPID)")
                pid = os.fork()
            except OSError:
                os._exit(70)
            if pid == 0:
                os.close(write)
                return 0
            os.write(write, b"%d" % pid)
            os._exit(0)
        os.close(write)
        data = b""
        while True:
            try:
                chunk = os.read(read, 32)
            except InterruptedError:
                continue
            if not chunk:
                break
            data += chunk
        os.close(read)
        while True:
            try:
                os.waitpid(helper, 0)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break
        return int(data) if data else -1

    def own_proc(self):
        """In a call's init: a mount and an IPC namespace of its own (System V objects a call makes go with it, and
        no call reaches another's), under ``network: none`` a network namespace too (its own loopback: no call
        reaches another's listener), a /proc of its namespace, and a private /tmp (empty, with the view's places under
        /tmp bound again)."""
        flags = _CLONE_NEWNS | _CLONE_NEWIPC | (_CLONE_NEWNET if self.own_network else 0)
        self._check(self.libc.unshare(flags), "unshare(CLONE_NEWNS|CLONE_NEWIPC)")
        if self.own_network:
            _loopback_up()
        self._mount("none", "/", None, _MS_REC | _MS_SLAVE)
        self._proc("/proc")
        if self.own_dev and os.path.isdir("/dev/shm"):  # what a call leaves there is gone with it, as a cold call's
            self._mount(None, "/dev", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _locked("/dev"))
            self._mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755")  # (as bwrap makes it)
        if not self.private_tmp:
            return
        places = _under_tmp()
        held = []
        try:
            for path in places:
                info = os.stat(path)
                held.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC), stat.S_ISDIR(info.st_mode), _modes(path)))
            self._mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755")
            for path, fd, directory, modes in held:
                for parent, mode in modes:
                    if not os.path.isdir(parent):
                        os.mkdir(parent, mode)
                if directory:
                    if not os.path.isdir(path):
                        os.mkdir(path, 0o755)
                elif not os.path.exists(path):
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
                self._mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
        finally:
            for _, fd, _, _ in held:
                os.close(fd)

    def own_files(self, files):
        """In a call's process, before it drops its capabilities: the server's calls' directory covered by an empty
        one, with only ``files`` (the call's own, in it) bound back."""
        files = [path for path in files or () if os.path.dirname(path) == self.home and not path.endswith("/" + _HOLD)]
        held = []
        try:
            for path in files:
                info = os.lstat(path)
                if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                    raise OSError(f"not a file or directory: {path}")
                held.append((path, os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC), stat.S_ISDIR(info.st_mode)))
            self._mount("tmpfs", self.home, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=700")
            for path, fd, directory in held:
                if directory:
                    os.mkdir(path, 0o700)
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
                self._mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND)
        finally:
            for _, fd, _ in held:
                os.close(fd)

    def drop_bounding(self):
        """The bounding and ambient sets emptied, ahead of the call (what it holds it keeps until :meth:`drop_capabilities`)."""
        self.base.drop_bounding(always=True)

    def drop_capabilities(self):
        """No capability left (every set, the bounding set too), as bwrap leaves a cold call's tool."""
        self.base.drop_capabilities(always=True)


def enter(spec, base):
    """The confined server's namespaces (``spec``: ``UID:GID:PRIVATE_TMP:OWN:HOME``, ``OWN``
    holding ``n`` for a network namespace per call, ``d`` for a /dev per call, from toolexec); the
    :class:`Confined` the zygote forks its calls with."""
    uid, gid, private_tmp, own, home = spec.split(":", 4)
    confined = Confined(base, int(uid), int(gid), home, private_tmp == "1", "n" in own, "d" in own)
    confined.enter()
    return confined


def _locked(path):
    """The flags of the mount at ``path`` that a remount in a user namespace must keep (the kernel locked them)."""
    kept = os.statvfs(path).f_flag
    flags = kept & (_MS_NOSUID | _MS_NODEV | _MS_NOEXEC | 1024 | 2048)  # (ST_/MS_ NOATIME 1024, NODIRATIME 2048)
    return flags | (1 << 21 if kept & 4096 else 0)  # ST_RELATIME is MS_RELATIME


def _loopback_up():
    """Bring up the loopback of a new network namespace (down when made), as bwrap does for a cold call's."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as handle:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(handle, siocgifflags, request))[1]
        fcntl.ioctl(handle, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def _under_tmp():
    """The places mounted directly on the private /tmp (what the view binds under it), shallowest first."""
    mounts = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            mounts.append((fields[0], fields[1], _unescape(fields[4])))
    tops = [mount for mount in mounts if mount[2] == "/tmp"]
    if not tops:
        return []
    top = tops[-1][0]
    found = []
    for _, parent, point in mounts:
        if parent == top and point not in found:
            found.append(point)
    return sorted(found, key=lambda path: path.count("/"))


def _modes(path):
    """The directories between /tmp and ``path``, with their modes (made again, as they were, in the new /tmp)."""
    found = []
    parent = os.path.dirname(path)
    while parent not in ("/tmp", "/", ""):
        found.append((parent, stat.S_IMODE(os.stat(parent).st_mode)))
        parent = os.path.dirname(parent)
    return list(reversed(found))


def _unescape(text):
    """A path as /proc/self/mountinfo writes it (space, tab, newline and backslash as octal escapes)."""
    if "\\" not in text:
        return text
    out, i = "", 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 4].isdigit():
            out += chr(int(text[i + 1 : i + 4], 8))
            i += 4
        else:
            out += text[i]
            i += 1
    return out


def _max_fd():
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (AttributeError, ValueError, OSError):
        return 1 << 16
