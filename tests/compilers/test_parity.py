"""The same logical tool written in each language compiles to the same declaration."""

from __future__ import annotations

from dataclasses import replace
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


@pytest.mark.parametrize("other", SOURCES[1:], ids=lambda p: p.suffix)
def test_metadata_and_limits_match_python(other: Path) -> None:
    reference = compile_file(SOURCES[0])
    declaration = compile_file(other)
    assert reference.metadata.output_schema is not None and reference.metadata.examples
    expected = reference.metadata
    if other.suffix == ".js":
        # An object-argument JavaScript tool has no return type to read an output shape from.
        expected = replace(expected, output_schema=None)
    assert declaration.metadata == expected
    assert declaration.limits == reference.limits
    assert declaration.warnings == reference.warnings == ()
