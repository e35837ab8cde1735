"""Read part of a text file with line numbers."""

from __future__ import annotations

import os
from typing import Any

from _fsguard import LineReader, Refused, open_regular

MAX_LINE = 2000  # characters shown of one line; longer lines end with a marker
MAX_SCAN = 256 * 1024 * 1024  # bytes read at most: past them lines are neither shown nor counted


def run(path: str, offset: int = 1, limit: int = 2000) -> str:
    """Read a text file and return its lines numbered like `cat -n`, from line `offset`, at most `limit` of them.

    When not every line is shown, a last line says which were shown and how to read on. The file is
    read as a stream: at most its first 256 MiB, and only regular files (devices, FIFOs, sockets and
    the pseudo-files of /proc and /sys are refused).

    Args:
        path: The file to read.
        offset: The first line to show (1 is the first line of the file).
        limit: How many lines to show at most.

    Title: Read file lines
    Summary: Read a text file with line numbers, from an offset, up to a limit.
    Tags: fs, read
    Read-only: true
    Destructive: false
    Idempotent: true
    Open-world: false
    Network: none
    Writes: none
    Reads: /tmp
    Examples:
        {"path": "README.md"}
        {"path": "src/main.py", "offset": 120, "limit": 40}
    Errors:
        not found: the file does not exist
        is a directory: use fs_ls or fs_glob for directories
        not a text file: the file holds NUL bytes
        not a regular file: a device, FIFO, socket or pseudo-file
    """
    if offset < 1 or limit < 1:
        return _failed(f"offset ({offset}) and limit ({limit}) must both be at least 1")
    try:
        fd = open_regular(path)
    except Refused as exc:
        return _failed(str(exc))
    try:
        return _numbered(path, fd, offset, limit)
    except Refused as exc:
        return _failed(str(exc))
    except OSError as exc:
        return _failed(f"cannot read {path}: {exc.strerror}")
    finally:
        os.close(fd)


def _numbered(path: str, fd: int, offset: int, limit: int) -> str:
    if b"\0" in os.pread(fd, 8192, 0):
        raise Refused(f"{path} is not a text file (it holds NUL bytes)")
    lines = LineReader(fd, cut=MAX_LINE * 4, max_bytes=MAX_SCAN)  # 4 bytes a character at most
    shown: list[str] = []
    count = lines.skip(offset - 1)
    if count == offset - 1:
        for raw, whole in lines:
            shown.append(_cut(raw.decode("utf-8", "replace"), whole))
            if len(shown) == limit:
                break
        count += len(shown)
    count += lines.count_rest()
    if count == 0:
        return f"[{path} is empty]\n"
    counted = f"at least {count} (only the first {MAX_SCAN} bytes are read)" if lines.stopped else str(count)
    if not shown and lines.stopped:
        return (
            f"[offset {offset} is past line {count}, where the first {MAX_SCAN} bytes of {path} end; fs_read reads no further]\n"
        )
    if not shown:
        return f"[{path} has {counted} line(s); offset {offset} is past the end]\n"
    width = len(str(offset + len(shown) - 1))
    body = "".join(f"{number:>{width}}\t{line}\n" for number, line in enumerate(shown, start=offset))
    last = offset + len(shown) - 1
    if offset > 1 or last < count or lines.stopped:
        more = f"; read on with offset={last + 1}" if last < count else ""
        body += f"[showing lines {offset}-{last} of {counted}{more}]\n"
    return body


def _cut(line: str, whole: bool) -> str:
    if len(line) <= MAX_LINE and whole:
        return line
    return line[:MAX_LINE] + f" [… line cut at {MAX_LINE} characters]"


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
