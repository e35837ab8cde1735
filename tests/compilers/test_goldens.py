"""Golden files: ``cases/<lang>/<case>.<ext>`` beside ``<case>.json`` or ``<case>.err``.

A ``.json`` golden is the declaration a model sees; a ``.record.json`` golden is
the rest of the record (language, typed invocation, shebang, limits, metadata), so
the compiler→runtime contract is pinned too; a ``.warn`` golden, when present,
holds the build warnings; an ``.err`` golden holds the exact compile error text. Two new files in a folder are a new test; ``--update-goldens``
rewrites them for review.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolexec.compilers import SUFFIXES, compile_source
from toolexec.errors import CompileError
from toolexec.records import ToolDeclaration

CASES = Path(__file__).parent / "cases"


def _cases() -> list[Path]:
    return sorted(p for p in CASES.rglob("*") if p.suffix in SUFFIXES and "node_modules" not in p.parts)


@pytest.mark.parametrize("case", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden(case: Path, update_goldens: bool) -> None:
    golden_json, golden_err, golden_warn = (case.with_suffix(s) for s in (".json", ".err", ".warn"))
    golden_record = case.with_suffix(".record.json")
    try:
        declaration = compile_source(case.read_text(encoding="utf-8"), case.name)
    except CompileError as error:
        actual_err, actual_json, actual_record, warnings = str(error) + "\n", None, None, ""
    else:
        actual_err, actual_json = None, declaration.to_function()
        actual_record = {k: v for k, v in declaration.to_dict().items() if k not in (*actual_json, "source", "warnings")}
        warnings = "".join(w + "\n" for w in declaration.warnings)
        assert declaration.source == case.name
    if update_goldens:
        _write(golden_err, actual_err)
        _write(golden_json, None if actual_json is None else json.dumps(actual_json, indent=2, ensure_ascii=False) + "\n")
        _write(golden_record, None if actual_record is None else json.dumps(actual_record, indent=2, ensure_ascii=False) + "\n")
        _write(golden_warn, warnings or None)
        return
    if golden_err.exists():
        assert actual_err == golden_err.read_text(encoding="utf-8"), f"compiled as {actual_json}"
        assert not golden_record.exists()
    else:
        assert actual_err is None, actual_err
        assert actual_json == json.loads(golden_json.read_text(encoding="utf-8"))
        assert json.loads(json.dumps(actual_record)) == json.loads(golden_record.read_text(encoding="utf-8"))
        assert warnings == (golden_warn.read_text(encoding="utf-8") if golden_warn.exists() else "")
        # the stored form reads back as the same record
        assert ToolDeclaration.from_dict(json.loads(json.dumps(declaration.to_dict()))) == declaration


def _write(path: Path, content: str | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(content, encoding="utf-8")


def test_every_case_has_a_golden() -> None:
    for case in _cases():
        assert case.with_suffix(".json").exists() or case.with_suffix(".err").exists(), f"{case} has no golden"
