"""A running server's word that no visible tool file changed, so that ``list`` and a no-change ``build`` stat none.

A no-change check must see a file edited in place, which changes no directory; on its own it therefore stats every
visible file (:func:`toolexec.catalog.files_digest`, ~20 ms for 10,000 files on an ext4 disk: a per-file system
call, which no Python loop makes cheaper). A resident ``toolexec serve`` (and ``toolexec mcp``'s companion) holds
an inotify watch on the tools folder, on the config's folder and on every visible file, and answers, on a private
Unix socket beside its own, with the digest of the files' stats as of the moment it answers:

* it first reads every event the kernel queued. The kernel queues an inotify event within the system call that
  made the change, so every change made before the question was asked is in the queue when it is read. It polls its
  mount table too (``/proc/self/mountinfo``): a bind mount over a file or folder (or its unmount) puts another file
  at the same path and raises no inotify event;
* when there was one (or the queue overflowed), it watches everything anew and only then stats the files: a change
  after a watch is added is an event the next question sees, one before it is in the stats;
* otherwise it answers the digest it last computed, without a system call on the files.

The asking process (:func:`vouched`) takes the word only from a server of its own uid, watching the same folder
(its device and inode) and the same visible names, in the same mount namespace (a process in another one may see
other files at the same paths); it compares that digest with the index's, as it would compare its own. What this
relies on, and where the server vouches for nothing (then every check stats the files as without a server): Linux
inotify; the tools folder on a local file system (:data:`LOCAL_FILE_SYSTEMS`: on NFS, CIFS or FUSE another machine's
or the daemon's own writes raise no event); visible files named directly in the tools folder, none of them a
symbolic link (whose target could change elsewhere). Events on the files themselves are seen whichever path they
were written through (a hard link elsewhere included). Not seen: writes through a shared writable memory map, which
raise no inotify event (a stat sees them once the kernel updates the file's mtime).
"""

from __future__ import annotations

import contextlib
import os
import struct
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import select
    import socket

    from toolexec.config import Config

__all__ = ["LOCAL_FILE_SYSTEMS", "Vouch", "vouch_path", "vouched"]

LOCAL_FILE_SYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "zfs", "overlay", "ramfs", "jfs"})
ANSWER_SECONDS = 1.0  # a server answers in microseconds (milliseconds after a change): a slower one is not waited on
MAX_ANSWER = 256
NO = b"no\n"  # the server's answer when it cannot vouch
RETRY_SECONDS = 10.0

# inotify(7)
_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_IN_ONLYDIR, _IN_DONT_FOLLOW = 0x01000000, 0x02000000
_FILE_EVENTS = _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_DELETE_SELF | _IN_MOVE_SELF
_FOLDER_EVENTS = _FILE_EVENTS | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
_WHOLE = _IN_Q_OVERFLOW | _IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF  # events that are a change whatever they name
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


def vouch_path(config_path: str) -> str:
    """The socket of the server vouching for the config at ``config_path`` (resolved), beside ``toolexec serve``'s."""
    from toolexec.serve_client import socket_folder, socket_name

    return os.path.join(socket_folder(), socket_name(config_path).replace("serve-", "vouch-", 1))


def vouched(config: Config, visible: str | None) -> str | None:
    """The digest of the visible files' stats as a running server watching them vouches for it now, or None when no
    server vouches for these files (none runs, it watches another folder or other files, as an ``--agent``'s, or it
    cannot watch soundly): then the caller stats them. ``visible`` is the digest of the names of the visible files
    (``config.fingerprint()["visible_tools"]``), which the server's must be."""
    import _socket

    if os.environ.get("TOOLEXEC_NO_SERVER", "") not in ("", "0"):  # (serve_client.NO_SERVER_VARIABLE: no server at all)
        return None
    try:
        path = vouch_path(os.path.realpath(config.path))
        if not os.path.exists(path):
            return None
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except (OSError, ValueError):
        return None
    try:
        sock.settimeout(ANSWER_SECONDS)
        sock.connect(path)
        uid = struct.unpack("3i", sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12))[1]
        if uid != os.getuid():
            return None
        answer = b""
        while not answer.endswith(b"\n") and len(answer) < MAX_ANSWER:
            chunk = sock.recv(MAX_ANSWER)
            if not chunk:
                break
            answer += chunk
        words = answer.decode("ascii").split()
        if len(words) != 6 or words[0] != "vouch" or len(words[1]) != 64 or visible is None or words[4] != visible:
            return None
        if words[5] != str(os.stat("/proc/self/ns/mnt").st_ino):
            return None  # the server sees another mount table: a file covered here (or there) is not what it watches
        here = os.stat(config.tools_dir)
        if (here.st_dev, here.st_ino) != (int(words[2]), int(words[3])):
            return None  # the server watches another folder (this one was moved, or its config names another)
        return words[1]
    except (OSError, ValueError, UnicodeError, struct.error):
        return None
    finally:
        sock.close()


class Vouch:
    """The server side: a listening socket whose every connection is answered at once (:meth:`answer`), for a host's
    own loop (``toolexec serve``'s selector: no thread, as the host forks)."""

    def __init__(self, config_path: str) -> None:
        self.config_path = os.path.realpath(config_path)
        self.path = vouch_path(self.config_path)
        self.listener: socket.socket | None = None
        self._inotify = -1
        self._watched: dict[int, frozenset[str] | None] = {}  # wd: the names a folder's events count for (None: a file)
        self._answer: bytes | None = None  # the last answer; None: compute anew
        self._mounts: select.poll | None = None  # /proc/self/mountinfo, polled: a mount raises no inotify event
        self._mounts_fd = -1
        self._retry_at = 0.0  # (time.monotonic) when a ``no`` is computed anew without an event

    def open(self) -> None:
        """Listen (0600; a stale socket there is replaced: the caller holds the lock of this config's server)."""
        import socket

        with contextlib.suppress(FileExistsError):
            os.makedirs(os.path.dirname(self.path), mode=0o700)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mask = os.umask(0o177)
        try:
            listener.bind(self.path)
            listener.listen(64)
        except BaseException:
            listener.close()
            raise
        finally:
            os.umask(mask)
        listener.setblocking(False)
        self.listener = listener

    def close(self) -> None:
        """Stop listening and watching; remove the socket."""
        if self.listener is not None:
            self.drop()
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self._unwatch()

    def drop(self) -> None:
        """Close the socket and the watches in a forked child, leaving the socket file to the server."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        self._unwatch()

    def fileno(self) -> int:
        assert self.listener is not None, "open() first"
        return self.listener.fileno()

    def answer(self) -> None:
        """Answer every waiting connection (the listener is readable)."""
        assert self.listener is not None
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # none waiting (or out of descriptors: the client stats the files itself)
                return
            with conn:
                try:
                    uid = struct.unpack("3i", conn.getsockopt(1, 17, 12))[1]  # SOL_SOCKET, SO_PEERCRED
                    conn.setblocking(False)
                    conn.send(self.current() if uid == os.getuid() else NO)
                except OSError:
                    pass

    def current(self) -> bytes:
        """The answer as of now: the kept one unless an event was queued since it was computed (a ``no`` is tried
        again after :data:`RETRY_SECONDS`: a folder made since, a watch limit raised)."""
        changed = self._inotify >= 0 and self._changed()  # (every queued event read, whatever the answer)
        changed = self._remounted() or changed
        if changed or (self._answer == NO and time.monotonic() >= self._retry_at):
            self._answer = None
        if self._answer is None:
            self._answer = self._compute()
            if self._answer == NO:
                self._retry_at = time.monotonic() + RETRY_SECONDS
        return self._answer

    def _changed(self) -> bool:
        """Read every queued event; whether one of them may change the answer."""
        changed = False
        while True:
            try:
                data = os.read(self._inotify, 1 << 16)
            except BlockingIOError:
                return changed
            except OSError:
                return True
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, at)
                name = data[at + _EVENT.size : at + _EVENT.size + length].rstrip(b"\0")
                at += _EVENT.size + length
                names = self._watched.get(wd)
                if mask & _WHOLE or wd not in self._watched or names is None or os.fsdecode(name) in names:
                    changed = True

    def _remounted(self) -> bool:
        """Whether this namespace's mount table changed since the answer was computed (a file or folder covered by a
        bind mount, uncovered by an unmount: another file at the same path, and no inotify event; proc(5): a change
        of /proc/PID/mountinfo marks it with POLLPRI)."""
        return self._mounts is not None and bool(self._mounts.poll(0))

    def _compute(self) -> bytes:
        """Watch everything anew, then stat the files: the answer, or ``no`` when it cannot be vouched for."""
        import select

        from toolexec.config import load_config

        self._unwatch()
        try:
            self._mounts_fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
            self._mounts = select.poll()
            self._mounts.register(self._mounts_fd, select.POLLPRI)
            self._inotify = _inotify_init()
            folder, name = os.path.split(self.config_path)
            self._watch(folder, _FOLDER_EVENTS | _IN_ONLYDIR, frozenset({name}))
            config = load_config(self.config_path)  # (after watching its folder: an edit from now on is an event)
            # the functions folder for tools.txt (visible tools of an llm-functions folder): watched, then read again
            self._watch(str(config.functions_dir), _FOLDER_EVENTS | _IN_ONLYDIR, frozenset({"tools.txt"}))
            again = load_config(self.config_path)
            if (again.tools_dir, again.visible_tools) != (config.tools_dir, config.visible_tools):
                return NO  # changed while watched: its event makes the next question compute anew
            return self._files(str(config.tools_dir), list(config.visible_tools), config.fingerprint()["visible_tools"])
        except Exception:  # a config that does not load, a folder gone, watches past the limit: no word (the
            return NO  # watches made so far stay: a change among them is an event that makes it try again)

    def _files(self, tools: str, files: list[str], visible: str) -> bytes:
        from toolexec.catalog import files_digest

        if not _local(tools) or any("/" in file or file in ("", ".", "..") for file in files):
            return NO
        folder = os.stat(tools)
        self._watch(tools, _FOLDER_EVENTS | _IN_ONLYDIR, frozenset(files))
        for file in files:
            with contextlib.suppress(FileNotFoundError):  # (its creation is an event of the folder)
                self._watch(os.path.join(tools, file), _FILE_EVENTS | _IN_DONT_FOLLOW, None)
        digest = files_digest(tools, files, links=False)
        here = os.stat(tools)
        if digest is None or (here.st_dev, here.st_ino) != (folder.st_dev, folder.st_ino):
            return NO  # a symbolic link among them, or the folder replaced while watched
        namespace = os.stat("/proc/self/ns/mnt").st_ino
        return f"vouch {digest} {here.st_dev} {here.st_ino} {visible} {namespace}\n".encode()

    def _watch(self, path: str, mask: int, names: frozenset[str] | None) -> None:
        wd = _add_watch(self._inotify, path, mask)
        before = self._watched.get(wd, frozenset())  # (one folder may be the config's, the functions' and the tools')
        self._watched[wd] = None if names is None or before is None else before | names

    def _unwatch(self) -> None:
        for fd in (self._inotify, self._mounts_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._inotify = self._mounts_fd = -1
        self._mounts = None
        self._watched = {}
        self._answer = None


def _local(path: str) -> bool:
    """Whether ``path`` is on a file system whose every write raises an inotify event here (/proc/self/mountinfo)."""
    real = os.path.realpath(path)
    best, kind = "", None
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            fields = line.split()
            if " - " not in line or len(fields) < 5:
                continue
            mount = fields[4].encode().decode("unicode_escape")  # (spaces and the like are octal escapes)
            fstype = line.split(" - ", 1)[1].split()[0]
            inside = real == mount or real.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best):
                best, kind = mount, fstype
    return kind in LOCAL_FILE_SYSTEMS


_libc = None


def _inotify_init() -> int:
    return _call("inotify_init1", os.O_NONBLOCK | os.O_CLOEXEC)


def _add_watch(fd: int, path: str, mask: int) -> int:
    return _call("inotify_add_watch", fd, os.fsencode(path), mask, path=path)


def _call(name: str, *args: object, path: str | None = None) -> int:
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    result: int = getattr(_libc, name)(*args)
    if result < 0:
        import ctypes

        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), path)
    return result
