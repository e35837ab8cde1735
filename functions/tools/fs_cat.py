"""Read a whole (bounded) text file."""

from __future__ import annotations

import codecs
import os
from typing import Any

from _fsguard import Refused, open_regular, read_chunks

MAX_BYTES = 256 * 1024  # what one call returns at most; fs_read reads on from any line


def run(path: str) -> str:
    """Read a text file and return its contents (at most 256 KiB; a longer file is cut there, with a note).

    Use it to look at configuration files, source code or notes. Only regular files are read: devices,
    FIFOs, sockets and the pseudo-files of /proc and /sys are refused.

    Args:
        path: File to read.

    Title: Read file
    Summary: Return the contents of a text file (up to 256 KiB).
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
    Errors:
        not found: the path does not exist
        is a directory: use fs_ls or fs_glob for directories
        not a regular file: a device, FIFO, socket or pseudo-file
    """
    try:
        fd = open_regular(path)
    except Refused as exc:
        return _failed(str(exc))
    data = bytearray()
    try:
        for chunk in read_chunks(fd):
            data += chunk
            if len(data) > MAX_BYTES:
                break
    except OSError as exc:
        return _failed(f"cannot read {path}: {exc.strerror}")
    finally:
        os.close(fd)
    cut = len(data) > MAX_BYTES
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(bytes(data[:MAX_BYTES]), final=not cut)
    if cut:
        text += f"\n[… cut: {path} is longer than {MAX_BYTES} bytes; read on with fs_read (offset, limit)]\n"
    return text


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
