"""The audit log: one JSON line per call, appended atomically (``audit_log:`` in config.yaml).

Each line says when, which tool, the call id, a digest of the arguments (the arguments themselves
only with ``arguments: true``), the outcome and its reason, the duration, the effective sandbox
policy, and who asked (the surface, the OS user, the MCP client and the token's subject). A line is
written with one ``write`` under an exclusive ``flock`` on a descriptor opened with ``O_APPEND``, so
lines of concurrent processes never interleave; the file is opened for each line, so ``logrotate``
may move it at any time (docs/operations.md).
"""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = ["append_line", "digest"]


def digest(arguments: Any) -> str:
    """``sha256:`` of the arguments as canonical JSON (sorted keys, no spaces), so equal arguments match."""
    import hashlib  # only an audited call hashes

    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def timestamp(wall: float) -> str:
    """RFC 3339 in UTC with milliseconds."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall))
    return f"{seconds}.{int(wall * 1000) % 1000:03d}Z"


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one line; an OSError is the caller's to report (the call's result is not changed)."""
    import fcntl

    line = (json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        written = 0
        while written < len(line):  # one write in practice; a short one (a full disk) goes on where it stopped
            written += os.write(fd, line[written:])
    finally:
        os.close(fd)  # releases the lock
