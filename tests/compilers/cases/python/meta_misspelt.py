def run(path: str) -> str:
    """Misspelt metadata fields are warnings, never silently ignored.

    Args:
        path: File to read.

    Read only: true
    Tag: fs
    Returns:
        The file's text.
    """
    return open(path).read()
