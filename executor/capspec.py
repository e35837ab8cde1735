"""How per-tool caps are written: ``max_concurrency`` (a whole number of calls in flight) and ``rate`` (``N/unit``).

The one reading of both, for the compilers (a script's metadata) and config.yaml (``tool_limits``); the caps
themselves are enforced by :mod:`toolexec.caps`. A rate is written ``30/minute``, ``30 per minute``,
``5/s``, ``100/hour`` or ``1000/day`` and kept as ``N/unit`` with the unit spelt out.
"""

from __future__ import annotations

import re

__all__ = ["MAX_CONCURRENCY", "MAX_RATE", "UNITS", "parse_max_concurrency", "parse_rate", "rate_window"]

UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_ALIASES = {"s": "second", "sec": "second", "m": "minute", "min": "minute", "h": "hour", "hr": "hour", "d": "day"}
_RATE = re.compile(r"\s*(\d{1,9})\s*(?:/|\s+per\s+)\s*([A-Za-z]+)\s*", re.IGNORECASE)
MAX_CONCURRENCY = 10_000
MAX_RATE = 1_000_000


def parse_max_concurrency(value: object) -> int | str:
    """The number of calls allowed in flight, or why ``value`` is not one (a message)."""
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or not 1 <= number <= MAX_CONCURRENCY:
        return f"expected a whole number of calls from 1 to {MAX_CONCURRENCY}, got {value!r:.40}"
    return number


def parse_rate(value: object) -> str | tuple[str]:
    """The rate as ``N/unit`` (``30/minute``), or, in a 1-tuple, why ``value`` is not one."""
    match = _RATE.fullmatch(value) if isinstance(value, str) else None
    word = match.group(2).lower() if match else ""
    unit = _ALIASES.get(word) or _ALIASES.get(word.removesuffix("s")) or word.removesuffix("s")
    if match is None or unit not in UNITS or not 1 <= int(match.group(1)) <= MAX_RATE:
        return (f"expected calls per unit such as 30/minute (second, minute, hour or day), got {value!r:.40}",)
    return f"{int(match.group(1))}/{unit}"


def rate_window(rate: str) -> tuple[int, int]:
    """(calls, seconds) of a rate :func:`parse_rate` wrote."""
    count, unit = rate.split("/")
    return int(count), UNITS[unit]
