"""The stats a no-change check compares, as bytes: the one loop behind :func:`toolexec.catalog.files_digest`.

It imports nothing of toolexec, so that a child forked before toolexec imports itself (:mod:`toolexec.early_stats`)
runs it as the command's own check would.
"""

from __future__ import annotations

import os
from array import array
from stat import S_ISLNK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["stat_bytes"]


def stat_bytes(tools_dir: str | bytes, files: Iterable[str] | Iterable[bytes], *, links: bool = True) -> bytes | None:
    """The mtime, ctime, size and inode of each of ``files`` (relative to ``tools_dir``), in order, packed: what
    :func:`toolexec.catalog.files_digest` hashes. With ``links=False``, None when one of them is a symbolic link.

    A missing file (or a name no stat takes) counts as mtime and ctime -1, size and inode 0, as
    :func:`toolexec.catalog.file_stat`'s None does. Names may be given encoded, as bytes (the system call takes
    them as they are: :mod:`toolexec.early_stats`'s child decodes none). The loop is the cheapest form of it (names
    relative to one open directory, no path joined, no tuple kept): the system call is most of its cost.
    """
    times, sizes = array("q"), array("Q")  # mtime and ctime may be negative; size and inode may use 64 bits
    add_times, add_sizes = times.extend, sizes.extend
    stat = os.stat
    try:
        folder = os.open(tools_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # no folder: every file is missing (never a name looked up elsewhere, as in the working directory)
        for _ in files:
            add_times((-1, -1))
            add_sizes((0, 0))
        return times.tobytes() + b"\0" + sizes.tobytes()
    try:
        for file in files:
            try:
                st = stat(file, dir_fd=folder, follow_symlinks=links)
            except (OSError, ValueError):  # missing, or a name no stat takes: as file_stat says, no stat
                add_times((-1, -1))
                add_sizes((0, 0))
                continue
            if not links and S_ISLNK(st.st_mode):
                return None
            add_times((st.st_mtime_ns, st.st_ctime_ns))
            add_sizes((st.st_size, st.st_ino))
    finally:
        os.close(folder)
    return times.tobytes() + b"\0" + sizes.tobytes()
