def run() -> str:
    """Share a worker.

    Warm: shared
    """
    return "no"
