def run(query: str, *, limit: int = 5) -> None:
    """Keyword-only parameters are fine: every argument is passed by keyword.

    Args:
        query: What to look for.
        limit: How many results.
    """
