"""The same logical tool written in each language compiles to the same declaration."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolexec.compilers import compile_file

PARITY = Path(__file__).parent / "parity"
SOURCES = sorted(PARITY.glob("search.*"), key=lambda p: p.suffix != ".py")


def test_every_language_is_represented() -> None:
    assert sorted(p.suffix for p in SOURCES) == [".js", ".py", ".sh", ".ts"]


@pytest.mark.parametrize("other", SOURCES[1:], ids=lambda p: p.suffix)
def test_declarations_match_python(other: Path) -> None:
    reference = compile_file(SOURCES[0])
    declaration = compile_file(other)
    assert declaration.to_function() == reference.to_function()
    assert declaration.language != reference.language
