def run(path: str) -> str:
    """
    Read a file and return its text.

    The path is resolved against the working directory.

    Returns:
        The file's contents.

    Raises:
        FileNotFoundError: when the file is missing.

    Examples:
        run(path="README.md")

    Notes:
        Binary files are decoded with replacement.
    """
    return open(path).read()
