"""Write a whole text file."""

from __future__ import annotations

import os
from typing import Any

from _fsguard import Refused, check_writable, replace_file


def run(path: str, contents: str) -> str:
    """Write text to a file, replacing what it held; missing parent directories are created.

    The text is written exactly as given (no newline is added). The new contents replace the file in one
    step (a reader sees the old file or the new one, never half of it); a symbolic link is written
    through to its target.

    Args:
        path: The file to write.
        contents: The complete new contents of the file.

    Title: Write file
    Summary: Create or overwrite a text file with the given contents.
    Tags: fs, write
    Read-only: false
    Destructive: true
    Idempotent: true
    Open-world: false
    Network: none
    Writes: cwd, /tmp
    Examples:
        {"path": "notes/todo.md", "contents": "- write the report\\n"}
    Errors:
        is a directory: the path names a directory
        permission denied: the file or its directory cannot be written
        refused: the path is toolexec's own config, tools, .env files or state
    """
    try:
        real = check_writable(path)
        data = contents.encode("utf-8")
    except Refused as exc:
        return _failed(str(exc))
    except UnicodeEncodeError as exc:
        return _failed(f"contents cannot be written as UTF-8 (a lone surrogate at character {exc.start + 1})")
    if os.path.isdir(real):
        return _failed(f"{path} is a directory; name a file to write")
    try:
        os.makedirs(os.path.dirname(real), exist_ok=True)
        replace_file(real, data)
    except OSError as exc:
        return _failed(f"cannot write {path}: {exc.strerror}")
    return f"wrote {len(data)} bytes to {path}\n"


def _failed(message: str) -> Any:
    return {"ok": False, "error": message}
