"""Remove a file, or a directory tree."""

from __future__ import annotations

import os
import shutil
from typing import Any

from _fsguard import Refused, check_removable


def run(path: str, recursive: bool = False) -> str:
    """Remove a file, or a directory with everything in it when --recursive is given.

    This cannot be undone. A symbolic link is removed itself, never what it points to. Never removed,
    whatever the spelling (.., symlinks, bind mounts): /, a top-level directory, your home directory or
    any directory above it, toolexec's own config, tools, .env files and state, and a tree that holds
    a mount point.

    Args:
        path: The file or directory to remove.
        recursive: Remove a directory and all its contents.

    Title: Remove file or directory
    Summary: Delete a file, or a directory tree with --recursive.
    Tags: fs, write, delete
    Read-only: false
    Destructive: true
    Idempotent: true
    Open-world: false
    Network: none
    Writes: cwd, /tmp
    Examples:
        {"path": "build/old.log"}
        {"path": "build/tmp", "recursive": true}
    Errors:
        not found: nothing exists at the path
        is a directory: give recursive to remove a directory
        refused: the root, a top-level or home directory (or above it), toolexec's own files, a mount point
    """
    try:
        real = check_removable(path, recursive)  # first: what toolexec trusts is refused even where it is hidden
        if not os.path.lexists(path):
            return _failed(f"not found: {path}")
        if os.path.isdir(real) and not os.path.islink(real):
            if not recursive:
                return _failed(f"{path} is a directory; set recursive to remove it and everything in it")
            shutil.rmtree(real)
        else:
            os.unlink(real)
    except Refused as exc:
        return _failed(str(exc))
    except OSError as exc:
        return _failed(f"cannot remove {getattr(exc, 'filename', None) or path}: {exc.strerror}")
    return f"removed {path}\n"


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
