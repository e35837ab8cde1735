def run(*paths: str) -> None:
    """Variadic positional parameters cannot be described."""
