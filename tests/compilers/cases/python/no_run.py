def main(x: int) -> int:
    """Not the entry point."""
    return x
