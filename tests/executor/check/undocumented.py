"""A tool with an undocumented parameter, a type that falls back to string, and no example."""

import shutil
from datetime import date


def run(path: str, when: date, force: bool = False) -> str:
    """Remove a directory tree.

    Args:
        path: The directory to remove.
    """
    shutil.rmtree(path)
    return f"removed {path} on {when}"
