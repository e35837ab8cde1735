"""Agents' tools files: several functions, one declaration each (``compilers/agent*.py``), and the refusal of such a
file compiled as one tool (it would declare none of its functions: before, some built as a tool that ran nothing)."""

from __future__ import annotations

import json

import pytest

from toolexec.compilers import compile_source
from toolexec.compilers.agent import compile_functions
from toolexec.errors import CompileError

BASH = """#!/usr/bin/env bash
set -e
# @describe A script of several commands.

# @cmd List the notes
# @option --dir! Where they are
list_notes() { ls "$argc_dir" >> "$LLM_OUTPUT"; }

# @cmd Remove a note
# @option --kinds*[a|b] Kinds
# @arg names* The notes
remove-note() { :; }

# @cmd
undescribed() { :; }

_private() { :; }

eval "$(argc --argc-eval "$0" "$@")"
"""


def functions(source: str, path: str, dialect: str = "llm-functions", **options: bool) -> list[dict]:
    return [d.to_function() | {"function": d.function} for d in compile_functions(source, path, dialect, **options)]  # type: ignore[arg-type]


def test_bash_commands_one_declaration_each() -> None:
    assert functions(BASH, "agents/a/tools.sh") == [
        {
            "name": "list_notes",
            "description": "List the notes",
            "parameters": {
                "type": "object",
                "properties": {"dir": {"type": "string", "description": "Where they are"}},
                "required": ["dir"],
            },
            "function": "list_notes",
        },
        {
            "name": "remove_note",
            "description": "Remove a note",
            "parameters": {
                "type": "object",
                # deliberate: the choices of a repeatable option go in items (beside "type": "array" they refuse every array)
                "properties": {
                    "kinds": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "description": "Kinds"}
                },
                "required": [],
            },
            "function": "remove-note",
        },
    ]


def test_what_is_not_declared_is_said() -> None:
    (first, _) = compile_functions(BASH, "agents/a/tools.sh", "llm-functions")
    assert first.warnings == (
        "agents/a/tools.sh:11:3: warning: @arg names of function 'remove-note' is not declared (neither llm-functions nor "
        "Loki declares positionals)\n  hint: make it an @option",
        "agents/a/tools.sh:14:1: warning: function 'undescribed' has no description: not declared (as llm-functions' generator)",
    )
    with pytest.raises(CompileError) as refused:
        compile_functions(BASH, "agents/a/tools.sh", "loki")  # Loki refuses a command without a description
    assert str(refused.value) == (
        "agents/a/tools.sh:14:1: function 'undescribed' has no description (Loki refuses it too)\n  hint: write # @cmd What it does"
    )


def test_loki_orders_an_array_property_as_serde_does() -> None:
    source = BASH.replace("# @cmd\nundescribed", "# @cmd Undescribed no more\nundescribed")
    removed = compile_functions(source, "agents/a/tools.sh", "loki")[1]
    assert json.dumps(removed.parameters["properties"]["kinds"]) == json.dumps(
        {"type": "array", "description": "Kinds", "items": {"type": "string", "enum": ["a", "b"]}}
    )


def test_instructions_only_when_asked() -> None:
    source = "def show():\n    '''Show it.'''\n\ndef _instructions():\n    return 'hi'\n"
    assert [d["name"] for d in functions(source, "tools.py")] == ["show"]
    assert [(d["name"], d["function"]) for d in functions(source, "tools.py", private=True)] == [
        ("show", "show"),
        ("_instructions", "_instructions"),
    ]


def test_python_types_llm_functions_cannot_declare_are_errors() -> None:
    source = "def f(a: dict):\n    '''Do it.'''\n"
    with pytest.raises(CompileError) as refused:
        compile_functions(source, "tools.py", "llm-functions")
    assert str(refused.value) == (
        "tools.py:1:7: parameter 'a' of function 'f' has a type llm-functions cannot declare ('dict')\n"
        "  hint: use str, int, float, bool, List[str], Literal['a', 'b'] or Optional[...] of those"
    )
    assert functions(source, "tools.py", "loki")[0]["parameters"] == {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
    }


def test_javascript_property_it_cannot_read() -> None:
    source = "/**\n * Do it.\n * @property {object} a - A thing\n */\nexports.f = function (args) {};\n"
    with pytest.raises(CompileError) as refused:
        compile_functions(source, "tools.js", "llm-functions")
    assert str(refused.value) == (
        "tools.js:5:1: function 'f': cannot read '@property {object} a - A thing'\n"
        "  hint: write @property {string|boolean|integer|number|string[]|'a'|'b'} name - what it is"
    )


def test_typescript_functions_as_coyote_reads_them() -> None:
    source = (
        "/**\n * Tag things.\n *\n * @param {string} what - What to tag\n * @param limit? The most to tag\n */\n"
        "export async function tagThings(what: string, limit?: number, mode: 'a' | \"b\" = 'a', on: boolean | null,\n"
        "  ids: Array<number>, seen: string[], extra: Record<string, string>, bare): Promise<void> {}\n"
        "export const arrow = () => 1;\n"
        "function helper() {}\n/** Private. */\nexport function _hidden() {}\n"
    )
    declared = compile_functions(source, "agents/a/tools.ts", "loki")
    assert [d.to_function() for d in declared] == [
        {
            "name": "tagthings",
            "description": "Tag things.",
            "parameters": {
                "type": "object",
                "properties": {
                    "what": {"type": "string", "description": "What to tag"},
                    "limit": {"type": "number", "description": "The most to tag"},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "on": {"type": "boolean"},
                    "ids": {"type": "array", "items": {"type": "number"}},
                    "seen": {"type": "array", "items": {"type": "string"}},
                    "extra": {"type": "string"},
                    "bare": {"type": "string"},
                },
                "required": ["what", "ids", "seen", "extra", "bare"],
            },
        }
    ]
    assert (declared[0].function, declared[0].invocation.order) == (  # type: ignore[union-attr]
        "tagThings",
        ("what", "limit", "mode", "on", "ids", "seen", "extra", "bare"),
    )
    assert declared[0].warnings == (
        "agents/a/tools.ts:9:14: warning: 'arrow' is exported as a value, not as 'export function': not declared (as Coyote)\n"
        "  hint: write it as: export function arrow(...)",
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("export function f(): void {}\n", "function 'f' has no description (Coyote refuses it too)"),
        (
            "/** F. */\nexport function f(...xs: string[]) {}\n",
            "rest parameters (...) are not supported in agent functions (Coyote refuses them too)",
        ),
        (
            "/** F. */\nexport function f({ a }: { a: string }) {}\n",
            "destructured parameters are not supported in agent functions (Coyote refuses them too)",
        ),
        ("/** F. */\nexport function f(a: string {}\n", "syntax error"),
        ("function f() {}\n", "this agent tools file declares no function a model can call"),
    ],
)
def test_typescript_functions_coyote_refuses(source: str, message: str) -> None:
    with pytest.raises(CompileError) as refused:
        compile_functions(source, "agents/a/tools.ts", "loki")
    assert refused.value.problems[0].message.startswith(message), refused.value


SEVERAL = {
    "tools.sh": (BASH, "3 argc commands (# @cmd) (list_notes, remove-note, undescribed)"),
    "tools.py": ("def a():\n    '''A.'''\n\ndef b():\n    '''B.'''\n", "2 functions and no 'run' (a, b)"),
    "tools.js": ("/** A. */\nexport function a() {}\n", "1 function and no 'run' (a)"),  # one is enough in tools.*
    "tools.ts": (
        "/** A. */\nexport function a(): void {}\nexport async function b(): Promise<void> {}\n",
        "2 functions and no 'run' (a, b)",
    ),
}


@pytest.mark.parametrize("file", list(SEVERAL))
def test_an_agents_tools_file_is_not_one_tool(file: str) -> None:
    source, what = SEVERAL[file]
    with pytest.raises(CompileError) as refused:
        compile_source(source, file)
    suffix = file.split(".")[1]
    assert refused.value.problems[0].message == (
        f"this file holds {what}, as an agent's tools file does: as one tool it would run none of them"
    )
    assert refused.value.problems[0].hint == (
        f"put it at agents/NAME/tools.{suffix} beside an index.yaml (llm-functions) or config.yaml (Loki) and use "
        "toolexec --agent NAME list; or keep one function named run (a 'main' for Bash)"
    )


def test_a_bash_tool_that_runs_nothing_is_refused() -> None:
    source = '#!/usr/bin/env bash\nset -e\n# @describe Does nothing.\nhelper() { :; }\neval "$(argc --argc-eval "$0" "$@")"\n'
    with pytest.raises(CompileError) as refused:
        compile_source(source, "idle.sh")
    assert str(refused.value) == (
        "idle.sh:1:1: the script declares nothing it can run: no main function, and no command at the top level\n"
        "  hint: put the tool's work in main() { ... }, which runs with the argc_* variables bound"
    )
    top_level = source.replace('eval "$(argc', 'echo hi >> "$LLM_OUTPUT"\neval "$(argc')
    assert compile_source(top_level, "busy.sh").warnings == (
        "busy.sh:1:1: warning: no main function; the script's top-level code is the tool",
    )


def _as_toolexec_declares(declaration: dict) -> dict:
    """A generator's declaration with toolexec's deliberate difference applied: an array's enum goes in its items."""
    for schema in declaration["parameters"]["properties"].values():
        if schema.get("type") == "array" and "enum" in schema:
            schema["items"]["enum"] = schema.pop("enum")
    return declaration


def test_bash_functions_against_the_real_argc() -> None:
    """Loki's parsers/bash.rs (ported to jq) over the real ``argc --argc-export``, on the fixtures and on BASH."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    from tests.conftest import REPO

    argc = Path(os.environ.get("TOOLEXEC_REFERENCE_ARGC") or REPO.parent / "shared" / "reference" / "argc")
    if not argc.is_file() or shutil.which("jq") is None:
        pytest.skip(f"needs the reference argc ({argc}) and jq")
    port = REPO / "tests" / "executor" / "agent_goldens" / "loki" / "parsers_bash.jq"
    fixtures = REPO / "tests" / "executor" / "agent_fixtures"
    sources = {p: p.read_text() for p in sorted(fixtures.glob("*/agents/*/tools.sh"))}
    sources[Path("agents/a/tools.sh")] = BASH.replace("# @cmd\nundescribed", "# @cmd Undescribed no more\nundescribed")
    for path, source in sources.items():
        exported = subprocess.run(
            [str(argc), "--argc-export", "/dev/stdin"], input=source, capture_output=True, text=True, check=True
        )
        expected = json.loads(
            subprocess.run(["jq", "-f", str(port)], input=exported.stdout, capture_output=True, text=True, check=True).stdout
        )
        expected = [_as_toolexec_declares(d) for d in expected if d["name"] != "_instructions"]
        ours = [d.to_function() for d in compile_functions(source, str(path), "loki")]
        assert json.dumps(ours) == json.dumps(expected), path
