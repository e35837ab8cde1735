from typing import NotRequired, TypedDict


class Entry(TypedDict):
    name: str
    size: int
    is_dir: bool


class Listing(TypedDict):
    path: str
    entries: list[Entry]
    truncated: NotRequired[bool]


def run(path: str, limit: int = 100) -> Listing:
    """List the entries of a directory.

    Directories come first; each entry carries its size in bytes.

    Args:
        path: Directory to list.
        limit: At most this many entries.

    Title: List directory
    Summary: List a directory's entries with their sizes.
    Tags: fs, read
    Read-only: true
    Idempotent: yes
    Open-world: false
    Timeout: 30
    Max output bytes: 65536
    Examples:
        {"path": "."}
        {"path": "/tmp",
         "limit": 5}
    Errors:
        not a directory: the path exists but is a file
        permission denied: the directory cannot be read
    """
    return {"path": path, "entries": []}
