def run(path: str, depth: int = 1) -> list[str]:
    """List a directory.

    Args:
        path: The directory.
        depth: How deep to go.

    Examples:
        List the current directory:
        {"path": "."}
        {
            "path": "/tmp",
            "depth": 2
        }
        >>> run(path="/etc")
        {"path": "src", "depth": 3}  # three levels
        {'path': 'docs'}
    """
    return [path]
