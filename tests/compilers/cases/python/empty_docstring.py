def run(x: int) -> int:
    """

    Args:
        x: a number
    """
    return x
