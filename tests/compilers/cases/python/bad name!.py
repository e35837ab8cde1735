def run() -> str:
    """A tool whose file name is not a valid tool name."""
