"""Find files by glob pattern."""

from __future__ import annotations

import contextlib
import fnmatch
import os
import time
from typing import Any

MAX_DEPTH = 64  # directories below `path` that ** descends into
MAX_ENTRIES = 200_000  # directory entries looked at, in all
TIME_LIMIT = 20.0  # seconds; FS_GLOB_TIME_LIMIT (set by the user) changes it


def run(pattern: str, path: str = ".", limit: int = 500) -> str:
    """Find files and directories whose paths match a glob pattern, one per line, sorted; directories end with '/'.

    `*` matches within one name, `**` any number of directories: "**/*.py", "src/*/test_*.py".
    `**` does not follow symbolic links to directories. The search is bounded (64 directories deep,
    200,000 entries, 20 seconds); when a bound stops it, the matches found so far come with a note.

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
    Network: none
    Writes: none
    Reads: /tmp
    Env: FS_GLOB_TIME_LIMIT
    Examples:
        {"pattern": "**/*.py"}
        {"pattern": "*.md", "path": "docs"}
    Errors:
        not a directory: the search root does not exist or is a file
        invalid pattern: an absolute pattern, or an empty one
    """
    if not os.path.isdir(path):
        return _failed(f"not a directory: {path}")
    if not pattern or os.path.isabs(pattern):
        return _failed(f"invalid pattern {pattern!r}: give a pattern relative to path, e.g. '**/*.py'")
    if limit < 1:
        return _failed(f"limit must be at least 1, got {limit}")
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    if not parts:
        return _failed(f"invalid pattern {pattern!r}: it names no file or directory below path, e.g. '*' or '**/*.py'")
    walk = _Walk(path, parts)
    walk.match(path, "", 0, 0)
    found = sorted(walk.found)
    notes = (
        [f"[{walk.stopped}; the matches found until then are shown: narrow the pattern or the path]\n"] if walk.stopped else []
    )
    if walk.too_deep:
        notes.append(f"[** goes at most {MAX_DEPTH} directories deep; not searched below {walk.too_deep}]\n")
    if not found:
        return "".join(notes) or f"[no match for {pattern} in {path}]\n"
    body = "".join(f"{name}\n" for name in found[:limit])
    if len(found) > limit:
        body += f"[showing {limit} of {len(found)} matches; narrow the pattern or raise limit]\n"
    return body + "".join(notes)


class _Stop(Exception):
    pass


class _Walk:
    def __init__(self, root: str, parts: list[str]) -> None:
        self.root, self.parts = root, parts
        self.found: set[str] = set()
        self.entries = 0
        self.stopped = ""
        self.too_deep = ""  # the first directory ** did not descend into
        self.deadline = time.monotonic() + _seconds()

    def match(self, directory: str, relative: str, index: int, depth: int) -> None:
        """Add what ``parts[index:]`` matches below ``directory`` (``relative`` to the root)."""
        with contextlib.suppress(_Stop):
            self._match(directory, relative, index, depth)

    def _match(self, directory: str, relative: str, index: int, depth: int) -> None:
        part = self.parts[index]
        last = index == len(self.parts) - 1
        if part == "**":
            if last:
                self._add(relative, True)
            else:
                self._match(directory, relative, index + 1, depth)
            if depth >= MAX_DEPTH:
                self.too_deep = self.too_deep or relative
                return
            for name, is_dir, is_link in self._entries(directory):
                if is_dir and not is_link:
                    self._match(os.path.join(directory, name), _join(relative, name), index, depth + 1)
            return
        if not _magic(part):
            names = (
                [(part, os.path.isdir(os.path.join(directory, part)), False)]
                if os.path.lexists(os.path.join(directory, part))
                else []
            )
        else:
            names = [entry for entry in self._entries(directory) if fnmatch.fnmatchcase(entry[0], part)]
        for name, is_dir, _is_link in names:
            if last:
                self._add(_join(relative, name), is_dir)
            elif is_dir:
                self._match(os.path.join(directory, name), _join(relative, name), index + 1, depth + 1)

    def _entries(self, directory: str) -> list[tuple[str, bool, bool]]:
        if time.monotonic() > self.deadline:
            self._stop(f"stopped after {_seconds():g} seconds")
        try:
            with os.scandir(directory or ".") as found:
                entries = []
                for entry in found:
                    self.entries += 1
                    if self.entries > MAX_ENTRIES:
                        self._stop(f"stopped after looking at {MAX_ENTRIES} entries")
                    try:
                        entries.append((entry.name, entry.is_dir(), entry.is_symlink()))
                    except OSError:
                        continue
                return entries
        except OSError:
            return []

    def _add(self, relative: str, is_dir: bool) -> None:
        if relative:
            self.found.add(relative + ("/" if is_dir else ""))

    def _stop(self, why: str) -> None:
        self.stopped = why
        raise _Stop


def _join(relative: str, name: str) -> str:
    return f"{relative}/{name}" if relative else name


def _magic(part: str) -> bool:
    return any(c in part for c in "*?[")


def _seconds() -> float:
    try:
        return max(float(os.environ.get("FS_GLOB_TIME_LIMIT", "")), 0.01)
    except ValueError:
        return TIME_LIMIT


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
