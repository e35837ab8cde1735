"""A warm tool runs the code on disk as its call starts (toolexec.runtimes.loaded): its server says which files it
loaded besides the tool's own (a sibling module, a package beside the tool, a sourced file, a file that only defines
functions, a TypeScript sibling's transpile, JavaScript siblings of each module kind), each is looked at before a
call, and a server whose files changed (edited, even keeping size and mtime; replaced by a symlink; deleted) is
replaced. Real interpreters throughout, in every language offered warm, with the sandbox off and under its baseline.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import Ordinary
from toolexec import Executor
from toolexec.records import ToolResult
from toolexec.runtimes import baseline, loaded, process_linux

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="warm calls need pidfd and /proc (Linux)")

# name → (tool file, its source, its siblings, the sibling its "word" comes from). Each tool answers its word and its
# mark, each from another sibling, and counts its loads in its cache (a Bash spare or a Node spare loads per call).
CASES: dict[str, tuple[str, str, dict[str, str], str]] = {
    "python": (
        "greet.py",
        "import os\nfrom helpers import WORD\nfrom pkg.sub import MARK\n\n"
        'with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "loads"), "a") as f:\n    f.write("x")\n\n\n'
        'def run() -> str:\n    """Greet.\n\n    Warm: true\n    """\n    return WORD + MARK\n',
        {"helpers.py": 'WORD = "hello"\n', "pkg/__init__.py": "", "pkg/sub.py": 'MARK = "!"\n'},
        "helpers.py",
    ),
    "bash": (
        "greet.sh",
        '#!/usr/bin/env bash\n# @describe Greet.\n# @meta warm\n. "${0%/*}/lib.sh"\n'
        'printf x >> "$LLM_TOOL_CACHE_DIR/loads"\nmain() { printf "%s%s" "$WORD" "$(mark)" >> "$LLM_OUTPUT"; }\n',
        # lib.sh runs a command; funcs.sh, which it sources, only defines a function
        {"lib.sh": 'WORD=hello\nsource "${BASH_SOURCE[0]%/*}/funcs.sh"\n', "funcs.sh": "mark() { printf '!'; }\n"},
        "lib.sh",
    ),
    "javascript": (
        "greet.mjs",
        'import { appendFileSync } from "node:fs";\nimport { word } from "./lib.js";\nimport { mark } from "./lib.mjs";\n'
        'import common from "./lib.cjs";\nappendFileSync(process.env.LLM_TOOL_CACHE_DIR + "/loads", "x");\n'
        "/**\n * Greet.\n * @warm\n */\nexport function run() {\n  return word + mark + common.tail;\n}\n",
        {
            "lib.js": 'export const word = "hello";\n',
            "lib.mjs": 'export const mark = "!";\n',
            "lib.cjs": 'module.exports = { tail: "" };\n',
        },
        "lib.js",
    ),
    "typescript": (
        "greet.ts",
        'import { appendFileSync } from "node:fs";\nimport { word } from "./lib.ts";\nimport { mark } from "./plain.js";\n'
        'appendFileSync(process.env.LLM_TOOL_CACHE_DIR + "/loads", "x");\n'
        "/**\n * Greet.\n * @warm\n */\nexport function run(): string {\n  return word + mark;\n}\n",
        {"lib.ts": 'export const word: string = "hello";\n', "plain.js": 'export const mark = "!";\n'},
        "lib.ts",
    ),
}
SANDBOXES = ["off", pytest.param("declared", marks=pytest.mark.skipif(not baseline.usable(), reason="needs bwrap"))]


def _make(project: Project, case: str) -> str:
    tool, source, siblings, _ = CASES[case]
    for name, text in siblings.items():
        (project.tools / name).parent.mkdir(parents=True, exist_ok=True)
        project.tool(name, text)
    project.tool(tool, source)
    return tool


def _edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` (as long) in place, the mtime kept: only the ctime tells the file changed."""
    before = path.stat()
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def _outcome(result: ToolResult, case: str) -> tuple[object, ...]:
    # (what a warm Bash tool prints while it is sourced is no call's: docs/performance.md, "What warm trades")
    return (result.ok, result.status, result.exit_code, result.output, result.error, case == "bash" or result.stderr)


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers start as if a second after the files were written (their record then proves what they loaded: see
    :data:`loaded.RACY_NS`), so that a test can tell a server kept from one replaced."""
    monkeypatch.setattr(loaded, "clocks", lambda: (time.monotonic_ns(), time.time_ns() + 10**9))


@pytest.fixture
def type_stripping(monkeypatch: pytest.MonkeyPatch) -> None:
    """TypeScript through node's own type stripping (the Node extra's node; esbuild hidden), whose cache keeps a
    transpile per sibling: the edit must reach the transpile and the server."""
    from toolexec.runtimes import typescript
    from toolexec.runtimes.interpreter import bundled_node

    if bundled_node() is None:
        pytest.skip("the Node extra is not installed; run `make test`")
    real = typescript.find_program
    monkeypatch.setattr(typescript, "find_program", lambda name, context: None if name == "esbuild" else real(name, context))


@pytest.mark.usefixtures("settled", "type_stripping")
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_edited_sibling_is_run_by_the_next_call_and_an_unedited_one_keeps_the_server(
    project: Project, case: str, sandbox: str, warm_calls: list[bool]
) -> None:
    tool = _make(project, case)
    name = Path(tool).stem
    loads = project.root / "functions" / "cache" / name / "loads"
    with Executor(project.configure([tool], sandbox=sandbox), warm=True) as executor:
        assert [executor.call(name, {}).output for _ in range(2)] == ["hello!", "hello!"]
        once = loads.read_text()
        _edit(project.tools / CASES[case][3], "hello", "howdy")
        _edit(project.tools / next(s for s, text in CASES[case][2].items() if "!" in text), "!", "?")
        assert executor.call(name, {}).output == "howdy?"
        assert executor.call(name, {}).output == "howdy?"
    assert warm_calls == [True] * 4
    if case == "python" or (case == "bash" and sandbox == "off"):  # one load per server: kept, then replaced once
        assert (once, loads.read_text()) == ("x", "xx")


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.usefixtures("type_stripping")
def test_a_sibling_swapped_for_a_symlink_or_deleted_is_what_the_next_call_finds(
    project: Project, case: str, warm_calls: list[bool]
) -> None:
    tool = _make(project, case)
    name, word = Path(tool).stem, project.tools / CASES[case][3]
    other = word.with_name(f"other{word.suffix}")
    other.write_text(word.read_text().replace("hello", "hallo"))
    config = project.configure([tool])
    with Executor(config, warm=True) as executor, Executor(config, warm=False) as cold:
        assert executor.call(name, {}).output == "hello!"
        word.unlink()
        word.symlink_to(other.name)
        assert executor.call(name, {}).output == "hallo!"
        assert warm_calls == [True, True]
        word.unlink()
        gone = executor.call(name, {})
        assert _outcome(gone, case) == _outcome(cold.call(name, {}), case)  # whatever a cold call makes of it
        assert gone.output != "hallo!"


@pytest.mark.usefixtures("settled", "type_stripping")
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_sibling_edited_after_the_check_is_read_by_the_next_call(
    project: Project, case: str, monkeypatch: pytest.MonkeyPatch, warm_calls: list[bool]
) -> None:
    """The guarantee: a call runs the code on disk when it started (when its server was looked at) or later, as a cold
    call reads its files once it has started; an edit made during the call is the next call's, if not already this
    one's (a spare that loads once its call has come, a Bash spare sourced since): never missed."""
    tool = _make(project, case)
    name, word = Path(tool).stem, project.tools / CASES[case][3]
    checked = loaded.Loaded.serves
    edits: list[str] = []

    def serves_then_edited(self: loaded.Loaded, began: int) -> bool:
        answer = checked(self, began)
        if edits:
            _edit(word, "hello", edits.pop())
        return answer

    monkeypatch.setattr(loaded.Loaded, "serves", serves_then_edited)
    with Executor(project.configure([tool]), warm=True) as executor:
        assert executor.call(name, {}).output == "hello!"
        edits.append("howdy")
        during = executor.call(name, {}).output
        assert executor.call(name, {}).output == "howdy!"
    assert during == "hello!" if case == "python" else during in ("hello!", "howdy!")  # a zygote loaded before
    assert warm_calls == [True] * 3


def test_a_record_proves_nothing_about_a_file_stamped_within_a_tick_of_the_start(tmp_path: Path) -> None:
    """A file changed in the same tick of the file system's clock as the server's start may change again unseen:
    such a server serves the calls that waited for it, no later one; a record taken a tick later serves until a
    file changes (a new identity: written, renamed over, deleted)."""
    path = tmp_path / "lib.py"
    path.write_text("x = 1\n")
    stamped = max(path.stat().st_mtime_ns, path.stat().st_ctime_ns)
    now = time.monotonic_ns()
    racy = loaded.taken([str(path)], now, stamped)
    assert (racy.racy, racy.serves(now - 1), racy.serves(now + 1)) == (True, True, False)
    kept = loaded.taken([str(path), str(path), ""], now, stamped + 10**9)
    assert (kept.racy, kept.files, kept.serves(now + 1)) == (False, ((str(path), loaded.identity(str(path))),), True)
    path.write_text("x = 2\n")
    assert (kept.serves(now - 1), kept.serves(now + 1)) == (True, False)
    unlisted = loaded.taken(None, now, stamped + 10**9)
    assert (unlisted.racy, unlisted.serves(now + 1)) == (True, False)
    assert loaded.parse(b"R\0/a\0relative\0/b") == ["/a", "/b"]
    assert loaded.parse(b"R\0/a\0+") is None
    assert loaded.parse(b"R") == []


def test_a_transpile_built_within_a_tick_of_its_input_is_built_again(tmp_path: Path) -> None:
    """The TypeScript cache's record of its inputs proves as much as a warm server's: stats taken before the read,
    trusted once older than the build by a tick of the clock."""
    from toolexec.runtimes import transpile

    source = tmp_path / "tool.ts"
    source.write_text("export const x = 1;\n")
    output, inputs = tmp_path / "out.mjs", tmp_path / "out.inputs.json"
    output.write_text("export const x = 1;\n")
    made = {
        "recipe": transpile.NODE_RECIPE,
        "inputs": {str(source): transpile._stat(source)},
        "digests": {output.name: transpile.sha256_hex(output.read_bytes())},
    }
    stamped = max(source.stat().st_mtime_ns, source.stat().st_ctime_ns)
    fresh = []
    for built in (stamped, stamped + 10**9):
        transpile.write_json_atomic(inputs, {**made, "built": built})
        fresh.append(transpile._fresh(output, inputs, transpile.NODE_RECIPE))
    assert fresh == [False, True]


# --- as an ordinary user ---------------------------------------------------------------------------------------------
# Two calls, the edits of the test above (as long, the mtime kept), two more; whether each ran warm, and the loads.
EDITS = """
import json, os, sys, time
from toolexec import Executor
from toolexec.runtimes import loaded, warm

config, name, word, mark = sys.argv[1:]
# servers start as if a second after the files were written (the test above's ``settled``)
loaded.clocks = lambda: (time.monotonic_ns(), time.time_ns() + 10**9)
seen = []
spawn = warm.WarmStart.spawn
def noted(self, call, spec=None):
    proc = spawn(self, call, spec)
    seen.append(proc is not None)
    return proc
warm.WarmStart.spawn = noted

def edit(path, old, new):
    before = os.stat(path)
    with open(path) as handle:
        text = handle.read()
    with open(path, "w") as handle:
        handle.write(text.replace(old, new))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

with Executor(config, warm=True) as executor:
    outputs = [executor.call(name, {}).output for _ in range(2)]
    once = open(os.path.join(executor.config.state.tool_cache(name), "loads")).read()
    edit(word, "hello", "howdy")
    edit(mark, "!", "?")
    outputs += [executor.call(name, {}).output for _ in range(2)]
    loads = open(os.path.join(executor.config.state.tool_cache(name), "loads")).read()
print(json.dumps({"outputs": outputs, "warm": seen, "loads": [once, loads], "uid": os.getuid()}))
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("case", ["python", "bash", "javascript"])
def test_an_ordinary_users_warm_tool_runs_its_edited_sibling(ordinary: Ordinary, case: str, sandbox: str) -> None:
    """As an ordinary user (its server in a user namespace of its own under the baseline): an edit of a sibling the
    server loaded is run by the next call, warm, and an unedited one keeps the server."""
    import yaml

    tool, source, siblings, word = CASES[case]
    tools = ordinary.root / "functions" / "tools"
    for name, text in {**siblings, tool: source}.items():
        (tools / name).parent.mkdir(parents=True, exist_ok=True)
        (tools / name).write_text(text)
    ordinary.config.write_text(yaml.safe_dump({"visible_tools": [tool], "sandbox": sandbox}))
    ordinary.own()
    mark = next(name for name, text in siblings.items() if "!" in text)
    done = ordinary.run("python", "-c", EDITS, str(ordinary.config), Path(tool).stem, str(tools / word), str(tools / mark))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["outputs"], found["warm"], found["uid"]) == (["hello!"] * 2 + ["howdy?"] * 2, [True] * 4, ordinary.uid)
    if case == "python" or (case == "bash" and sandbox == "off"):  # one load per server: kept, then replaced once
        assert found["loads"] == ["x", "xx"]
