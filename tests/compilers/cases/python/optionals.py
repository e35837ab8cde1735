from typing import Optional, Union


def run(a: Optional[str], b: int | None, c: Union[float, None], d: None | list[str], e: Optional[int] = 4) -> None:
    """Optional by type: none of these is required.

    Args:
        a: Optional via typing.Optional.
        e: Optional with a default.
    """
