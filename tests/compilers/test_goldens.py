"""Golden files: ``cases/<lang>/<case>.<ext>`` beside ``<case>.json`` or ``<case>.err``.

A ``.json`` golden is the declaration a model sees; a ``.warn`` golden, when
present, holds the build warnings; an ``.err`` golden holds the exact compile
error text. Two new files in a folder are a new test; ``--update-goldens``
rewrites them for review.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolexec.compilers import SUFFIXES, compile_source
from toolexec.errors import CompileError

CASES = Path(__file__).parent / "cases"


def _cases() -> list[Path]:
    return sorted(p for p in CASES.rglob("*") if p.suffix in SUFFIXES and "node_modules" not in p.parts)


@pytest.mark.parametrize("case", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden(case: Path, update_goldens: bool) -> None:
    golden_json, golden_err, golden_warn = (case.with_suffix(s) for s in (".json", ".err", ".warn"))
    try:
        declaration = compile_source(case.read_text(encoding="utf-8"), case.name)
    except CompileError as error:
        actual_err, actual_json, warnings = str(error) + "\n", None, ""
    else:
        actual_err, actual_json = None, declaration.to_function()
        warnings = "".join(w + "\n" for w in declaration.warnings)
    if update_goldens:
        _write(golden_err, actual_err)
        _write(golden_json, None if actual_json is None else json.dumps(actual_json, indent=2, ensure_ascii=False) + "\n")
        _write(golden_warn, warnings or None)
        return
    if golden_err.exists():
        assert actual_err == golden_err.read_text(encoding="utf-8"), f"compiled as {actual_json}"
    else:
        assert actual_err is None, actual_err
        assert actual_json == json.loads(golden_json.read_text(encoding="utf-8"))
        assert warnings == (golden_warn.read_text(encoding="utf-8") if golden_warn.exists() else "")


def _write(path: Path, content: str | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(content, encoding="utf-8")


def test_every_case_has_a_golden() -> None:
    for case in _cases():
        assert case.with_suffix(".json").exists() or case.with_suffix(".err").exists(), f"{case} has no golden"
