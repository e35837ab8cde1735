def run() -> str:
    """Work.

    Task: later
    """
    return "x"
