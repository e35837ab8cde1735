def run(query: str, **options) -> None:
    """Variadic keyword parameters cannot be described."""
