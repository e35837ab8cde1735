def run(a: "int", b: "list[str]", c: "Optional[float]" = None) -> "str":
    """Quoted annotations read as if unquoted."""
