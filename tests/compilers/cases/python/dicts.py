import typing
from typing import Any, Dict


def run(a: dict, b: dict[str, int], c: Dict[str, list[str]], d: typing.Dict[str, Any]) -> None:
    """Every object form."""
