from typing import List, Sequence


def run(a: list[str], b: List[int], c: Sequence[float], d: tuple[bool, ...], e: list, f: list[list[int]]) -> None:
    """Every array form."""
