"""Find files by glob pattern."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def run(pattern: str, path: str = ".", limit: int = 500) -> str:
    """Find files and directories whose paths match a glob pattern, one per line, sorted; directories end with '/'.

    `*` matches within one name, `**` any number of directories: "**/*.py", "src/*/test_*.py".

    Args:
        pattern: The glob pattern, relative to `path`.
        path: The directory to search from.
        limit: How many matches to return at most.

    Title: Find files
    Summary: Find files by glob pattern (** for any depth).
    Tags: fs, read, search
    Read-only: true
    Destructive: false
    Idempotent: true
    Open-world: false
    Examples:
        {"pattern": "**/*.py"}
        {"pattern": "*.md", "path": "docs"}
    Errors:
        not a directory: the search root does not exist or is a file
        invalid pattern: an absolute pattern, or an empty one
    """
    root = Path(path)
    if not root.is_dir():
        return _failed(f"not a directory: {path}")
    if not pattern or os.path.isabs(pattern):
        return _failed(f"invalid pattern {pattern!r}: give a pattern relative to path, e.g. '**/*.py'")
    try:
        found = sorted(
            (p.relative_to(root).as_posix() + ("/" if p.is_dir() else "") for p in root.glob(pattern)),
        )
    except (ValueError, NotImplementedError) as exc:
        return _failed(f"invalid pattern {pattern!r}: {exc}")
    if not found:
        return f"[no match for {pattern} in {path}]\n"
    body = "".join(f"{name}\n" for name in found[:limit])
    if len(found) > limit:
        body += f"[showing {limit} of {len(found)} matches; narrow the pattern or raise limit]\n"
    return body


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
