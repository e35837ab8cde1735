from typing import Literal


def run(unit: Literal["c", "f"], level: Literal[1, 2, 3] = 2, mode: Literal["fast", "slow"] = "fast") -> None:
    """Enumerations typed by their values.

    Args:
        unit: Temperature unit.
        level: Verbosity.
    """
