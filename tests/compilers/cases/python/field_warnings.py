from typing import Annotated

from pydantic import Field

import settings


def run(
    items: Annotated[list[str], Field(default_factory=list)],
    limit: Annotated[int, Field(le=settings.MAX)] = 10,
) -> str:
    """Field values toolexec cannot know without running the script."""
    return ",".join(items)
