def helper(x):
    return x * 2


def run(city: str, days: int = 3) -> str:
    """Forecast the weather for a city.

    Args:
        city: Name of the city.
        days: How many days ahead.
    """
    return f"{city}: sunny for {helper(days)} days"
