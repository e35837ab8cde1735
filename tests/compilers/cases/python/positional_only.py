def run(query: str, /, limit: int = 5) -> None:
    """Positional-only parameters cannot be passed by keyword."""
