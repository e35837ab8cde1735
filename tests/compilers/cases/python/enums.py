import enum
from enum import Enum, IntEnum, StrEnum, auto
from typing import Optional


class Color(str, Enum):
    RED = "red"
    GREEN = "green"
    CRIMSON = "red"  # an alias: one value

    def describe(self) -> str:
        return self.value


class Level(IntEnum):
    LOW = 1
    HIGH = 3


class Mode(StrEnum):
    FAST = auto()
    SAFE = auto()


class Unit(enum.Enum):
    METRE = 1
    FOOT = auto()
    _ignore_ = ["helper"]


def run(
    color: Color,
    levels: list[Level],
    mode: Mode = Mode.SAFE,
    unit: Optional[Unit] = None,
) -> dict:
    """Paint a fence.

    Args:
        color: The paint.
        levels: Coats, one level each.
        mode: How to paint.
        unit: The unit of the fence's length.
    """

    def shown(value):
        if isinstance(value, list):
            return [shown(item) for item in value]
        return None if value is None else f"{type(value).__name__}.{value.name}"

    return {"color": shown(color), "levels": shown(levels), "mode": shown(mode), "unit": shown(unit)}
