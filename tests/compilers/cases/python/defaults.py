import os


def run(
    text: str = "hi",
    count: int = -2,
    ratio: float = 1.5,
    flag: bool = False,
    tags: list[str] = ["a", "b"],
    pair: list[int] = (1, 2),
    home: str = os.environ.get("HOME", "/"),
    nothing: str = None,
) -> None:
    """Literal defaults are shown; computed ones only make the parameter optional."""
