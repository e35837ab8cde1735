def run(seconds: float) -> None:
    """Sleep for a while.

    Timeout: 90
    """
