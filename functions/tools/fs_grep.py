"""Search file contents with a regular expression."""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any

SKIPPED_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv"}
MAX_LINE = 500


def run(pattern: str, path: str = ".", include: str = "*", ignore_case: bool = False, limit: int = 200) -> str:
    """Search files for lines matching a regular expression; each match as "file:line:text", sorted by file.

    Directories are searched recursively, skipping .git, node_modules, __pycache__ and .venv; files
    that are not text are skipped.

    Args:
        pattern: A Python regular expression, e.g. "def \\w+_test" or "TODO|FIXME".
        path: A file, or a directory to search recursively.
        include: Only search files whose names match this glob, e.g. "*.py".
        ignore_case: Match letters of either case.
        limit: How many matching lines to return at most.

    Title: Search in files
    Summary: Find lines matching a regular expression in a file or a directory tree.
    Tags: fs, read, search
    Read-only: true
    Destructive: false
    Idempotent: true
    Open-world: false
    Examples:
        {"pattern": "TODO", "path": "src", "include": "*.py"}
        {"pattern": "^import ", "path": "main.py", "ignore_case": false}
    Errors:
        invalid regular expression: names the position of the problem
        not found: the path does not exist
    """
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        return _failed(f"invalid regular expression {pattern!r}: {exc.msg} at position {(exc.pos or 0) + 1}")
    if not os.path.exists(path):
        return _failed(f"not found: {path}")
    hits: list[str] = []
    total = 0
    for file in _files(path, include):
        for number, line in _lines(file):
            if regex.search(line):
                total += 1
                if len(hits) < limit:
                    text = line if len(line) <= MAX_LINE else line[:MAX_LINE] + " [… cut]"
                    hits.append(f"{file}:{number}:{text}\n")
    if not hits:
        return f"[no line matches {pattern} in {path}]\n"
    more = f"[showing {limit} of {total} matching lines; narrow the search or raise limit]\n" if total > limit else ""
    return "".join(hits) + more


def _files(path: str, include: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    found = []
    for directory, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        found += [os.path.join(directory, f) for f in sorted(files) if fnmatch.fnmatch(f, include)]
    return found


def _lines(file: str) -> list[tuple[int, str]]:
    try:
        with open(file, "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    if b"\0" in data[:8192]:
        return []
    return list(enumerate(data.decode("utf-8", "replace").splitlines(), start=1))


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
