"""The structure that keeps calls fast (timings themselves live in benchmarks/, never here).

A one-shot ``run`` on a fresh catalog imports no parser, schema library or event loop; a
Python tool's bootstrap imports ``asyncio`` only for a coroutine ``run``; a call reads the
index and the called tool's record only; a no-change build reads no tool file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, Project
from toolexec.build import build
from toolexec.config import load_config
from toolexec.state import State

NOOP_SH = '#!/usr/bin/env bash\n# @describe Echo.\n# @option --text The text.\nmain() {\n    printf "%s" "$argc_text" >>"$LLM_OUTPUT"\n}\n'
GOOD = 'def run(x: int) -> int:\n    """Double x."""\n    return 2 * x\n'
# The lean rules as ruff reads them (pyproject.toml, where each says why): what the modules of a one-shot run may
# not import at their top, and which modules those are.
_LINT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
BANNED = tuple(_LINT["flake8-tidy-imports"]["banned-module-level-imports"])
_LEAN_GLOB = next(key[1:] for key, rules in _LINT["per-file-ignores"].items() if key.startswith("!") and "TID253" in rules)


def _expand(glob: str) -> list[str]:
    """The paths a ruff glob of ``{a,b}`` alternatives names."""
    start = glob.find("{")
    if start < 0:
        return [glob]
    depth, end, parts, last = 0, start, [], start + 1
    for end in range(start, len(glob)):
        depth += {"{": 1, "}": -1}.get(glob[end], 0)
        if depth == 1 and glob[end] == ",":
            parts.append(glob[last:end])
            last = end + 1
        if depth == 0:
            break
    parts.append(glob[last:end])
    return [path for part in parts for path in _expand(glob[:start] + part + glob[end + 1 :])]


FOLDERS = {"executor": "toolexec", "runtimes": "toolexec.runtimes"}
LEAN = {
    ".".join([FOLDERS[folder], *([] if stem == "__init__" else [stem])])
    for folder, stem in (path.removesuffix(".py").split("/") for path in _expand(_LEAN_GLOB))
}


def read_index(project: Project) -> dict[str, Any]:
    """catalog.json: its first line (names, where each row is, the pack) with the rows that follow as ``entries``."""
    head, *rows = (project.root / "functions" / "catalog.json").read_text().splitlines()
    return {**json.loads(head), "entries": [json.loads(row) for row in rows]}


def imported_by_run(config: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    """The output of a one-shot ``toolexec run`` and every module it imported (from ``-v``: ``-X importtime`` misses
    what is imported once the call has started); ``env`` is its environment (default: this process's)."""
    return imported_by(config, "run", *argv, env=env)


def imported_by(config: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    """The output of ``toolexec ARGV`` and every module it imported (see :func:`imported_by_run`)."""
    done = subprocess.run(
        [sys.executable, "-v", "-m", "toolexec", "--config", str(config), *argv],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    modules = {found[1] for line in done.stderr.splitlines() if (found := re.match(r"import '([\w.]+)' ", line))}
    return done.stdout, modules


def test_one_shot_run_on_a_fresh_catalog_imports_nothing_heavy(project: Project) -> None:
    project.tool("echo.sh", NOOP_SH)
    config = project.configure()
    output, first = imported_by_run(config, "echo", '{"text": "one"}')
    assert output == "one"
    assert {"toolexec.compilers", "tree_sitter", "yaml"} <= first  # the first run builds the catalog
    output, modules = imported_by_run(config, "echo", '{"text": "two"}')
    assert output == "two"
    assert sorted(m for m in modules if m.split(".")[0] in BANNED or m.startswith("toolexec.compilers")) == []


# What a call loads only when it uses the feature: per-tool caps, questions, the span and audit line (and OpenTelemetry's
# set-up), the mcp: section's readers, a runtime command that needs shell quoting; a schema copy needs no `copy`.
ON_DEMAND = {
    "toolexec.caps",
    "toolexec.capspec",
    "toolexec.asking",
    "toolexec.observe",
    "toolexec.tracing",
    "toolexec.mcp_settings",
    "shlex",
    "copy",
}


def test_a_plain_one_shot_call_loads_no_module_of_a_feature_it_does_not_use(project: Project) -> None:
    project.tool("echo.sh", NOOP_SH)
    project.tool("double.py", GOOD)
    config = project.configure(runtimes={"python": sys.executable})
    build(load_config(config))
    for name, arguments, expected in [("echo", '{"text": "a"}', "a"), ("double", '{"x": 2}', "4")]:
        untraced = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        output, modules = imported_by_run(config, name, arguments, env=untraced)
        assert (output, sorted(ON_DEMAND & modules)) == (expected, [])


@pytest.mark.parametrize(
    ("settings", "env", "loaded"),
    [
        ({"tool_limits": {"echo": {"max_concurrency": 2}}}, {}, {"toolexec.caps", "toolexec.capspec"}),
        ({"audit_log": "audit.jsonl"}, {}, {"toolexec.observe", "toolexec.tracing"}),
        ({}, {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, {"toolexec.observe", "toolexec.tracing"}),
        ({"mcp": {"page_size": 5}}, {}, {"toolexec.mcp_settings"}),
        ({"runtimes": {"bash": "'bash'"}}, {}, {"shlex"}),
    ],
    ids=["caps", "audit", "tracing", "mcp-section", "quoted-runtime"],
)
def test_a_feature_in_use_loads_its_module(
    project: Project, settings: dict[str, Any], env: dict[str, str], loaded: set[str]
) -> None:
    """The other side of the test above: each on-demand module is loaded once its feature is used (and works)."""
    project.tool("echo.sh", NOOP_SH)
    config = project.configure(**settings)
    build(load_config(config))
    untraced = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    output, modules = imported_by_run(config, "echo", '{"text": "a"}', env={**untraced, **env})
    # (OpenTelemetry's own packages import `copy`: only toolexec's modules are asked to stay unloaded)
    others = sorted(m for m in (ON_DEMAND - loaded) & modules if m.startswith("toolexec."))
    assert (output, sorted(loaded & modules), others) == ("a", sorted(loaded), [])
    if "audit_log" in settings:
        assert json.loads((project.root / "audit.jsonl").read_text())["tool"] == "echo"


NOOP_JS = "/** Echo.\n * @param {string} text - The text.\n */\nexport function run(text) {\n  return text;\n}\n"


def test_the_lean_rules_cover_every_module_a_one_shot_run_loads(project: Project) -> None:
    """ruff's lean rules (pyproject.toml) are scoped to the modules a one-shot run of a tool of each kind loads."""
    assert {"toolexec.cli", "toolexec.calls", "toolexec.engine", "toolexec.runtimes.process"} <= LEAN
    assert {"typing", "dataclasses", "argparse", "tree_sitter", "yaml"} <= set(BANNED)
    project.tool("echo.sh", NOOP_SH)
    project.tool("double.py", GOOD)
    project.tool("echo_js.js", NOOP_JS)
    config = project.configure()
    build(load_config(config))
    loaded: set[str] = set()
    for name, arguments, output in [
        ("echo", '{"text": "a"}', "a"),
        ("double", '{"x": 2}', "4"),
        ("echo_js", '{"text": "b"}', "b"),
    ]:
        printed, modules = imported_by_run(config, name, arguments)
        assert printed == output
        loaded |= {m for m in modules if m.startswith("toolexec")}
    assert sorted(loaded - LEAN - {"toolexec.__main__"}) == []
    assert {"toolexec.runtimes.bash", "toolexec.runtimes.python", "toolexec.runtimes.javascript"} <= loaded


def test_python_bootstrap_imports_asyncio_only_for_a_coroutine_run(project: Project) -> None:
    project.tool(
        "plain.py",
        'import sys\n\ndef run() -> str:\n    """Report."""\n    return str(sorted(m for m in ("asyncio", "inspect") if m in sys.modules))\n',
    )
    project.tool(
        "coro.py",
        'import sys\n\nasync def run() -> str:\n    """Report."""\n    return str("asyncio" in sys.modules)\n',
    )
    executor = project.executor()
    assert executor.call("plain", {}).output == "[]"
    assert executor.call("coro", {}).output == "True"


def test_a_call_reads_only_the_called_tools_record(project: Project) -> None:
    for n in range(5):
        project.tool(f"t{n}.py", GOOD)
    config = project.configure()
    report = build(load_config(config))
    index_file = project.root / "functions" / "catalog.json"
    index = read_index(project)
    pack_file = State(project.root / "functions").records_dir / f"{index['pack']}.pack"
    pack = bytearray(pack_file.read_bytes())
    for row in index["entries"]:
        if row["name"] != "t3":  # a call that read any other record would fail to and rebuild
            offset, length = row["at"]
            pack[offset : offset + length] = b"x" * length
    pack_file.write_bytes(bytes(pack))
    head, *rows = index_file.read_text().splitlines()
    rows = [row if json.loads(row)["name"] == "t3" else "x" * len(row) for row in rows]  # nor any other row
    index_file.write_text("\n".join([head, *rows]) + "\n")
    before = index_file.stat().st_mtime_ns
    done = subprocess.run(
        [sys.executable, "-m", "toolexec", "--config", str(config), "run", "t3", '{"x": 21}'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert (done.stdout, report.compiled) == ("42", 5)
    assert index_file.stat().st_mtime_ns == before
    assert pack_file.read_bytes() == bytes(pack)
    assert project.executor().call("t1", {"x": 1}).output == "2"  # a damaged index or record is rebuilt
    assert read_index(project)["entries"][1]["name"] == "t1"


def test_a_lost_record_is_rebuilt_not_an_error(project: Project) -> None:
    project.tool("tool.py", GOOD)
    project.tool("other.py", GOOD)
    executor = project.executor()
    assert executor.call("tool", {"x": 1}).output == "2"
    shutil.rmtree(State(project.root / "functions").records_dir)
    assert project.executor().call("tool", {"x": 2}).output == "4"
    shutil.rmtree(State(project.root / "functions").records_dir)
    assert [t.name for t in project.executor().tools()] == ["other", "tool"]
    report = build(load_config(project.configure()))
    assert (report.ok, report.compiled) == (True, 0)


def test_the_validator_is_generated_once_and_kept_in_the_record(project: Project) -> None:
    project.tool("tool.py", GOOD)
    config = project.configure()
    assert project.executor().call("tool", {"x": 1}).output == "2"
    index = read_index(project)
    offset, length = index["entries"][0]["at"]
    pack = (State(project.root / "functions").records_dir / f"{index['pack']}.pack").read_bytes()
    assert "def validate" in json.loads(pack[offset : offset + length])["validator"]
    refused = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "toolexec", "--config", str(config), "run", "tool", '{"x": "one"}'],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert "parameter 'x': expected an integer, got a string \"one\"" in refused.stderr
    # Explaining a rejection needs jsonschema; the stored fast validator needed no fastjsonschema.
    modules = {line.rsplit("|", 1)[1].strip() for line in refused.stderr.splitlines() if line.startswith("import time:")}
    assert ("jsonschema" in modules, "fastjsonschema" in modules) == (True, False)


def test_a_no_change_build_reads_no_tool_file(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(3):
        project.tool(f"t{n}.py", GOOD)
    config = load_config(project.configure())
    assert build(config).compiled == 3
    functions = project.root / "functions" / "functions.json"
    written = functions.stat().st_mtime_ns

    def no_reading(self: Path) -> bytes:
        raise AssertionError(f"read {self}")

    with monkeypatch.context() as patch:  # undone alone: the isolated HOME and cache stay
        patch.setattr(Path, "read_bytes", no_reading)
        report = build(config)
    assert (report.ok, report.compiled, [t for t in report.catalog.tools]) == (True, 0, ["t0", "t1", "t2"])
    assert functions.stat().st_mtime_ns == written  # nothing changed, nothing rewritten
    os.utime(project.tools / "t1.py")  # a new stat, the same content: read, hashed, not compiled
    assert build(config).compiled == 0
    project.tool("t1.py", GOOD.replace("Double", "Twice"))
    report = build(config)
    assert (report.compiled, report.catalog.tools["t1"].description) == (1, "Twice x.")
    assert [f["description"] for f in json.loads(functions.read_text())] == ["Double x.", "Twice x.", "Double x."]


@pytest.mark.parametrize(
    "request_text",
    [
        '{"arguments": {"text": "h\\u00e9 \\"q\\"", "n": [1, 2.5, -3e2, null, true, false, {}]}}',
        '  {"arguments": {"text": "h\\u00e9 \\"q\\"", "n": [1, 2.5, -3e2, null, true, false, {}]}}\n',  # json's own path
    ],
)
def test_the_python_bootstrap_reads_a_request_as_json_does(project: Project, tmp_path: Path, request_text: str) -> None:
    from toolexec.runtimes.python import BOOTSTRAP

    tool = project.tool("echo.py", 'import json\n\ndef run(**kw):\n    """Echo."""\n    return json.dumps(kw, sort_keys=True)\n')
    output = tmp_path / "output"
    done = subprocess.run(
        [sys.executable, str(BOOTSTRAP), str(tool)],
        input=request_text.encode(),
        env={**os.environ, "LLM_OUTPUT": str(output)},
        capture_output=True,
        check=True,
    )
    assert done.stderr == b""
    assert output.read_text() == json.dumps(json.loads(request_text)["arguments"], sort_keys=True)


def test_a_damaged_record_of_the_called_tool_is_rebuilt(project: Project) -> None:
    project.tool("tool.py", GOOD)
    assert project.executor().call("tool", {"x": 1}).output == "2"
    for record in State(project.root / "functions").records_dir.iterdir():
        record.write_text('{"declaration": ')
    assert project.executor().call("tool", {"x": 3}).output == "6"
    assert project.executor().call("tool", {"x": 4}).output == "8"


def test_edits_append_to_the_pack_and_a_mostly_dead_pack_is_rewritten(project: Project) -> None:
    for n in range(3):
        project.tool(f"t{n}.py", GOOD)
    config = load_config(project.configure())
    records = State(project.root / "functions").records_dir
    build(config)
    first = read_index(project)["pack"]
    packs = set()
    for n in range(40):
        project.tool("t1.py", GOOD.replace("Double x.", f"Double x, take {n}. " + "Padding. " * 400))
        report = build(config)
        assert report.compiled == 1
        packs.add(read_index(project)["pack"])
    assert first in packs and len(packs) > 1  # appended to at first, rewritten once mostly dead
    index = read_index(project)
    live = sum(row["at"][1] for row in index["entries"])
    assert (records / f"{index['pack']}.pack").stat().st_size <= 2 * live + (1 << 16)
    executor = project.executor()
    assert [executor.call(f"t{n}", {"x": n}).output for n in range(3)] == ["0", "2", "4"]
    assert executor.describe("t1").description.startswith("Double x, take 39.")


# A one-shot run of a tool, naming what Python's compiler is asked to compile (the "compile" audit event; the
# standard library's namedtuples compile "<string>" sources).
COUNT_COMPILES = """
import sys
compiled = []
sys.addaudithook(lambda event, args: compiled.append(args[1]) if event == "compile" and args[1] != "<string>" else None)
from toolexec.cli import main
status = main(sys.argv[1:])
print(sorted(set(compiled)), file=sys.stderr)
"""


def test_a_one_shot_call_runs_the_validator_compiled_by_an_earlier_process(project: Project) -> None:
    """Python's compiler costs a process ~1.4 ms the first time: the stored validator's compiled form is kept."""
    project.tool("tool.py", GOOD)
    config = project.configure(runtimes={"python": sys.executable})
    build(load_config(config))
    validators = State(project.root / "functions").validators_dir

    def run(x: int) -> tuple[str, str]:
        argv = ["--config", str(config), "run", "tool", json.dumps({"x": x})]
        done = subprocess.run([sys.executable, "-c", COUNT_COMPILES, *argv], capture_output=True, text=True, check=True)
        return done.stdout, done.stderr.strip()

    both = str(sorted([str(project.tools / "tool.py"), "<toolexec validator>"]))  # the tool's code goes to its Python
    assert run(1) == ("2", both)  # the first run compiles them and keeps them
    assert run(2) == ("4", "[]")
    kept = sorted(validators.iterdir())
    assert [path.stat().st_mode & 0o777 for path in kept] == [0o600, 0o600]
    for path in kept:
        path.write_bytes(path.read_bytes()[:-1] + b"x")  # damaged: compiled again, never loaded
    assert run(3) == ("6", both)
    assert run(4) == ("8", "[]")
    refused = subprocess.run(
        [sys.executable, "-m", "toolexec", "--config", str(config), "run", "tool", '{"x": "one"}'], capture_output=True, text=True
    )
    assert (refused.returncode, refused.stderr.strip()) == (
        2,
        "toolexec: invalid arguments for tool 'tool':\n- parameter 'x': expected an integer, got a string \"one\"",
    )


def test_list_reads_the_index_alone(project: Project) -> None:
    """`toolexec list` shows every tool from the index's rows: with every record unreadable, it still lists them
    (a record read would fail its digest check, and the catalog would be rebuilt with a new pack)."""
    for n in range(4):
        project.tool(f"t{n}.py", GOOD.replace("Double x.", f"Double x, number {n}."))
    project.tool("broken.py", "def run(:\n")
    config = project.configure()
    build(load_config(config))
    index = read_index(project)
    pack_file = State(project.root / "functions").records_dir / f"{index['pack']}.pack"
    pack_file.write_bytes(b"x" * pack_file.stat().st_size)
    done = subprocess.run(
        [sys.executable, "-m", "toolexec", "--config", str(config), "list", "--json"], capture_output=True, text=True, check=True
    )
    listed = {row["name"]: (row["description"], row["error"] is None) for row in json.loads(done.stdout)}
    assert listed == {
        **{f"t{n}": (f"Double x, number {n}.", True) for n in range(4)},
        "broken": (None, False),
    }
    assert (read_index(project)["pack"], pack_file.read_bytes()) == (index["pack"], b"x" * pack_file.stat().st_size)


def test_list_of_a_built_catalog_imports_no_builder_and_no_compiler(project: Project) -> None:
    """`toolexec list` shows the index: with no agent whose functions it would build, it imports neither the builder
    nor a compiler (nor what they import), whatever the languages of the tools."""
    project.tool("echo.sh", NOOP_SH)
    project.tool("double.py", GOOD)
    config = project.configure()
    build(load_config(config))
    output, modules = imported_by(config, "list")
    assert [line.split()[0] for line in output.splitlines()] == ["double", "echo"]
    builders = ("toolexec.agents", "toolexec.build", "toolexec.compilers", "tree_sitter", "yaml")  # (not the index's readers)
    heavy = sorted(m for m in modules if any(m == name or m.startswith(name + ".") for name in builders))
    assert heavy == []


@pytest.mark.parametrize("tools", [3, 120])
def test_a_calls_work_does_not_grow_with_the_number_of_tools(
    project: Project, monkeypatch: pytest.MonkeyPatch, tools: int
) -> None:
    """A call in a fresh executor stats its tool's file once and parses its own index row only, with 3 tools as
    with 120 (counted, not timed)."""
    from toolexec import Executor, catalog

    for n in range(tools):
        project.tool(f"t{n}.py", GOOD)
    config = project.configure()
    build(load_config(config))
    counts = {"rows": 0, "stats": 0}
    from_index, file_stat = catalog.Entry.from_index, catalog.file_stat

    def counted_row(row: dict[str, Any], loader: Any) -> catalog.Entry:
        counts["rows"] += 1
        return from_index(row, loader)

    def counted_stat(path: Any) -> Any:
        counts["stats"] += 1
        return file_stat(path)

    monkeypatch.setattr(catalog.Entry, "from_index", staticmethod(counted_row))
    monkeypatch.setattr(catalog, "file_stat", counted_stat)
    result = Executor(config).call("t1", {"x": 21})
    assert (result.output, counts) == ("42", {"rows": 1, "stats": 1})
