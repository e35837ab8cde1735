def run(path: str, pattern, limit: int = 20, hidden=None) -> list[str]:
    """Find files whose names match a pattern.

    Searches below the directory, depth first.

    :param path: The directory to search.
    :param str pattern: A glob pattern such as ``*.py``,
        matched against file names.
    :param limit: At most this many results.
    :type limit: int
    :type hidden: bool or None
    :param hidden: Include hidden files.
    :returns: The matching paths.
    :rtype: list[str]
    :raises FileNotFoundError: when the directory is missing.
    """
    return []
