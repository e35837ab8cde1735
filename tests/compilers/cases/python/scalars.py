def run(s: str, i: int, f: float, b: bool) -> None:
    """Every scalar type.

    Parameters:
        s: a string
        i: an integer
        f: a number
        b: a boolean
    """
