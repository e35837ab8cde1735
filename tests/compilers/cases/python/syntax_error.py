def run(city: str:
    """Broken."""
    return city
