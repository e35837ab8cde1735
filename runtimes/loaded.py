"""What a warm server loaded from disk besides the tool's own source, and whether any of it changed since.

A warm server (a Python zygote, a Bash server or its spares, a Node spare) keeps the modules the tool imported or
sourced when it loaded: a sibling ``helpers.py``, a package beside the tool, ``./lib.ts`` (its cached transpile),
``./lib.js``, a sourced ``lib.sh``. Its key covers the tool's own source text only, so each server says which
files it loaded (:func:`parse`) and its host keeps their identities (:class:`Loaded`); before a call is handed to
the server they are looked at again, one ``stat`` each, and a server whose files changed (edited, replaced,
deleted, swapped for a symlink) is replaced: the call runs in a new server, which loads what is on disk now.

An identity is (device, inode, size, mtime, ctime): ctime changes with every write, rename or change of mode, and
a file replaced (an editor's rename, a symlink) has another inode. What one stat cannot tell apart is a change in
the same tick of the file system's clock as the one before it (git's "racily clean" entries): the kernel stamps
files from a coarse clock, and some file systems keep whole seconds. So identities are taken after the server has
loaded, and a file whose ctime or mtime is within :data:`RACY_NS` of the server's start (or later; 2 s on a file
system that keeps whole seconds) proves nothing:
such a server serves only the calls that were waiting for its start (they began before it read anything), and the
next call starts another. Whatever a server serves, it loaded after the call's start or it still matches the files
as they were when the call started: the call runs the code that was on disk when it started, as a cold call does
(a file edited after that check, during the call, is read by the next call).
"""

from __future__ import annotations

import contextlib
import os
import select
import time

from toolexec.recordtype import record

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Iterable

# A file changed this close to a server's start (or after it) may have been changed again in the same tick of the
# file system's clock: the kernel stamps files from a clock that lags by a tick (<= 10 ms at HZ=100); a file system
# that keeps whole seconds (times with no fraction: FAT, some network file systems) is given 2 s.
RACY_NS = 20_000_000
COARSE_RACY_NS = 2_000_000_000
# Most files a server's record holds: a tool that loads more (a whole library outside site-packages) is checked by
# these only would be unsound, so past it the server serves only the calls that waited for its start (each call of
# the tool then starts its own, as a cold call would load them all).
MOST_FILES = 512
READY_BYTES = 1 << 20  # the longest ready word: R and the files a server loaded (a longer list ends in "+")
WORD_END = b"\0\0"  # ends a ready word (no file named there is empty, so the word holds no two NULs in a row)

Identity = tuple[int, int, int, int, int]


def identity(path: str) -> Identity | None:
    """(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) of ``path`` (through symlinks: what a loader opens), or None
    when it cannot be read (deleted, a dangling link, a directory meanwhile)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@record
class Loaded:
    """The files one warm server loaded, as they were once it had (see the module's docstring)."""

    files: tuple[tuple[str, Identity | None], ...]
    started: int  # time.monotonic_ns() just before the server started
    # No proof that the server holds what the files hold now (a file changed too close to its start, or too many):
    # it serves only calls that began before ``started``.
    racy: bool = False

    def serves(self, began: int) -> bool:
        """Whether a call that began at ``began`` (``time.monotonic_ns()``) may run in this server: it began before the
        server started, or the record holds and no file changed since."""
        if began < self.started:
            return True
        if self.racy:
            return False
        return all(identity(path) == known for path, known in self.files)


def taken(paths: Iterable[str] | None, started: int, started_wall: int) -> Loaded:
    """The record of ``paths`` (absolute; duplicates and empty ones dropped; None: the server could not list them all),
    loaded by a server started at ``started`` (monotonic ns) and ``started_wall`` (``time.time_ns()``, the clock file
    times are stamped from)."""
    seen: dict[str, Identity | None] = {}
    for path in paths or ():
        if path and path not in seen:
            seen[path] = identity(path)
    racy = paths is None or len(seen) > MOST_FILES
    for known in seen.values():
        racy = racy or _racy(known, started_wall)
    return Loaded(files=tuple(seen.items()), started=started, racy=racy)


def _racy(known: Identity | None, wall: int) -> bool:
    """Whether a file's identity proves nothing about what a server started at ``wall`` read (a file gone already:
    the next call's server says why, its load failing)."""
    return known is None or racy(known[3], known[4], wall)


def racy(mtime_ns: int, ctime_ns: int, wall: int) -> bool:
    """Whether a file stamped ``mtime_ns``/``ctime_ns`` may have changed again unseen after ``wall`` (``time.time_ns()``
    when its reader started): it was stamped within a tick of the file system's clock of it, or later."""
    whole = mtime_ns % 1_000_000_000 == 0 and ctime_ns % 1_000_000_000 == 0
    return max(mtime_ns, ctime_ns) >= wall - (COARSE_RACY_NS if whole else RACY_NS)


def parse(data: bytes) -> list[str] | None:
    """The paths a server's ready word lists after its first byte (``R``): NUL-separated, absolute ones only; None when
    the list ends in ``+`` (the server loaded more than it could say)."""
    names = data[1:].split(b"\0") if len(data) > 1 else []
    if names and names[-1] == b"+":
        return None
    return [name for name in (os.fsdecode(raw) for raw in names) if os.path.isabs(name)]


def read_word(fd: int, timeout: float, pid: int = 0) -> bytes:
    """What a server writes on its ready pipe, up to its end (:data:`WORD_END`) or until the pipe closes (b"" when
    nothing came within ``timeout``). A process the tool's top level started holds the pipe open as long as it
    runs, so the end is not the pipe's: with ``pid`` (the server, a child of this process) the word also ends when
    that process has, whatever else holds the pipe."""
    data = b""
    deadline = time.monotonic() + timeout
    watched = [fd]
    if pid > 0:
        with contextlib.suppress(OSError, AttributeError):
            watched.append(os.pidfd_open(pid))
    try:
        while readable := select.select(watched, [], [], max(0.0, deadline - time.monotonic()))[0]:
            if fd not in readable and not select.select([fd], [], [], 0)[0]:  # the server ended, its word unended
                return data if data[:1] != b"R" else b""  # (its failure said; a ready word in part says nothing)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return data
            data += chunk
            if data.endswith(WORD_END):
                return data[: -len(WORD_END)]
            if len(data) > READY_BYTES:  # too many files to say: the server is trusted with no later call
                return data[:1] + b"\0+"
        return b""
    finally:
        for extra in watched[1:]:
            os.close(extra)


def clocks() -> tuple[int, int]:
    """(monotonic, wall) nanoseconds now: taken just before a server starts."""
    return time.monotonic_ns(), time.time_ns()
