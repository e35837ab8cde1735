def run(city: str, days: int = 3, units="metric", lat=None, lon=None) -> str:
    """Forecast the weather for a city.

    The forecast comes from the nearest station.

    Parameters
    ----------
    city : str
        The city's name, such as "Paris"
        or "Lyon".
    days : int, optional
        How many days ahead.
    units : {'metric', 'imperial'}, default 'metric'
        The unit system.
    lat, lon : float, optional
        A position to use instead of the city.

    Returns
    -------
    str
        The forecast, one line a day.

    Notes
    -----
    Forecasts are cached for an hour.

    Examples
    --------
    {"city": "Paris", "days": 2}
    """
    return city
