"""The current date and time in an IANA time zone."""

from __future__ import annotations

import difflib
from datetime import UTC, datetime
from typing import Any, TypedDict


class Now(TypedDict):
    iso: str
    unix: int
    zone: str
    utc_offset: str
    weekday: str


def run(zone: str = "UTC") -> Now:
    """Get the current date and time in a time zone: ISO 8601 text, Unix seconds and the zone.

    Args:
        zone: An IANA time zone name such as "Europe/Lisbon" or "America/New_York"; UTC when left out.

    Title: Current time
    Summary: Now, in an IANA time zone (UTC by default).
    Tags: time
    Read-only: true
    Destructive: false
    Idempotent: false
    Open-world: false
    Examples:
        {}
        {"zone": "Asia/Tokyo"}
    Errors:
        unknown time zone: the name is not an IANA zone; close names are suggested
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

    try:
        tz = UTC if zone in ("UTC", "Etc/UTC", "Z") else ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return _unknown(zone, sorted(available_timezones()))
    now = datetime.now(tz).replace(microsecond=0)
    return {
        "iso": now.isoformat(),
        "unix": int(now.timestamp()),
        "zone": zone,
        "utc_offset": now.strftime("%z")[:3] + ":" + now.strftime("%z")[3:],
        "weekday": now.strftime("%A"),
    }


def _unknown(zone: str, known: list[str]) -> Any:
    """A failed call ({ok: false}) naming the zone and the closest IANA names."""
    by_lower = {name.lower(): name for name in known}
    # A bare city ("tokyo") is matched against the last part of each name first.
    city = {name.rsplit("/", 1)[-1].lower(): name for name in known if "/" in name}
    candidates = [city[c] for c in difflib.get_close_matches(zone.lower(), list(city), n=3, cutoff=0.75)]
    candidates += [by_lower[c] for c in difflib.get_close_matches(zone.lower(), list(by_lower), n=3, cutoff=0.6)]
    suggestions = list(dict.fromkeys(candidates))[:3]
    hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else "; use an IANA name such as Europe/Lisbon"
    return {"ok": False, "error": f"unknown time zone {zone!r}{hint}"}
