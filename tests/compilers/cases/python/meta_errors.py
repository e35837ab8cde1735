def run(path: str, limit: int = 10) -> str:
    """Every kind of malformed metadata, reported together.

    Args:
        path: Directory to list.
        limit: At most this many entries.

    Title:
    Tags: fs, file system
    Read-only: maybe
    Destructive: true
    Examples:
        {"path": ".", "limit": "ten"}
        {"limit": 3}
        {"path": "/tmp", "depth": 2}
    """
    return path
