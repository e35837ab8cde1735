def run(name, count, ratio=0.5):
    """Parameters without annotations.

    Args:
        name: Falls back to string.
        count (int): Typed by the docstring.
        ratio (float): Typed by the docstring, with a default.
    """
