#!/usr/bin/env python3
"""Module docstrings are not the tool's description."""


def run():
    """Report the time."""
    import datetime

    return datetime.datetime.now().isoformat()
