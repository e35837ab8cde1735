"""A call's private files: ``LLM_OUTPUT``, the failure channel, ``LLM_ARTIFACTS_DIR`` and, for a call that can ask,
``LLM_INPUT_REQUEST``.

Each set is made fresh (files 0600, the directory 0700, as ``tempfile.mkstemp``/``mkdtemp`` make them and where they
would, without importing ``tempfile`` and ``random``) and removed after the call, whatever the tool made of it.

A :class:`FilePool` (a :class:`~toolexec.calls.Calls` with warm tools keeps one) spares a warm call that work: its
sets live in a private directory of the pool's, and a set is used again by the next call of the same tool only when
no process can still hold it and it is exactly as made:

* the call was **sealed**: it ran in a PID namespace of its own whose init had ended before its status (reaped by its
  server, or seen ended for a cold call: :attr:`toolexec.runtimes.process.Finished.sealed`), so every process of the
  call had ended, its descriptors closed. A process outside the namespace may still hold one: a confined call cannot
  make a Unix socket to pass it through (its seccomp filter), but a tool under the baseline alone, which keeps the
  user's authority, can pass its ``LLM_OUTPUT`` and artifacts directory to a process outside that keeps them and
  writes into the next call's (as it could open them by name: see docs/sandbox.md);
* each file is still the inode made (no link followed), a regular file with one link, 0600, and the directory the
  one made, 0700 and empty. Then the files are truncated; anything else (a file replaced, moved away to keep a long
  output, linked elsewhere, a chmod, an artifact left) and the set is removed as a fresh one is. (A file the sealed
  call put in the place of its own that got the same inode number and passes every check is as private: no process
  holds it and no other name links it.)

Making and removing three names per call in a large ext4 ``/tmp`` took ~0.45 ms (more under load: each waits for
the journal); a reuse takes a few system calls. The pool's directory is removed when the pool is closed, and by the
process's guard should the process die (:func:`toolexec.runtimes.process_linux.remove_at_death`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import weakref

from toolexec.runtimes.chores import Chores
from toolexec.runtimes.private import guarded, private_path

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["CallFiles", "FilePool", "call_files"]

KEPT_PER_TOOL = 4  # sets kept for each tool (and asking or not): as many as its calls that usually overlap


class CallFiles:
    """The private files of one call, and how to tell they are still the ones made."""

    __slots__ = ("artifacts", "asking", "failure", "made", "output", "pooled", "request", "sealed", "tool", "within")

    def __init__(self, tool: str, paths: list[str], *, pooled: bool) -> None:
        self.tool = tool
        self.output, self.failure, self.artifacts = paths[0], paths[1], paths[2]
        self.request: str | None = paths[3] if len(paths) > 3 else None
        self.asking = self.request is not None
        self.pooled = pooled  # made in a pool's directory: may be kept for the next call
        self.sealed = False  # set once the call ran sealed (no process of it can be left): it may be kept
        self.made = _identities(self.paths) if pooled else ()
        self.within: str | None = None  # made in a directory not the pool's (FilePool.take's within): kept by it

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path of the set: the files and the directory, the request file last when there is one."""
        return (self.output, self.failure, self.artifacts, *([self.request] if self.request else []))

    def artifacts_empty(self) -> bool:
        """Whether the tool left nothing in its artifacts directory: one ``rmdir`` for a set that is removed anyway
        (nothing more is imported, listed or read), one look for a pooled set; a directory with files in it (or gone,
        or replaced) is for :func:`toolexec.artifacts.collect`."""
        if not self.pooled:
            try:
                os.rmdir(self.artifacts)
            except OSError:
                return False
            return True
        return _empty_directory(self.artifacts, self.made[2] if self.made else None)

    def reset(self) -> bool:
        """Truncate the set for the next call when it is exactly as made (see the module); False when it is not."""
        if not self.pooled or not self.made:
            return False
        for path, made in zip(self.paths, self.made, strict=True):
            if path == self.artifacts:
                if not _empty_directory(path, made):
                    return False
            elif not _truncated(path, made):
                return False
        return True

    def remove(self) -> None:
        """Remove every file of the set, whatever the tool made of it (never through a link)."""
        for path in self.paths:
            _remove(path, directory=path == self.artifacts)


class FilePool:
    """Call file sets kept between the sealed calls of each tool, in a private directory removed at :meth:`close` (or,
    when calls still use sets of it then, once the last of them has given its set back)."""

    def __init__(self, kept_per_tool: int = KEPT_PER_TOOL) -> None:
        self.kept_per_tool = kept_per_tool
        self._lock = threading.Lock()
        self._free: dict[tuple[str, bool, str | None], list[CallFiles]] = {}
        self._directory: str | None = None
        self._out = 0  # sets of the pool's directory in use by a call
        self._closed = False
        self._owner = os.getpid()  # a process forked from it makes its own sets: the kept ones are its parent's
        self._chores = Chores("toolexec-call-files")  # what give_back leaves for after the call
        self._finalizer: weakref.finalize[[str, int], FilePool] | None = None

    def take(self, tool: str, asking: bool, within: str | None = None) -> CallFiles:
        """A kept set of ``tool``'s, else a new one made in the pool's directory, or in ``within`` (a confined warm
        server's calls' directory); a fresh one in the temporary directory once the pool is closed."""
        with self._lock:
            if self._closed or os.getpid() != self._owner:
                directory = None
            else:
                free = self._free.get((tool, asking, within))
                self._out += 1
                if free:
                    return free.pop()
                if within is not None:
                    directory = within
                elif self._directory is None:
                    try:
                        self._directory = _made_directory()
                    except BaseException:
                        self._out -= 1
                        raise
                    # a pool collected unclosed (its executor never closed) takes its directory with it
                    self._finalizer = weakref.finalize(self, _remove_tree, self._directory, self._owner)
                if within is None:
                    directory = self._directory
        try:
            files = _fresh(tool, asking, directory)
        except BaseException:
            if directory is not None:
                self._returned()
            raise
        files.within = within if directory is not None else None
        return files

    def give_back(self, files: CallFiles) -> None:
        """``files`` after its call, off the call's path (see :meth:`_tidy`): kept when the call was sealed and
        :meth:`CallFiles.reset` succeeds, else removed and, in its place, a fresh set made for the tool's next call. A
        set not of the pool's directory is removed at once; so is any set once the pool is closed."""
        if not files.pooled:
            files.remove()
            return
        with self._lock:
            later = not self._closed and os.getpid() == self._owner
        if later:
            self._chores.add(lambda: self._tidy(files))
        else:
            self._tidy(files)

    def settle(self, timeout: float | None = 10.0) -> bool:
        """Wait (up to ``timeout`` seconds) until every set given back is kept or removed; whether it is."""
        return self._chores.drain(timeout)

    def _tidy(self, files: CallFiles) -> None:
        """Keep ``files`` for the next call of its tool when its call was sealed and it is exactly as made; else remove
        it, and make a fresh set in its place (a set no process has seen, as good as one made on the next call's
        path, which then takes it)."""
        key = (files.tool, files.asking, files.within)
        if files.sealed and files.reset():
            with self._lock:
                free = self._free.setdefault(key, [])
                if not self._closed and len(free) < self.kept_per_tool:
                    files.sealed = False
                    free.append(files)
                    self._out -= 1
                    return
        files.remove()
        self._returned()
        self._make_ahead(key)

    def _make_ahead(self, key: tuple[str, bool, str | None]) -> None:
        """A fresh set for ``key``'s next call (in its ``within`` directory, else the pool's), unless the pool is closed
        or one is kept for it already."""
        with self._lock:
            directory = key[2] if key[2] is not None else self._directory
            if self._closed or self._free.get(key) or directory is None:
                return
            self._out += 1
        try:
            made = _fresh(key[0], key[1], directory)
        except BaseException:
            self._returned()
            raise
        made.within = key[2]
        with self._lock:
            if not self._closed:
                self._free.setdefault(key, []).append(made)
                self._out -= 1  # (counted while it was made: the directory stays meanwhile) kept, as a reset set is
                return
        made.remove()
        self._returned()

    def close(self) -> None:
        """Remove every kept set, and the pool's directory once no call uses a set of it; later sets are made fresh
        and removed after their call. Closing twice is harmless."""
        self.settle()  # the sets given back are kept or removed first (a fresh one made meanwhile is kept too)
        with self._lock:
            self._closed = True
            kept = [files for free in self._free.values() for files in free]
            self._free.clear()
            if os.getpid() != self._owner:  # a forked copy: what it lists is its parent's to remove
                self._directory, kept = None, []
        for files in kept:
            files.remove()
        self._returned(0)

    def _returned(self, count: int = 1) -> None:
        """``count`` sets of the pool's directory are no longer in use: the directory goes once the pool is closed and
        none is."""
        with self._lock:
            self._out -= count
            directory = self._directory if self._closed and self._out == 0 else None
            if directory is not None:
                self._directory = None
        if directory is not None:
            if self._finalizer is not None:
                self._finalizer.detach()
            _remove(directory, directory=True)
            guarded(directory, False)


@contextlib.contextmanager
def call_files(
    tool: str,
    asking: bool = False,
    pool: FilePool | None = None,
    *,
    made: Sequence[str] | None = None,
    within: str | None = None,
) -> Iterator[CallFiles]:
    """The private files of one call of ``tool`` (the request file only when ``asking``): ``made`` when given (a
    sandbox set up ahead made them, :func:`new_call_files`), else made fresh in ``within`` when given (a confined warm
    server's calls' directory, :meth:`toolexec.runtimes.warm.WarmPool.home`), else from ``pool`` when given (kept
    afterwards when the call was sealed: set ``sealed`` on them), else made fresh; removed afterwards unless pooled.
    StateUnavailable when no temporary directory takes them."""
    if made is not None:
        pool = None
        files = CallFiles(tool, list(made), pooled=False)
    elif within is not None and pool is None:
        files = _fresh(tool, asking, within, pooled=False)
    elif pool is not None:
        files = pool.take(tool, asking, within)
    else:
        files = _fresh(tool, asking, None)
    try:
        yield files
    finally:
        if pool is not None:
            pool.give_back(files)
        else:
            files.remove()


def new_call_files(tool: str, asking: bool = False) -> tuple[str, ...]:
    """The paths of a new set of a call's private files (as :func:`call_files` makes them), for a sandbox set up ahead
    of the call to bind; the call that takes them removes them (``call_files(made=...)``)."""
    return _fresh(tool, asking, None).paths


def _fresh(tool: str, asking: bool, directory: str | None, *, pooled: bool = True) -> CallFiles:
    paths: list[str] = []
    try:
        for suffix in (".out", ".failure", ".artifacts", *([".ask"] if asking else [])):
            paths.append(private_path(f"toolexec-{tool}-", suffix, directory=suffix == ".artifacts", within=directory))
        return CallFiles(tool, paths, pooled=pooled and directory is not None)
    except BaseException:
        for path in paths:
            _remove(path, directory=path.endswith(".artifacts"))
        raise


def _made_directory() -> str:
    """The pool's directory (0700, in the temporary directory), which the guard removes should this process die."""
    directory = private_path("toolexec-calls-", "", directory=True)
    guarded(directory, True)
    return directory


def _remove_tree(directory: str, owner: int) -> None:
    """Remove a collected pool's directory and the sets kept in it (no call uses one: a call holds its pool)."""
    if os.getpid() != owner:  # a forked copy's: its parent's to remove
        return
    import shutil

    shutil.rmtree(directory, ignore_errors=True)
    guarded(directory, False)


def _identities(paths: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    """(device, inode) of each path as made (no link followed)."""
    found = []
    for path in paths:
        info = os.lstat(path)
        found.append((info.st_dev, info.st_ino))
    return tuple(found)


def _truncated(path: str, made: tuple[int, int]) -> bool:
    """Empty the file at ``path`` when it is the regular file ``made`` (one link, 0600, ours); else False."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not _as_made(info, made, 0o600) or not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return False
        if info.st_size:
            os.ftruncate(fd, 0)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _empty_directory(path: str, made: tuple[int, int] | None) -> bool:
    """Whether ``path`` is the directory ``made`` (0700, ours), with nothing in it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if made is not None and not _as_made(os.fstat(fd), made, 0o700):
            return False
        with os.scandir(fd) as entries:
            return next(entries, None) is None
    except OSError:
        return False
    finally:
        os.close(fd)


def _as_made(info: os.stat_result, made: tuple[int, int], mode: int) -> bool:
    return (info.st_dev, info.st_ino) == made and stat.S_IMODE(info.st_mode) == mode and info.st_uid == os.geteuid()


def _remove(path: str, *, directory: bool) -> None:
    """Remove one of a call's files or a directory, whatever the tool made of it (never through a link)."""
    try:
        os.rmdir(path) if directory else os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError:  # a file in the directory's place or a directory in the file's, or files left in the directory
        if os.path.islink(path) or not os.path.isdir(path):
            with contextlib.suppress(OSError):
                os.unlink(path)
            return
        import shutil

        shutil.rmtree(path, ignore_errors=True)
