from pathlib import Path
from typing import Any


class Point:
    pass


def run(where: Point, anything: Any, path: Path, either: int | str) -> None:
    """Types with no JSON Schema equivalent become strings, with a warning."""
