from typing import Literal, NotRequired, TypedDict


class Results(TypedDict):
    urls: list[str]
    engine: str
    more: NotRequired[bool]


def run(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "deep"] = "fast",
    sites: list[str] | None = None,
    fresh: bool | None = None,
) -> Results:
    """Search the web and return the top results.

    Args:
        query: What to search for.
        limit: How many results to return.
        mode: Quick or thorough search.
        sites: Only search these sites.
        fresh: Prefer recent pages.

    Title: Web search
    Summary: Search the web.
    Tags: web, search
    Read-only: true
    Open-world: true
    Timeout: 20
    Examples:
        {"query": "toolexec"}
        {"query": "mcp", "limit": 3, "mode": "deep"}
    Errors:
        rate limited: too many searches in a minute
    """
