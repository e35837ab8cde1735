from typing import TypedDict


class Row(TypedDict):
    name: str
    size: int


def run(folder: str) -> list[Row]:
    """List a folder's files with their sizes.

    Args:
        folder: the folder to list
    """
    import os

    return [{"name": e.name, "size": e.stat().st_size} for e in os.scandir(folder) if e.is_file()]
