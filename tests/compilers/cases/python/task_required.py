import time


def run(seconds: float) -> str:
    """Index the archive; takes minutes.

    Task: required
    Timeout: 3600

    Args:
        seconds: How long to work.
    """
    time.sleep(seconds)
    return "indexed"
