from typing import Annotated, Optional

import annotated_types as at
from annotated_types import Ge, Interval, Len, MaxLen, MinLen
from pydantic import Field, StringConstraints

MAX_RESULTS = 50


def run(
    query: Annotated[str, Field(min_length=1, max_length=200, description="What to search for.")],
    limit: Annotated[int, Field(ge=1, le=MAX_RESULTS)] = 10,
    score: Annotated[float, Interval(gt=0, lt=1)] = 0.5,
    page: Annotated[int, Ge(1), at.Le(100), Field(title="Page", examples=[1, 2])] = 1,
    step: Annotated[float, Field(multiple_of=0.5)] = 1.0,
    code: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")] = "ABC",
    tags: Annotated[list[Annotated[str, MaxLen(20)]], MinLen(1), Len(1, 5)] = ["all"],
    language: Annotated[str, Field(default="en", description="ISO 639-1 code.")],
    region: Optional[str] = Field(None, max_length=2),
    depth: int = Field(default=2, ge=0, lt=10),
    weight: Annotated[Optional[float], Field(ge=0)] = None,
) -> str:
    """Search the catalogue.

    Args:
        query: Ignored: Field's description wins, as in pydantic.
        limit: At most this many results.
        depth: How many levels of categories to search.
    """
    return query
