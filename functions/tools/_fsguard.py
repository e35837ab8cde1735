"""What the file built-ins may read, write and remove: judged by what a path IS, never by how it is spelt.

Shared by fs_cat, fs_read, fs_grep, fs_write, fs_patch, fs_mkdir and fs_rm (each puts its own folder on
``sys.path``, as toolexec does for every Python tool). Not a tool: toolexec lists no file whose name
starts with ``_``. Standard library only, and no syntax newer than the tools' own.

Reading: only regular files are opened (a device, FIFO or socket is refused before it is opened, and
the open itself is non-blocking, so a path swapped for a FIFO cannot hang the call), never the
pseudo-files of /proc, /sys and their kind (sizes they do not keep), and always with a byte bound.

Writing and removing: toolexec's own config, functions directory (its tools and the ``.env`` files it
loads), state and cache are refused whatever the spelling (``..``, symlinks, a bind mount: paths are
resolved and directories compared by device and inode). toolexec names them in
``TOOLEXEC_PROTECTED_PATHS`` (``os.pathsep``-separated); ``fs_rm`` also never removes ``/``, a
top-level directory, the home directory or any directory above it, nor a tree holding a mount point.
"""

from __future__ import annotations

import os
import stat
import tempfile

PROTECTED_VARIABLE = "TOOLEXEC_PROTECTED_PATHS"
IDS_VARIABLE = "TOOLEXEC_PROTECTED_IDS"

# File systems whose files are not data at rest: sizes they report are not what a read returns, and
# a read may never end or may block (/proc/kmsg).
PSEUDO_FILE_SYSTEMS = frozenset(
    {
        "autofs",
        "binfmt_misc",
        "bpf",
        "cgroup",
        "cgroup2",
        "configfs",
        "debugfs",
        "devpts",
        "efivarfs",
        "fusectl",
        "mqueue",
        "nsfs",
        "proc",
        "pstore",
        "rpc_pipefs",
        "securityfs",
        "sysfs",
        "tracefs",
    }
)
_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


class Refused(Exception):
    """A path this tool will not use; the message says why (the tool's whole error)."""


# --- reading ---------------------------------------------------------------------------------


def open_regular(path: str) -> int:
    """A read-only descriptor of the regular file at ``path``; Refused for anything else."""
    try:
        before = os.stat(path)
    except FileNotFoundError:
        raise Refused(f"not found: {path}") from None
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror}") from None
    if stat.S_ISDIR(before.st_mode):
        raise Refused(f"{path} is a directory; use fs_ls or fs_glob to list it")
    _check_regular(path, before)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror}") from None
    after = os.fstat(fd)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(after.st_mode):
        os.close(fd)
        raise Refused(f"{path} changed while it was being opened; try again")
    return fd


def _check_regular(path: str, status: os.stat_result) -> None:
    for test, kind in _KINDS:
        if test(status.st_mode):
            raise Refused(f"{path} is {kind}, not a regular file; the file tools read only regular files")
    if not stat.S_ISREG(status.st_mode):
        raise Refused(f"{path} is not a regular file; the file tools read only regular files")
    fs_type = pseudo_file_system(status.st_dev)
    if fs_type:
        raise Refused(f"{path} is on {fs_type}, a pseudo file system (not a stored file); the file tools do not read it")


def is_readable_file(path: str) -> bool:
    """Whether ``path`` is a regular, stored file (for tools that skip what they cannot read)."""
    try:
        _check_regular(path, os.stat(path))
    except (OSError, Refused):
        return False
    return True


def read_chunks(fd: int, size: int = 1 << 16):
    """The file's bytes, a chunk at a time, until the end (the caller decides when to stop)."""
    while True:
        chunk = os.read(fd, size)
        if not chunk:
            return
        yield chunk


class LineReader:
    """The lines of a file read as a stream, with at most ``cut`` bytes kept of any line (so a file with no
    newline never fills memory) and at most ``max_bytes`` read (:attr:`stopped` says the end was not reached)."""

    def __init__(self, fd: int, cut: int, max_bytes: int) -> None:
        self.fd, self.cut, self.max_bytes = fd, cut, max_bytes
        self.read = 0
        self.stopped = False
        self._buffer = b""

    def _more(self) -> bool:
        if self.read >= self.max_bytes:
            self.stopped = bool(os.read(self.fd, 1))
            return False
        chunk = os.read(self.fd, min(1 << 16, self.max_bytes - self.read))
        self.read += len(chunk)
        self._buffer += chunk
        return bool(chunk)

    def __iter__(self):
        """``(line, whole)`` for each line without its ending; ``whole`` is False when bytes past ``cut`` were dropped."""
        while True:
            end = self._buffer.find(b"\n")
            while end < 0 and len(self._buffer) <= self.cut:
                if not self._more():
                    if self._buffer:
                        yield _line(self._buffer, True)
                        self._buffer = b""
                    return
                end = self._buffer.find(b"\n")
            if end >= 0 and end <= self.cut:
                line, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
                yield _line(line, True)
                continue
            line = self._buffer[: self.cut]
            while True:  # drop the rest of a long line
                end = self._buffer.find(b"\n")
                if end >= 0:
                    self._buffer = self._buffer[end + 1 :]
                    break
                self._buffer = b""
                if not self._more():
                    break
            yield line, False

    def skip(self, count: int) -> int:
        """Pass over ``count`` lines without yielding them (newlines are counted a chunk at a time); how many
        there were (fewer at the end of what is read). A partial line is kept to at most ``cut`` bytes."""
        skipped = 0
        while skipped < count:
            found = self._buffer.count(b"\n")
            if skipped + found >= count:
                at = -1
                for _ in range(count - skipped):
                    at = self._buffer.index(b"\n", at + 1)
                self._buffer = self._buffer[at + 1 :]
                return count
            skipped += found
            if found:
                self._buffer = self._buffer[self._buffer.rindex(b"\n") + 1 :]
            self._buffer = self._buffer[: self.cut]
            if not self._more():
                if self._buffer:
                    skipped += 1
                    self._buffer = b""
                return skipped
        return skipped

    def count_rest(self) -> int:
        """How many more lines there are (stops at ``max_bytes`` like the lines themselves)."""
        newlines = self._buffer.count(b"\n")
        tail = self._buffer.rsplit(b"\n", 1)[-1]
        self._buffer = b""
        while self._more():
            newlines += self._buffer.count(b"\n")
            tail = (tail + self._buffer).rsplit(b"\n", 1)[-1][-1:]
            self._buffer = b""
        return newlines + (1 if tail else 0)


def _line(data: bytes, whole: bool) -> tuple[bytes, bool]:
    return (data[:-1] if data.endswith(b"\r") else data), whole


_pseudo: dict[int, str] | None = None


def pseudo_file_system(device: int) -> str | None:
    """The type of the pseudo file system (proc, sysfs, ...) mounted with this device number, if any."""
    global _pseudo
    if _pseudo is None:
        _pseudo = {}
        for fields in _mounts():
            if fields[-1] in PSEUDO_FILE_SYSTEMS:
                major, minor = fields[0].split(":")
                _pseudo[os.makedev(int(major), int(minor))] = fields[-1]
    return _pseudo.get(device)


def _mounts() -> list[list[str]]:
    """``[device, mount point, fs type]`` of every mount this process sees (none where there is no /proc)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
            lines = table.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        before, _, after = line.partition(" - ")
        head, tail = before.split(), after.split()
        if len(head) >= 5 and tail:
            found.append([head[2], _unescape(head[4]), tail[0]])
    return found


def _unescape(field: str) -> str:
    """Mount points are written with spaces, tabs, newlines and backslashes as octal escapes."""
    if "\\" not in field:
        return field
    raw = field.encode("utf-8", "surrogateescape")
    out, index = bytearray(), 0
    while index < len(raw):
        if raw[index : index + 1] == b"\\" and raw[index + 1 : index + 4].isdigit():
            out.append(int(raw[index + 1 : index + 4], 8))
            index += 4
        else:
            out += raw[index : index + 1]
            index += 1
    return out.decode("utf-8", "surrogateescape")


# --- writing ---------------------------------------------------------------------------------


def protected_paths() -> list[str]:
    """What toolexec trusts and names for the file tools, and its functions directory in any case."""
    named = [*os.environ.get(PROTECTED_VARIABLE, "").split(os.pathsep), os.environ.get("LLM_ROOT_DIR", "")]
    return list(dict.fromkeys(os.path.realpath(p) for p in named if p))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _existing_chain(real: str) -> list[str]:
    """``real`` and every directory above it, nearest first."""
    chain = [real]
    while chain[-1] != os.path.dirname(chain[-1]):
        chain.append(os.path.dirname(chain[-1]))
    return chain


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _named_identities() -> dict[tuple[int, int], str]:
    """The identities toolexec took of what it trusts, outside any sandbox (``TOOLEXEC_PROTECTED_IDS``, one per path
    of ``TOOLEXEC_PROTECTED_PATHS``, empty where it does not exist): inside a sandbox a hidden path is an empty file,
    and only these tell that a hard link or a bind in a writable place is the real one."""
    paths = os.environ.get(PROTECTED_VARIABLE, "").split(os.pathsep)
    found = {}
    for index, item in enumerate(os.environ.get(IDS_VARIABLE, "").split(",")):
        device, _, inode = item.partition(":")
        if device.isdigit() and inode.isdigit() and index < len(paths):
            found[(int(device), int(inode))] = os.path.realpath(paths[index])
    return found


def check_writable(path: str) -> str:
    """The resolved path a write to ``path`` would change; Refused when it is (inside) what toolexec trusts."""
    real = os.path.realpath(path)
    protected = protected_paths()
    identities = {**_named_identities(), **{i: p for p in protected if (i := _identity(p)) is not None}}
    for trusted in protected:
        if _inside(real, trusted):
            _refuse_trusted(path, trusted, "" if real == trusted else "inside ")
    for step in _existing_chain(real):
        trusted = identities.get(_identity(step))  # type: ignore[arg-type]
        if trusted is not None:  # the same file or folder by another name (a bind mount, a hard link)
            _refuse_trusted(path, trusted, "" if step == real else "inside ", " (under another name)")
    return real


def _refuse_trusted(path: str, trusted: str, where: str, how: str = "") -> None:
    raise Refused(
        f"refused: {path} is {where}{trusted}{how}, which toolexec trusts (its config, tools, .env files or "
        "state); the file tools do not change it: edit it yourself"
    )


def replace_file(real: str, data: bytes) -> None:
    """Put ``data`` at ``real`` through a new file renamed over it, keeping an existing file's mode."""
    try:
        mode = os.stat(real).st_mode & 0o7777
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(real), prefix=".toolexec-write-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, real)
    except BaseException:
        os.unlink(temporary)
        raise


# --- removing --------------------------------------------------------------------------------


def _home_directories() -> set[str]:
    homes = {os.path.expanduser("~")}
    if os.environ.get("HOME"):
        homes.add(os.environ["HOME"])
    try:
        import pwd

        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        pass
    return {os.path.realpath(h) for h in homes if h}


def _never_removed() -> tuple[dict[str, str], dict[tuple[int, int], str]]:
    """Every directory fs_rm refuses, by resolved path and by identity (device, inode), with why: /, each
    top-level directory, each home and every directory above it, what toolexec trusts and every
    directory above that."""
    named: dict[str, str] = {"/": "the root directory"}
    try:
        for entry in os.scandir("/"):
            named.setdefault(os.path.realpath(entry.path), "a top-level system directory")
    except OSError:
        pass
    for home in _home_directories():
        for step in _existing_chain(home):
            named.setdefault(step, "your home directory" if step == home else "a directory holding your home directory")
    for trusted in protected_paths():
        for step in _existing_chain(trusted)[1:]:
            named.setdefault(step, f"a directory holding {trusted}, which toolexec trusts")
    identities: dict[tuple[int, int], str] = {i: f"{p} (which toolexec trusts)" for i, p in _named_identities().items()}
    for path, why in [*named.items(), *((t, "which toolexec trusts") for t in protected_paths())]:
        identity = _identity(path)
        if identity is not None:
            identities.setdefault(identity, f"{path} ({why})")
    return named, identities


def check_removable(path: str, recursive: bool) -> str:
    """The resolved path of what removing ``path`` removes (a symlink itself, not its target); Refused
    for the directories :func:`_never_removed` names, and for a tree holding one of them or a mount point."""
    raw = path.rstrip("/") or "/"
    head, name = os.path.split(raw)
    # the directory named through "." or "..", physically (as the system walks it); else the entry itself
    real = os.path.realpath(raw) if name in ("", ".", "..") else os.path.join(os.path.realpath(head or "."), name)
    named, identities = _never_removed()
    if real in named:
        raise Refused(f"refused: will not remove {real} ({named[real]})")
    if os.path.dirname(real) == "/":
        raise Refused(f"refused: will not remove {real} (a top-level system directory)")
    for trusted in protected_paths():
        if _inside(real, trusted):
            _refuse_trusted(path, trusted, "" if real == trusted else "inside ")
    if os.path.islink(real) or not os.path.isdir(real):
        return real
    same = identities.get(_identity(real))  # type: ignore[arg-type]
    if same is not None:
        raise Refused(f"refused: {path} is {same} under another name; will not remove it")
    if recursive:
        _check_tree(path, real, identities)
    return real


def _check_tree(path: str, real: str, never: dict[tuple[int, int], str]) -> None:
    """Refused when the tree under ``real`` holds a mount point or a directory fs_rm never removes."""
    for fields in _mounts():
        if _inside(fields[1], real):
            raise Refused(f"refused: {path} holds the mount point {fields[1]}; unmount it first or remove what is inside it")
    device = os.stat(real).st_dev
    for folder, dirs, _files in os.walk(real):
        for name in dirs:
            try:
                status = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if stat.S_ISLNK(status.st_mode):
                continue
            if (status.st_dev, status.st_ino) in never:
                raise Refused(f"refused: {path} holds {never[(status.st_dev, status.st_ino)]}; will not remove it")
            if status.st_dev != device:
                raise Refused(f"refused: {path} holds {os.path.join(folder, name)}, on another file system; unmount it first")
