"""Apply a unified diff to one file."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from _fsguard import Refused, check_writable, open_regular, read_chunks, replace_file

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
MAX_BYTES = 16 * 1024 * 1024  # the largest file fs_patch reads (it holds the whole file)
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
    Network: none
    Writes: cwd, /tmp
    Examples:
        {"path": "greeting.txt", "patch": "@@ -1,2 +1,2 @@\\n hello\\n-world\\n+there\\n"}
    Errors:
        not found: the file does not exist
        not a regular file: a device, FIFO, socket or pseudo-file
        refused: the path is toolexec's own config, tools, .env files or state
        no hunks: the patch holds no "@@" hunk header
        hunk does not match: names the hunk and the first line that differs
    """
    try:
        real = check_writable(path)
        text = _read(path)
    except Refused as exc:
        return _failed(str(exc))
    try:
        hunks = _parse(patch)
        lines = text.splitlines(keepends=False)
        ending = "\r\n" if "\r\n" in text else "\n"
        result = _apply(lines, hunks)
    except ValueError as exc:
        return _failed(str(exc))
    new_text = ending.join(result) + (ending if result and (text.endswith(("\n", "\r")) or not text) else "")
    try:
        replace_file(real, new_text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        return _failed(f"the patch cannot be written as UTF-8 (a lone surrogate at character {exc.start + 1} of the result)")
    except OSError as exc:
        return _failed(f"cannot write {path}: {exc.strerror}")
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


def _read(path: str) -> str:
    fd = open_regular(path)
    try:
        data = b"".join(_bounded(read_chunks(fd)))
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise Refused(f"{path} is larger than {MAX_BYTES} bytes; fs_patch edits files up to that size")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"cannot read {path}: not UTF-8 text (byte {exc.start + 1})") from None


def _bounded(chunks: Iterator[bytes]) -> Iterator[bytes]:
    taken = 0
    for chunk in chunks:
        yield chunk
        taken += len(chunk)
        if taken > MAX_BYTES:
            return


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
