"""Search file contents with a regular expression."""

from __future__ import annotations

import fnmatch
import os
import re
import signal
import time
import warnings
from collections.abc import Iterator
from typing import Any

from _fsguard import LineReader, Refused, open_regular, pseudo_file_system

SKIPPED_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv"}
MAX_LINE = 500  # characters shown of a matching line
MAX_SEARCHED = 1024 * 1024  # bytes of one line that are searched
MAX_FILE = 256 * 1024 * 1024  # bytes of one file that are searched
TIME_LIMIT = 20.0  # seconds for the whole search; FS_GREP_TIME_LIMIT (set by the user) changes it


def run(pattern: str, path: str = ".", include: str = "*", ignore_case: bool = False, limit: int = 200) -> str:
    """Search files for lines matching a regular expression; each match as "file:line:text", sorted by file.

    Directories are searched recursively, skipping .git, node_modules, __pycache__ and .venv; files
    that are not text, and anything that is not a regular file (devices, FIFOs, /proc), are skipped.
    The search is bounded: the first 1 MiB of a line and 256 MiB of a file are searched, and after
    20 seconds it stops and says where (a pattern with nested repeats can take exponential time).

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
    Network: none
    Writes: none
    Reads: /tmp
    Env: FS_GREP_TIME_LIMIT
    Examples:
        {"pattern": "TODO", "path": "src", "include": "*.py"}
        {"pattern": "^import ", "path": "main.py", "ignore_case": false}
    Errors:
        invalid regular expression: names the position of the problem
        not found: the path does not exist
    """
    try:
        with warnings.catch_warnings():  # "possible nested set" and the like: Python's notice of a future change
            warnings.simplefilter("ignore", FutureWarning)
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        return _failed(f"invalid regular expression {pattern!r}: {exc.msg} at position {(exc.pos or 0) + 1}")
    except (RecursionError, OverflowError) as exc:
        return _failed(f"invalid regular expression {pattern!r}: {exc}")
    if not os.path.lexists(path):
        return _failed(f"not found: {path}")
    if os.path.isdir(path):
        if _pseudo(path):
            return _failed(f"{path} is on a pseudo file system (such as /proc or /sys); the file tools do not search it")
    else:
        try:
            os.close(open_regular(path))
        except Refused as exc:
            return _failed(str(exc))
    search = _Search(regex, limit)
    with _Budget(_seconds()) as budget:
        stop = search.run(path, include, budget)
    if not search.hits and not stop:
        return f"[no line matches {pattern} in {path}]\n" + search.bounds()
    body = "".join(search.hits)
    if stop:
        body += stop
    elif search.total > limit:
        body += f"[showing {limit} of {search.total} matching lines; narrow the search or raise limit]\n"
    return body + search.bounds()


def _seconds() -> float:
    try:
        return max(float(os.environ.get("FS_GREP_TIME_LIMIT", "")), 0.01)
    except ValueError:
        return TIME_LIMIT


class _OutOfTime(Exception):
    pass


class _Budget:
    """Raises _OutOfTime in the main thread once ``seconds`` have passed, even inside one regular expression
    match (the matcher checks for signals as it backtracks)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def __enter__(self) -> _Budget:
        if hasattr(signal, "setitimer"):
            self._previous = signal.signal(signal.SIGALRM, self._expired)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def _expired(self, *_: object) -> None:
        raise _OutOfTime

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise _OutOfTime

    def __exit__(self, *_: object) -> None:
        if hasattr(signal, "setitimer"):
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)


class _Search:
    def __init__(self, regex: re.Pattern[str], limit: int) -> None:
        self.regex, self.limit = regex, limit
        self.hits: list[str] = []
        self.total = 0
        self.files = 0
        self.cut_lines = 0  # lines searched in their first MAX_SEARCHED bytes only
        self.cut_files: list[str] = []  # files searched in their first MAX_FILE bytes only

    def run(self, path: str, include: str, budget: _Budget) -> str:
        """Search every file; what stopped the search early, or ""."""
        file, number = path, 0
        try:
            for file in _files(path, include):
                budget.check()
                self.files += 1
                number = 0
                for number, line in self._lines(file):
                    if self.regex.search(line):
                        self.total += 1
                        if len(self.hits) < self.limit:
                            text = line if len(line) <= MAX_LINE else line[:MAX_LINE] + " [… cut]"
                            self.hits.append(f"{file}:{number}:{text}\n")
        except _OutOfTime:
            where = f"{file}:{number}" if number else file
            return (
                f"[search stopped after {budget.seconds:g} s at {where}, {self.files} file(s) searched: narrow the path, "
                "or simplify the pattern (nested repeats such as (a+)+ can take exponential time)]\n"
            )
        return ""

    def bounds(self) -> str:
        """What the byte bounds left unsearched, said."""
        notes = ""
        if self.cut_lines:
            notes += (
                f"[{self.cut_lines} line(s) longer than {MAX_SEARCHED} bytes were searched in their first {MAX_SEARCHED} bytes]\n"
            )
        if self.cut_files:
            first = self.cut_files[0] + (f" and {len(self.cut_files) - 1} more" if len(self.cut_files) > 1 else "")
            notes += f"[only the first {MAX_FILE} bytes of {first} were searched]\n"
        return notes

    def _lines(self, file: str) -> Iterator[tuple[int, str]]:
        try:
            fd = open_regular(file)
        except Refused:
            return
        try:
            if b"\0" in os.pread(fd, 8192, 0):
                return
            lines = LineReader(fd, cut=MAX_SEARCHED, max_bytes=MAX_FILE)
            for number, (raw, whole) in enumerate(lines, start=1):
                self.cut_lines += not whole
                yield number, raw.decode("utf-8", "replace")
            if lines.stopped:
                self.cut_files.append(file)
        except OSError:
            return
        finally:
            os.close(fd)


def _files(path: str, include: str) -> Iterator[str]:
    if not os.path.isdir(path):
        yield path
        return
    for directory, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not _pseudo(os.path.join(directory, d)))
        for name in sorted(files):
            if fnmatch.fnmatch(name, include):
                yield os.path.join(directory, name)


def _pseudo(directory: str) -> bool:
    """Whether ``directory`` is on /proc, /sys or their kind (files of no stored content, and very many)."""
    try:
        return pseudo_file_system(os.stat(directory).st_dev) is not None
    except OSError:
        return True


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
