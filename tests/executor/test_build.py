"""toolexec build and the catalog: incremental, fault-isolated, and cheap to use when fresh."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import Project
from toolexec.build import build
from toolexec.config import load_config
from toolexec.state import State

GOOD = 'def run(x: int) -> int:\n    """Double x."""\n    return 2 * x\n'


def test_build_writes_plain_functions_json_and_a_separate_catalog(project: Project) -> None:
    project.tool("double.py", GOOD)
    project.tool("greet-user.py", 'def run(name: str):\n    """Greet."""\n    return "hi " + name\n')
    report = build(load_config(project.configure()))
    assert report.ok and report.compiled == 2
    functions = json.loads((project.root / "functions" / "functions.json").read_text())
    assert functions == [
        {
            "name": "double",
            "description": "Double x.",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        },
        {
            "name": "greet_user",
            "description": "Greet.",
            "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        },
    ]
    head, *rows = (project.root / "functions" / "catalog.json").read_text().splitlines()
    catalog = {**json.loads(head), "entries": [json.loads(row) for row in rows]}  # a first line, then a row per tool
    first = catalog["entries"][0]
    pack = (State(project.root / "functions").records_dir / f"{catalog['pack']}.pack").read_bytes()
    offset, length = first["at"]
    record = json.loads(pack[offset : offset + length])
    assert (first["file"], record["declaration"]["language"], record["declaration"]["invocation"]["kind"]) == (
        "double.py",
        "python",
        "kwargs",
    )
    assert len(first["sha256"]) == 64


def test_unchanged_files_are_not_recompiled(project: Project) -> None:
    project.tool("a.py", GOOD)
    project.tool("b.py", GOOD)
    config = load_config(project.configure())
    assert build(config).compiled == 2
    assert build(config).compiled == 0
    project.tool("b.py", GOOD.replace("Double", "Twice"))
    report = build(config)
    assert report.compiled == 1
    assert report.catalog.tools["b"].description == "Twice x."
    assert build(config, force=True).compiled == 2


def test_one_broken_tool_never_stops_the_others(project: Project) -> None:
    project.tool("good.py", GOOD)
    project.tool("bad.py", "def run(*args):\n    pass\n")
    config = load_config(project.configure(["bad.py", "good.py", "missing.py"]))
    report = build(config)
    bad = project.tools / "bad.py"
    assert not report.ok
    assert list(report.catalog.tools) == ["good"]
    assert report.problems == [
        f"{bad}:1:5: function 'run' has no docstring\n"
        '  hint: start the body with a docstring that says what the tool does: """Get the weather for a city."""\n'
        f"{bad}:1:9: parameter '*args' cannot be described to a model\n"
        "  hint: declare each parameter by name, e.g. def run(path: str, limit: int = 10)",
        f"{project.config}: visible tool 'missing.py' not found in {project.tools}",
    ]
    result = project.executor(["bad.py", "good.py"]).call("bad", {})
    assert (result.status, result.exit_code) == ("refused", 2)
    assert result.error.startswith("tool 'bad' failed to build:\n")


def test_duplicate_and_invalid_names(project: Project) -> None:
    project.tool("same.py", GOOD)
    project.tool("same-name.py", GOOD)
    project.tool("same_name.py", GOOD)
    project.tool("we ird.py", GOOD)
    report = build(load_config(project.configure(["same.py", "same-name.py", "same_name.py", "we ird.py", "smae.py"])))
    assert report.problems == [
        f"{project.tools / 'same_name.py'}:1:1: tool name 'same_name' is already used by same-name.py; rename one of the files",
        f"{project.tools / 'we ird.py'}:1:1: invalid tool name 'we ird': names may use only letters, digits, '_', '.', ':' and '-'\n"
        "  hint: rename the file (or the name field) to something like 'my_tool'",
        f"{project.config}: visible tool 'smae.py' not found in {project.tools}; did you mean 'same.py'?",
    ]


def test_enabled_tools_and_mapping_aliases(project: Project) -> None:
    for name in ("fs_cat", "fs_ls", "web", "other"):
        project.tool(f"{name}.py", GOOD)
    executor = project.executor(enabled_tools="fs, web", mapping_tools={"fs": "fs_cat,fs_ls"})
    assert [t.name for t in executor.tools()] == ["fs_cat", "fs_ls", "web"]
    assert [t.name for t in executor.tools(enabled_only=False)] == ["fs_cat", "fs_ls", "other", "web"]
    # only enabled tools may be called: a visible one that is not enabled is refused, saying how to enable it
    refused = executor.call("other", {"x": 2})
    assert (refused.status, refused.exit_code, refused.error) == (
        "refused",
        2,
        f"tool 'other' is visible but not enabled ({project.config}); add it to enabled_tools in your config.yaml",
    )
    assert executor.call("fs_cat", {"x": 2}).output == "4"
    report = project.executor(enabled_tools=["fs", "wbe"], mapping_tools={"fs": "fs_cat,fs_lss"}).build()
    assert report.problems == [
        f"{project.config}: mapping_tools.fs names unknown tool 'fs_lss'; did you mean 'fs_ls'?",
        f"{project.config}: enabled_tools names unknown tool 'wbe'; did you mean 'web'?",
    ]


def test_stale_catalog_is_rebuilt_before_a_call(project: Project) -> None:
    project.tool("tool.py", GOOD)
    executor = project.executor()
    assert executor.call("tool", {"x": 1}).output == "2"
    project.tool("tool.py", GOOD.replace("2 * x", "3 * x"))
    assert executor.call("tool", {"x": 1}).output == "3"
    project.tool("new.py", GOOD)
    assert project.executor().call("new", {"x": 5}).output == "10"


def test_fresh_catalog_call_loads_no_parser_no_yaml(project: Project) -> None:
    project.tool("tool.py", GOOD)
    config = project.configure()
    probe = textwrap.dedent(
        f"""
        import sys
        from toolexec import Executor
        result = Executor({str(config)!r}).call("tool", {{"x": 4}})
        heavy = sorted(m for m in ("tree_sitter", "yaml", "jsonschema", "toolexec.compilers") if m in sys.modules)
        print(result.output, heavy)
        """
    )
    first = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert first.stdout.strip() == "8 ['toolexec.compilers', 'tree_sitter', 'yaml']"
    second = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert second.stdout.strip() == "8 []"


@pytest.mark.parametrize("why", ["read-only", "embedded"])
def test_generated_files_go_to_the_user_cache(project: Project, monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    project.tool("tool.py", GOOD)
    config_path = project.configure()
    functions = project.root / "functions"
    if why == "read-only":
        # what os.access answers a non-root user for a 0555 directory (root may write anyway)
        real_access = os.access
        monkeypatch.setattr("toolexec.state.os.access", lambda p, mode: False if Path(p) == functions else real_access(p, mode))
        config = load_config(config_path)
    else:
        config = dataclasses.replace(load_config(config_path), embedded=True)
    report = build(config)
    assert report.ok
    assert config.state_dir.parent == Path.home() / ".cache" / "toolexec" / "state"
    assert json.loads((config.state_dir / "functions.json").read_text())[0]["name"] == "tool"
    assert not (functions / "functions.json").exists() and not (functions / "catalog.json").exists()


def test_declaration_order_survives_the_stored_catalog(project: Project) -> None:
    """Properties keep their source order when a later process reads the declaration from the catalog."""
    project.tool("order.py", 'def run(zeta: str, alpha: int = 1, mid: bool = False) -> str:\n    """Order."""\n    return zeta\n')
    config = project.configure()
    build(load_config(config))
    probe = textwrap.dedent(
        f"""
        from toolexec import Executor
        ex = Executor({str(config)!r})
        print(list(ex.describe("order").parameters["properties"]), ex.call("order", {{"zeta": "z", "x": 1}}).error)
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (
        "['zeta', 'alpha', 'mid'] invalid arguments for tool 'order':\n"
        "- unknown parameter 'x'; known parameters: zeta, alpha, mid"
    )


GREET_SH = '#!/usr/bin/env bash\n# @describe Greet.\n# @option --name! who\nmain() { echo "hello $argc_name" >> "$LLM_OUTPUT"; }\neval "$(argc --argc-eval "$0" "$@")"\n'


def test_copies_of_last_good_sources_are_pruned_once_nothing_serves_them(project: Project) -> None:
    """A broken Bash tool runs its last good text from a copy in the private state; once the tool builds again (or
    another version is the last good one) the copy goes at the next build, after a grace for calls in flight."""
    project.tool("greet.sh", GREET_SH)
    project.tool("other.sh", GREET_SH.replace("hello", "hi"))
    executor = project.executor()
    assert executor.call("greet", {"name": "a"}).output == "hello a\n"
    assert executor.call("other", {"name": "a"}).output == "hi a\n"
    for file in ("greet.sh", "other.sh"):
        project.tool(
            file,
            (project.root / "functions" / "tools" / file)
            .read_text()
            .replace("# @describe Greet.\n", "# @describe Greet.\n# @option --n <INT\n"),
        )
    executor = project.executor()
    assert [executor.call(n, {"name": "b"}).output for n in ("greet", "other")] == ["hello b\n", "hi b\n"]
    copies = executor.config.state.private_dir / "last-good"
    assert len(list(copies.iterdir())) == 2
    project.tool("greet.sh", GREET_SH)  # greet builds again; other stays broken and keeps serving its copy
    report = build(load_config(project.config))
    assert len(list(copies.iterdir())) == 2  # too recent to go: a call may have taken its snapshot before
    for copy in copies.iterdir():
        os.utime(copy, (1, 1))
    build(load_config(project.config))
    assert report.ok is False
    assert [p.name for p in copies.iterdir()] == [p.parent.name for p in copies.glob("*/other.sh")]
    assert project.executor().call("other", {"name": "c"}).output == "hi c\n"
