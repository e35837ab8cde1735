"""``toolexec check``: golden outputs per case file in tests/executor/check/ (``--update-goldens`` rewrites them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.conftest import REPO, toolexec
from toolexec.check import check_file

CASES = REPO / "tests" / "executor" / "check"
SOURCES = sorted(p for p in CASES.iterdir() if p.suffix in (".py", ".sh", ".ts", ".js"))


def _golden(path: Path, actual: str, update: bool) -> None:
    if update:
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"missing golden {path.name}; run pytest --update-goldens"
    assert actual == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", SOURCES, ids=[p.name for p in SOURCES])
def test_check_golden(case: Path, update_goldens: bool) -> None:
    relative = case.relative_to(REPO).as_posix()
    text = toolexec("check", relative, cwd=REPO)
    errors = '"severity": "error"' in toolexec("check", "--json", relative, cwd=REPO).stdout
    assert text.returncode == (1 if errors else 0)
    _golden(case.with_name(case.name + ".check"), text.stdout + "--- stderr\n" + text.stderr, update_goldens)
    as_json = toolexec("check", "--json", relative, cwd=REPO)
    assert (as_json.returncode, as_json.stderr) == (text.returncode, "")
    _golden(case.with_name(case.name + ".check.json"), as_json.stdout, update_goldens)


def test_check_exit_status_and_summary(tmp_path: Path) -> None:
    warned = toolexec("check", str(CASES / "undocumented.py"))  # warnings only: success
    assert (warned.returncode, warned.stderr) == (0, "checked 1 file(s): 0 error(s), 5 warning(s)\n")
    folder = toolexec("check", str(CASES))
    assert folder.returncode == 1  # broken.sh
    assert folder.stderr.startswith(f"checked {len(SOURCES)} file(s): ")
    missing = toolexec("check", str(tmp_path / "nope.py"))
    assert (missing.returncode, missing.stdout) == (1, f"{tmp_path / 'nope.py'}:1:1: error: no such file or directory\n")


def test_check_every_visible_tool_of_the_config(project) -> None:  # type: ignore[no-untyped-def]
    project.tool(
        "ok.py", 'def run(x: int) -> int:\n    """Double.\n\n    Args:\n        x: A number.\n    """\n    return 2 * x\n'
    )
    config = project.configure(["ok.py", "gone.py"])
    result = toolexec("--config", str(config), "check")
    assert result.returncode == 1
    assert f"{project.tools / 'gone.py'}:1:1: error: no such file or directory\n" in result.stdout
    assert f"{project.tools / 'ok.py'}:1:5: warning: no example\n" in result.stdout


def test_stale_examples_are_reported() -> None:
    from toolexec.check import _stale_examples
    from toolexec.compilers import compile_file

    declaration = compile_file(CASES / "clean.js")
    stale = dataclasses.replace(
        declaration, metadata=dataclasses.replace(declaration.metadata, examples=({"a": 1, "b": "two"}, {"a": 1, "b": 2}))
    )
    assert [str(f) for f in _stale_examples(stale)] == [
        f"{CASES / 'clean.js'}:9:1: warning: example 1 does not match the parameters: b: 'two' is not of type 'number'\n"
        "  hint: update the example"
    ]


@pytest.mark.parametrize("destructive", [True, False])
def test_a_declared_hint_silences_the_destructive_heuristic(destructive: bool) -> None:
    from toolexec.check import _advice
    from toolexec.compilers import compile_file
    from toolexec.records import Annotations

    case = CASES / "runs_commands.ts"
    assert [f.message for f in check_file(case) if "destructive" in f.message] == [
        "the tool looks destructive (it runs commands) but does not declare whether it is"
    ]
    declaration = compile_file(case)
    declared = dataclasses.replace(
        declaration,
        metadata=dataclasses.replace(declaration.metadata, annotations=Annotations(destructive=destructive)),
    )
    assert [f.message for f in _advice(declared, case.read_text()) if "destructive" in f.message] == []


@pytest.mark.parametrize(
    ("language", "line", "flagged"),
    [
        ("bash", 'echo hi >>"$LLM_OUTPUT"', False),
        ("bash", "ls 2>/dev/null >&2", False),
        ("bash", 'echo "$x" > "$path"', True),
        ("bash", "# rm -rf /  (a comment)", False),
        ("bash", 'eval "$(argc --argc-eval "$0" "$@")"', False),
        ("bash", 'bash -c "$argc_command"', True),
        ("python", 'open(path, "w")', True),
        ("python", 'open(path, "rb")', False),
        ("python", "subprocess.run(['ls'])", True),
        ("typescript", "const m = pattern.exec(text);", False),
        ("typescript", 'await fs.writeFile(path, "x");', True),
        ("javascript", 'require("child_process")', True),
    ],
)
def test_destructive_heuristic(language: str, line: str, flagged: bool) -> None:
    from toolexec.check import _looks_destructive

    assert (_looks_destructive(language, line) is not None) is flagged  # type: ignore[arg-type]


def test_a_folder_skips_shared_helper_modules() -> None:
    # functions/tools/_fsguard.py is the file built-ins' shared module, not a tool: checking the folder skips it.
    shipped = toolexec("check", str(REPO / "functions" / "tools"))
    assert shipped.returncode == 0, shipped.stdout
    assert "_fsguard" not in shipped.stdout
    assert shipped.stderr.startswith(f"checked {len(list((REPO / 'functions' / 'tools').glob('[!_]*.*')))} file(s): 0 error(s)")
