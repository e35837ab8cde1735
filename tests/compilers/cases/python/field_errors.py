from typing import Annotated

from annotated_types import Ge, MinLen
from pydantic import Field


def run(
    name: Annotated[str, Ge(1)],
    count: Annotated[int, MinLen(2), Field(pattern="^a")],
    code: Annotated[str, Field(pattern="[unclosed", min_length=-1)],
    ratio: Annotated[float, Field(le="one", description=3)],
) -> str:
    """Constraints that do not fit their parameter's type, reported together."""
    return name
