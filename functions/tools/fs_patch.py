"""Apply a unified diff to one file."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
FUZZ = 200  # how many lines away from its stated position a hunk's context may be found


@dataclass
class Hunk:
    header: str
    start: int  # 1-based line in the old file
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)


def run(path: str, patch: str) -> str:
    """Edit a file by applying a unified diff (the output of `diff -u` or `git diff`) to it.

    Every hunk must match the file (its context and removed lines, found at the stated line or
    nearby); if any hunk does not match, the file is left unchanged. The `---`/`+++` header lines
    are optional and their file names are ignored: the diff applies to `path`.

    Args:
        path: The file to change.
        patch: The unified diff: one or more hunks starting with "@@ -OLD,COUNT +NEW,COUNT @@".

    Title: Patch file
    Summary: Apply a unified diff to a file, all hunks or none.
    Tags: fs, write, edit
    Read-only: false
    Destructive: true
    Idempotent: false
    Open-world: false
    Examples:
        {"path": "greeting.txt", "patch": "@@ -1,2 +1,2 @@\\n hello\\n-world\\n+there\\n"}
    Errors:
        not found: the file does not exist
        no hunks: the patch holds no "@@" hunk header
        hunk does not match: names the hunk and the first line that differs
    """
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            text = handle.read()
    except FileNotFoundError:
        return _failed(f"not found: {path}")
    except (OSError, UnicodeDecodeError) as exc:
        return _failed(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
    try:
        hunks = _parse(patch)
        lines = text.splitlines(keepends=False)
        ending = "\r\n" if "\r\n" in text else "\n"
        result = _apply(lines, hunks)
    except ValueError as exc:
        return _failed(str(exc))
    new_text = ending.join(result) + (ending if result and (text.endswith(("\n", "\r")) or not text) else "")
    _write_atomic(path, new_text)
    added = sum(len(h.new) for h in hunks) - sum(len(h.old) for h in hunks)
    return f"applied {len(hunks)} hunk(s) to {path}; it now has {len(result)} line(s) ({added:+d})\n"


def _parse(patch: str) -> list[Hunk]:
    hunks: list[Hunk] = []
    for number, line in enumerate(patch.splitlines(), start=1):
        found = _HUNK.match(line)
        if found:
            hunks.append(Hunk(header=line.split("@@")[1].strip(), start=int(found.group(1))))
        elif line.startswith(("--- ", "+++ ", "diff ", "index ", "\\ ")) and (not hunks or line.startswith("\\ ")):
            continue
        elif not hunks:
            if line.strip():
                raise ValueError(f"patch line {number}: expected a hunk header '@@ -OLD,COUNT +NEW,COUNT @@', found {line!r}")
        elif line.startswith(" ") or line == "":
            hunks[-1].old.append(line[1:])
            hunks[-1].new.append(line[1:])
        elif line.startswith("-"):
            hunks[-1].old.append(line[1:])
        elif line.startswith("+"):
            hunks[-1].new.append(line[1:])
        else:
            raise ValueError(f"patch line {number}: a hunk line must start with ' ', '-' or '+', found {line!r}")
    if not hunks:
        raise ValueError("no hunks: the patch holds no '@@ -OLD,COUNT +NEW,COUNT @@' header")
    return hunks


def _apply(lines: list[str], hunks: list[Hunk]) -> list[str]:
    result: list[str] = []
    position = 0  # index into lines of the first line not yet copied
    for number, hunk in enumerate(hunks, start=1):
        at = _find(lines, hunk, position)
        if at is None:
            raise ValueError(_mismatch(lines, hunk, number))
        result += lines[position:at] + hunk.new
        position = at + len(hunk.old)
    return result + lines[position:]


def _find(lines: list[str], hunk: Hunk, earliest: int) -> int | None:
    """Where the hunk's old lines are: at the stated line, else the nearest place within FUZZ lines."""
    stated = max(hunk.start - 1, 0) if hunk.old else hunk.start
    for distance in range(FUZZ + 1):
        for at in {stated - distance, stated + distance}:
            if earliest <= at <= len(lines) - len(hunk.old) and lines[at : at + len(hunk.old)] == hunk.old:
                return at
    return None


def _mismatch(lines: list[str], hunk: Hunk, number: int) -> str:
    stated = max(hunk.start - 1, 0)
    for offset, expected in enumerate(hunk.old):
        actual = lines[stated + offset] if stated + offset < len(lines) else None
        if actual != expected:
            found = "the end of the file" if actual is None else repr(actual)
            return (
                f"hunk {number} (@@ {hunk.header} @@) does not match: line {stated + offset + 1} "
                f"should be {expected!r} but is {found}; the file was not changed"
            )
    return f"hunk {number} (@@ {hunk.header} @@) does not match the file; the file was not changed"


def _write_atomic(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".fs_patch-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
