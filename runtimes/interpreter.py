"""Which interpreter runs a tool: the shebang, then config, then the language default."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from toolexec.errors import RuntimeUnavailable

INSTALL_HINTS = {
    "python": "install Python 3 or set runtimes.python in config.yaml",
    "bash": "install bash or set runtimes.bash in config.yaml",
    "javascript": "install Node.js (https://nodejs.org) or set runtimes.javascript in config.yaml",
    "typescript": "install Node.js (https://nodejs.org) or set runtimes.typescript in config.yaml",
}


def resolve(argv: Sequence[str], language: str) -> list[str]:
    """``argv`` with its program made absolute, or RuntimeUnavailable naming it."""
    program = argv[0]
    found = program if os.sep in program and os.access(program, os.X_OK) else shutil.which(program)
    if not found or os.path.isdir(found):
        raise RuntimeUnavailable(program, INSTALL_HINTS.get(language, f"install it or set runtimes.{language}"))
    return [found, *argv[1:]]


def find_venv_python(functions_dir: Path, cwd: Path) -> str | None:
    """A ``.venv`` next to (or inside) the functions directory, or in the working directory."""
    for root in (functions_dir, functions_dir.parent, cwd):
        candidate = root / ".venv" / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None
