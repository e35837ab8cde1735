"""Regression tests for the defects "type the seams" (issue 9) fixed, one per defect.

Each test fails on the code before the refactoring: a call id that became a path, a tool
named '..', an unwritable state directory ending in a traceback, a failure message taken
from the last line of stderr, a broken module tool filed under its file name, and a
catalog that kept stale enabled_tools problems.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import Project, toolexec, wrapper_interpreter

# Writes `size` bytes to LLM_OUTPUT: beyond a small max_output_bytes, the whole is kept in a file.
WRITER = 'import os\n\ndef run(size: int) -> None:\n    """Write size bytes."""\n    open(os.environ["LLM_OUTPUT"], "w").write("x" * size)\n'
OUTPUT_NAME = r"{stem}-[0-9a-f]{{8}}\.output"


def writer(project: Project) -> Path:
    """A project whose one tool's output is capped at 64 bytes; returns the kept-outputs folder."""
    project.tool("writer.py", WRITER)
    project.configure(max_output_bytes=64)
    return project.root / "functions" / "cache" / ".outputs"


def files_outside(root: Path, inside: Path) -> list[Path]:
    """Every file below ``root`` that is not below ``inside``."""
    return sorted(p for p in root.rglob("*") if p.is_file() and inside not in p.parents)


# --- 1. a call id never becomes a path -----------------------------------------------------

SAFE_IDS = [
    ("../../escaped", "escaped"),
    ("/tmp/absolute", "tmp_absolute"),
    ("a/b", "a_b"),
    ("..", "call"),
    ("x" * 256, "x" * 48),
    ("résumé:1", "r_sum_1"),
]


@pytest.mark.parametrize(("call_id", "stem"), SAFE_IDS, ids=["dotdot", "absolute", "slash", "only-dots", "long", "unicode"])
def test_a_call_id_names_a_kept_output_only_inside_the_outputs_folder(project: Project, call_id: str, stem: str) -> None:
    outputs = writer(project)
    result = project.executor(max_output_bytes=64).call("writer", {"size": 1000}, call_id=call_id)
    assert (result.ok, result.tool_call_id) == (True, call_id)
    kept = Path(str(result.output_file))
    assert kept.parent == outputs
    assert re.fullmatch(OUTPUT_NAME.format(stem=re.escape(stem)), kept.name)
    assert kept.read_text() == "x" * 1000
    assert files_outside(project.root.parent, outputs) == sorted(
        [project.config, project.tools / "writer.py", *(project.root / "functions").glob("*.json")]
    )


BAD_IDS = [
    ("x" * 257, "a call id may have at most 256 characters, got 257"),
    ("bad\nid", "a call id may not contain control characters or lone surrogates, got 'bad\\nid'"),
    ("nul\x00", "a call id may not contain control characters or lone surrogates, got 'nul\\x00'"),
    ("half\ud800", "a call id may not contain control characters or lone surrogates, got 'half\\ud800'"),
]


@pytest.mark.parametrize(("call_id", "error"), BAD_IDS, ids=["too-long", "newline", "nul", "surrogate"])
def test_a_call_id_that_cannot_be_handed_to_a_tool_is_refused(project: Project, call_id: str, error: str) -> None:
    outputs = writer(project)
    result = project.executor(max_output_bytes=64).call("writer", {"size": 1000}, call_id=call_id)
    assert (result.ok, result.status, result.exit_code, result.reason, result.error) == (
        False,
        "refused",
        2,
        "bad_request",
        error,
    )
    assert result.tool_call_id == "invalid-call-id"
    assert not outputs.exists()


def test_cli_run_call_id_keeps_the_output_inside_the_state_directory(project: Project) -> None:
    outputs = writer(project)
    done = toolexec("--config", str(project.config), "run", "writer", '{"size": 1000}', "--json", "--call-id", "../../../../x/y")
    result = json.loads(done.stdout)
    assert (done.returncode, done.stderr, result["tool_call_id"]) == (0, "", "../../../../x/y")
    kept = Path(result["output_file"])
    assert kept.parent == outputs and re.fullmatch(OUTPUT_NAME.format(stem="x_y"), kept.name)
    assert kept.read_text() == "x" * 1000


def test_cli_run_refuses_a_call_id_with_a_lone_surrogate(project: Project) -> None:
    """An argv byte that is not UTF-8 arrives as a lone surrogate (surrogateescape)."""
    import subprocess
    import sys

    outputs = writer(project)
    argv = [sys.executable, "-m", "toolexec", "--config", str(project.config), "run", "writer", '{"size": 1000}']
    done = subprocess.run([*argv, "--call-id", b"id\xff"], capture_output=True, timeout=120)  # type: ignore[list-item]
    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr == (b"toolexec: a call id may not contain control characters or lone surrogates, got 'id\\udcff'\n")
    assert not outputs.exists()


def test_cli_batch_ids_keep_outputs_inside_the_state_directory(project: Project) -> None:
    outputs = writer(project)
    ids = ["../../../escaped", "/etc/absolute", "y" * 300, "tab\there"]
    batch = [{"id": i, "type": "function", "function": {"name": "writer", "arguments": '{"size": 1000}'}} for i in ids]
    done = toolexec("--config", str(project.config), "call", input=json.dumps(batch))
    assert (done.returncode, done.stderr) == (0, "")
    messages = json.loads(done.stdout)
    # each result answers the id the model sent, so the provider can match it, even when that id was refused
    assert [m["tool_call_id"] for m in messages] == ids
    assert [m["content"] for m in messages[2:]] == [
        "a call id may have at most 256 characters, got 300",
        "a call id may not contain control characters or lone surrogates, got 'tab\\there'",
    ]
    kept = sorted(outputs.iterdir())
    assert [re.sub(r"-[0-9a-f]{8}\.", "-#.", p.name) for p in kept] == ["escaped-#.output", "etc_absolute-#.output"]
    assert all(p.read_text() == "x" * 1000 for p in kept)
    assert files_outside(project.root / "functions", outputs) == sorted(
        [project.tools / "writer.py", *(project.root / "functions").glob("*.json")]
    )


# --- 2. a tool name can never address the functions dir or toolexec's own folders -----------

MODULE_TOOL = 'export default {{\n  name: "{name}",\n  description: "A module tool.",\n  inputSchema: {{ type: "object", properties: {{}} }},\n  run() {{ return "ran"; }},\n}};\n'


@pytest.mark.parametrize("name", [".", "..", ".outputs", ".typescript"])
def test_a_module_tool_may_not_take_a_dot_name(project: Project, name: str) -> None:
    from toolexec.compilers import compile_source
    from toolexec.errors import CompileError

    path = str(project.tool("sneaky.js", MODULE_TOOL.format(name=name)))
    with pytest.raises(CompileError) as raised:
        compile_source(MODULE_TOOL.format(name=name), path)
    assert str(raised.value) == (
        f"{path}:2:9: invalid tool name {name!r}: a name may not start with '.'\n"
        "  hint: rename the file (or the name field) to something like 'my_tool'"
    )
    report = project.executor().build()
    assert report.problems == [str(raised.value)]
    assert report.catalog.tools == {}
    assert sorted(p.name for p in (project.root / "functions").iterdir()) == ["catalog.json", "functions.json", "tools"]


@pytest.mark.parametrize("name", ["", ".", "..", ".outputs", ".typescript", "a/b", "../x", "/abs"])
def test_a_tool_cache_is_always_a_folder_of_its_own(project: Project, name: str) -> None:
    from toolexec.errors import BadRequest
    from toolexec.state import State

    state = State(project.root / "functions")
    with pytest.raises(BadRequest) as raised:
        state.tool_cache(name)
    assert str(raised.value).startswith(f"invalid tool name {name!r}: ")
    assert not (project.root / "functions" / "cache").exists()
    assert state.tool_cache("ok.name") == project.root / "functions" / "cache" / "ok.name"


# --- 3. an unwritable state directory falls back, or is refused naming it ------------------

GOOD = 'import os\n\ndef run() -> str:\n    """Where my cache is."""\n    return os.environ["LLM_TOOL_CACHE_DIR"]\n'


def read_only(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """``directory`` as on a read-only mount (tests run as root, who may write anywhere else)."""
    real = os.statvfs

    def statvfs(path: object) -> object:
        result = real(path)  # type: ignore[arg-type]
        if Path(str(path)) != directory:
            return result
        return os.statvfs_result((*result[:8], result.f_flag | os.ST_RDONLY, result.f_namemax))

    monkeypatch.setattr("toolexec.state.os.statvfs", statvfs)


def unwritable(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """What os.access answers a user for a folder another user owns."""
    real = os.access
    monkeypatch.setattr("toolexec.state.os.access", lambda p, mode: False if Path(p) == directory else real(p, mode))


@pytest.mark.parametrize("why", ["read-only functions dir", "another user's cache"])
def test_an_unwritable_state_directory_falls_back_to_the_user_cache(
    project: Project, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    from toolexec.state import digest

    project.tool("where.py", GOOD)
    functions = project.root / "functions"
    if why == "read-only functions dir":
        read_only(monkeypatch, functions)
    else:
        (functions / "cache").mkdir()
        unwritable(monkeypatch, functions / "cache")
    result = project.executor().call("where", {})
    state = Path.home() / ".cache" / "toolexec" / "state" / digest(str(functions))
    assert (result.ok, result.output) == (True, str(state / "cache" / "where"))
    assert sorted(p.name for p in state.iterdir()) == ["cache", "catalog.json", "functions.json"]
    assert sorted(p.name for p in functions.iterdir()) == (["tools"] if why == "read-only functions dir" else ["cache", "tools"])


@pytest.fixture
def no_state_anywhere(project: Project, monkeypatch: pytest.MonkeyPatch) -> str:
    """A read-only functions dir, and a user cache that cannot be created (its parent is a file)."""
    blocker = project.root / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    read_only(monkeypatch, project.root / "functions")
    project.tool("where.py", GOOD)
    project.configure()
    return str(blocker / "cache" / "toolexec" / "state")


def test_a_call_without_any_writable_state_directory_is_refused_naming_it(project: Project, no_state_anywhere: str) -> None:
    from toolexec import Executor

    result = Executor(project.config).call("where", {}, call_id="c1")
    assert result.error is not None
    directory = result.error.split("cannot write toolexec's state in ", 1)[1].split(":", 1)[0]
    assert directory.startswith(no_state_anywhere)
    assert (result.ok, result.status, result.reason, result.exit_code, result.error) == (
        False,
        "unavailable",
        "state",
        127,
        f"cannot write toolexec's state in {directory}: Not a directory; "
        "make it writable, or remove it so that the user cache is used",
    )


@pytest.mark.parametrize("command", [("build",), ("run", "where", "{}"), ("list",)])
def test_the_cli_without_any_writable_state_directory_exits_with_a_message(
    capsys: pytest.CaptureFixture[str], project: Project, no_state_anywhere: str, command: tuple[str, ...]
) -> None:
    from tests.conftest import cli

    status, out, err = cli(capsys, "--config", str(project.config), *command)
    assert (status, out) == (127, "")
    assert re.fullmatch(
        f"toolexec: cannot write toolexec's state in {re.escape(no_state_anywhere)}[^:]*: Not a directory; "
        "make it writable, or remove it so that the user cache is used\n",
        err,
    )


# --- 4. a failing tool's error is the exception it raised, every line ------------------------

THROWS_JS = '/** Throw. */\nexport function run() {\n  console.error("tool says this");\n  throw new Error("first line\\nsecond line\\nthird line");\n}\n'
RAISES_PY = 'import sys\n\ndef run():\n    """Raise."""\n    print("tool says this", file=sys.stderr)\n    raise ValueError("bad value\\non two lines")\n'


def noisy_wrapper(directory: Path, program: str) -> Path:
    """An interpreter wrapper (as npx or a version manager) that prints a notice after the tool ends."""
    wrapper = wrapper_interpreter(directory, f"noisy-{program}", program)
    wrapper.write_text(f'#!/bin/sh\n{program} "$@"\nstatus=$?\necho "npm notice New major version available" >&2\nexit $status\n')
    return wrapper


@pytest.mark.parametrize("wrapped", [False, True], ids=["direct", "noisy-wrapper"])
@pytest.mark.parametrize(
    ("file", "source", "program", "error", "trace_start", "trace_end"),
    [
        (
            "throws.mjs",
            THROWS_JS,
            "node",
            "Error: first line\nsecond line\nthird line",
            "Error: first line\nsecond line\nthird line\n    at run (file://",
            r"    at main \(\S*/runtimes/node_bootstrap\.cjs:\d+:\d+\)",
        ),
        (
            "raises.py",
            RAISES_PY,
            "python3",
            "ValueError: bad value\non two lines",
            "Traceback (most recent call last):\n",
            "ValueError: bad value\\non two lines",
        ),
    ],
    ids=["javascript", "python"],
)
def test_the_error_is_the_exception_not_the_last_line_of_stderr(
    project: Project,
    tmp_path: Path,
    file: str,
    source: str,
    program: str,
    error: str,
    trace_start: str,
    trace_end: str,
    wrapped: bool,
) -> None:
    shebang = f"#!{noisy_wrapper(tmp_path, program)}\n" if wrapped else ""
    project.tool(file, shebang + source)
    result = project.executor().call(file.split(".")[0], {})
    name = file.split(".")[0]
    assert result.error == f"Tool call '{name}' exited with code 1: {error}"
    assert (result.status, result.exit_code, result.reason) == ("error", 1, "tool_failed")
    # stderr is the tool's own (what the interpreter prints for an uncaught exception), then the wrapper's notice
    notice = "npm notice New major version available\n" if wrapped else ""
    assert re.search(f"\\n{trace_end}\\n{notice}\\Z", result.stderr), result.stderr
    assert result.stderr.startswith(f"tool says this\n{trace_start}")
    assert result.stderr.count("npm notice") == wrapped


# --- 5. a broken module tool is filed under the name it declares -----------------------------


def test_a_broken_module_tool_is_filed_under_its_declared_name(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    from tests.conftest import cli

    broken = MODULE_TOOL.format(name="foo").replace('description: "A module tool.",\n', "")
    project.tool("module.js", broken)
    project.configure()
    result = project.executor().call("foo", {})
    assert (result.status, result.reason) == ("refused", "tool_broken")
    assert result.error is not None and result.error.startswith("tool 'foo' failed to build:\n")
    status, out, err = cli(capsys, "--config", str(project.config), "list")
    assert (status, err) == (0, "")
    assert out.startswith(f"foo  javascript  FAILED TO BUILD: {project.tools / 'module.js'}:")


def test_a_broken_edit_keeps_the_last_good_version(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    from tests.conftest import cli

    path = project.tool("module.js", MODULE_TOOL.format(name="foo"))
    config = str(project.configure())
    assert cli(capsys, "--config", config, "build")[0] == 0
    path.write_text(MODULE_TOOL.format(name="foo").replace('description: "A module tool.",\n', ""))
    status, out, err = cli(capsys, "--config", config, "build")
    problem = err.strip()
    assert (status, out) == (
        1,
        f"built 1 tool(s), 1 failed (1 compiled); wrote {project.root / 'functions' / 'functions.json'}\n",
    )
    assert problem.startswith(f"{path}:")
    result = project.executor().call("foo", {})
    assert (result.ok, result.output) == (True, "ran")
    assert cli(capsys, "--config", config, "list") == (
        0,
        f"foo  javascript  A module tool.  (unconfined: declares no sandbox policy)\nfoo  javascript  FAILED TO BUILD: {problem.splitlines()[0]}\n",
        "",
    )


# --- 6. enabled_tools problems follow the config in use ------------------------------------


def test_enabled_tools_problems_follow_an_edit_of_enabled_tools(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    from tests.conftest import cli

    project.tool("add.py", 'def run(a: int) -> int:\n    """Add."""\n    return a\n')
    config = project.configure(enabled_tools=["add", "ad"])
    unknown = f"{config}: enabled_tools names unknown tool 'ad'; did you mean 'add'?"
    assert project.executor(enabled_tools=["add", "ad"]).build().problems == [unknown]
    assert cli(capsys, "--config", str(config), "build")[2] == unknown + "\n"
    # the stored catalog stays fresh across an edit of enabled_tools, and holds no config-level problem
    from toolexec.catalog_store import load_catalog
    from toolexec.config import load_config

    project.configure(enabled_tools=["add"])
    edited = load_config(config)
    stored = load_catalog(edited)
    assert stored is not None and stored.is_fresh(edited)
    assert stored.problems(edited) == []
    head = (project.root / "functions" / "catalog.json").read_text().split("\n", 1)[0]
    assert sorted(json.loads(head)) == ["files", "fingerprint", "format", "functions", "names", "offsets", "pack", "tally"]
    assert project.executor(enabled_tools=["add"]).build().problems == []
    assert cli(capsys, "--config", str(config), "build")[:2] == (
        0,
        f"built 1 tool(s), 0 failed (0 compiled); wrote {project.root / 'functions' / 'functions.json'}\n",
    )
    project.configure(enabled_tools=["add", "sub"])
    assert cli(capsys, "--config", str(config), "build") == (
        1,
        f"built 1 tool(s), 0 failed (0 compiled); wrote {project.root / 'functions' / 'functions.json'}\n",
        f"{config}: enabled_tools names unknown tool 'sub'\n",
    )


def test_catalog_diff_and_round_trip(project: Project) -> None:
    from toolexec.catalog import Catalog, Diff
    from toolexec.catalog_store import load_catalog

    one = 'def run(a: int) -> int:\n    """One."""\n    return a\n'
    project.tool("keep.py", one)
    project.tool("edit.py", one)
    project.tool("gone.py", one)
    executor = project.executor()
    before = executor.build().catalog
    assert load_catalog(executor.config) == before
    project.tool("edit.py", one.replace("One.", "Edited."))
    (project.tools / "gone.py").unlink()
    project.tool("new.py", one)
    after = project.executor().build().catalog
    assert after.diff(before) == Diff(added=("new",), removed=("gone",), changed=("edit",))
    assert before.diff(after) == Diff(added=("gone",), removed=("new",), changed=("edit",))
    copy = Catalog(fingerprint=after.fingerprint, entries=after.entries)
    assert not after.diff(after) and after.diff(copy) == Diff((), (), ())
    assert load_catalog(project.executor().config) == after
