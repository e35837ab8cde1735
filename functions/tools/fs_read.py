"""Read part of a text file with line numbers."""

from __future__ import annotations

from typing import Any

MAX_LINE = 2000  # characters shown of one line; longer lines end with a marker


def run(path: str, offset: int = 1, limit: int = 2000) -> str:
    """Read a text file and return its lines numbered like `cat -n`, from line `offset`, at most `limit` of them.

    When not every line is shown, a last line says which were shown and how to read on.

    Args:
        path: The file to read.
        offset: The first line to show (1 is the first line of the file).
        limit: How many lines to show at most.

    Title: Read file lines
    Summary: Read a text file with line numbers, from an offset, up to a limit.
    Tags: fs, read
    Read-only: true
    Destructive: false
    Idempotent: true
    Open-world: false
    Examples:
        {"path": "README.md"}
        {"path": "src/main.py", "offset": 120, "limit": 40}
    Errors:
        not found: the file does not exist
        is a directory: use fs_ls or fs_glob for directories
        not a text file: the file holds NUL bytes
    """
    if offset < 1 or limit < 1:
        return _failed(f"offset ({offset}) and limit ({limit}) must both be at least 1")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return _failed(f"not found: {path}")
    except IsADirectoryError:
        return _failed(f"{path} is a directory; use fs_ls or fs_glob to list it")
    except OSError as exc:
        return _failed(f"cannot read {path}: {exc.strerror}")
    if b"\0" in data[:8192]:
        return _failed(f"{path} is not a text file (it holds NUL bytes)")
    lines = data.decode("utf-8", "replace").splitlines()
    shown = lines[offset - 1 : offset - 1 + limit]
    width = len(str(offset + max(len(shown) - 1, 0)))
    body = "".join(f"{number:>{width}}\t{_cut(line)}\n" for number, line in enumerate(shown, start=offset))
    if not lines:
        return f"[{path} is empty]\n"
    if not shown:
        return f"[{path} has {len(lines)} line(s); offset {offset} is past the end]\n"
    last = offset + len(shown) - 1
    if offset > 1 or last < len(lines):
        more = f"; read on with offset={last + 1}" if last < len(lines) else ""
        body += f"[showing lines {offset}-{last} of {len(lines)}{more}]\n"
    return body


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[:MAX_LINE] + f" [… line cut at {MAX_LINE} characters]"


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
