from typing import Literal


def run(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "deep"] = "fast",
    sites: list[str] | None = None,
    fresh: bool | None = None,
):
    """Search the web and return the top results.

    Args:
        query: What to search for.
        limit: How many results to return.
        mode: Quick or thorough search.
        sites: Only search these sites.
        fresh: Prefer recent pages.
    """
