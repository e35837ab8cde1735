"""Create a directory and its parents."""

from __future__ import annotations

import os
from typing import Any

from _fsguard import Refused, check_writable


def run(path: str) -> str:
    """Create a directory, and any missing parent directories; an existing directory is fine.

    Args:
        path: The directory to create.

    Title: Make directory
    Summary: Create a directory with its parents (like mkdir -p).
    Tags: fs, write
    Read-only: false
    Destructive: false
    Idempotent: true
    Open-world: false
    Network: none
    Writes: cwd, /tmp
    Examples:
        {"path": "build/reports"}
    Errors:
        exists and is not a directory: a file of that name is in the way
        refused: the path is toolexec's own config, tools, .env files or state
    """
    try:
        real = check_writable(path)
    except Refused as exc:
        return _failed(str(exc))
    if os.path.lexists(real) and not os.path.isdir(real):
        return _failed(f"{path} exists and is not a directory")
    try:
        os.makedirs(real, exist_ok=True)
    except OSError as exc:
        return _failed(f"cannot create {path}: {exc.strerror}")
    return f"created {path}\n"


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
