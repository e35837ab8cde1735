"""``toolexec new``: a skeleton per language that builds and runs at once, and a config edited as text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import toolexec
from toolexec.authoring import add_to_config
from toolexec.errors import BadRequest

CONFIG = """\
# My agent's tools.
functions_dir: functions   # next to this file

visible_tools:
  - first.py     # the first one
  # - retired.sh
  - second.sh

# What the agent may call.
enabled_tools: first, second  # keep this short

mapping_tools: {}
"""


@pytest.mark.parametrize("lang", ["py", "sh", "ts", "js"])
def test_new_then_run(tmp_path: Path, lang: str) -> None:
    assert toolexec("init", str(tmp_path)).returncode == 0
    config = tmp_path / "config.yaml"
    before = config.read_text()
    created = toolexec("--config", str(config), "new", f"greet_{lang}", "--lang", lang)
    assert created.returncode == 0, created.stderr
    tool = tmp_path / "functions" / "tools" / f"greet_{lang}.{lang}"
    assert created.stdout == (
        f"wrote {tool}\nadded {tool.name} to visible_tools and enabled_tools in {config}\n"
        f'try it: toolexec run greet_{lang} \'{{"text": "hello", "count": 2}}\'\n'
    )
    assert os.access(tool, os.X_OK) is (lang == "sh")
    # Only the two list entries were added; every comment and line of the shipped config is kept.
    added = [line for line in config.read_text().splitlines() if line not in before.splitlines()]
    enabled_before = next(line for line in before.splitlines() if line.startswith("enabled_tools:"))
    assert added == [f"  - greet_{lang}.{lang}", f"{enabled_before}, greet_{lang}"]
    result = toolexec("--config", str(config), "run", f"greet_{lang}", '{"text": "hello", "count": 2}')
    assert (result.returncode, result.stdout) == (0, "hello hello"), result.stderr
    described = json.loads(toolexec("--config", str(config), "describe", f"greet_{lang}", "--json").stdout)
    assert described["parameters"]["required"] == ["text"]
    assert set(described["parameters"]["properties"]) == {"text", "count"}
    checked = toolexec("--config", str(config), "check", str(tool))
    assert checked.returncode == 0
    assert " error(s)" in checked.stderr and "checked 1 file(s): 0 error(s)" in checked.stderr


def test_add_to_config_keeps_every_comment() -> None:
    edited, enabled = add_to_config(CONFIG, "third.ts", "third")
    assert enabled
    assert edited == CONFIG.replace("  - second.sh\n", "  - second.sh\n  - third.ts\n").replace(
        "enabled_tools: first, second  # keep this short", "enabled_tools: first, second, third  # keep this short"
    )


@pytest.mark.parametrize(
    ("text", "expected", "enabled"),
    [
        ("visible_tools: [a.py]\nenabled_tools: all\n", "visible_tools: [a.py, new.sh]\nenabled_tools: all\n", False),
        ("visible_tools: []\n", "visible_tools: [new.sh]\n", False),
        ("functions_dir: f\n", "functions_dir: f\nvisible_tools:\n  - new.sh\n", False),
        ("visible_tools:\n- a.py\nenabled_tools:\n- a\n", "visible_tools:\n- a.py\n- new.sh\nenabled_tools:\n- a\n- new\n", True),
        ("visible_tools:\n    - a.py\n", "visible_tools:\n    - a.py\n    - new.sh\n", False),
        ("visible_tools:\n", "visible_tools:\n  - new.sh\n", False),
        ("visible_tools:\n  - a.py", "visible_tools:\n  - a.py\n  - new.sh\n", False),
    ],
)
def test_add_to_config_layouts(text: str, expected: str, enabled: bool) -> None:
    assert add_to_config(text, "new.sh", "new") == (expected, enabled)


@pytest.mark.parametrize(
    ("text", "expected", "enabled"),
    [
        ("model: x\nvisible_tools: [a.sh]\n", "model: x\nvisible_tools: [a.sh, new.sh]\nenabled_tools: new\n", True),
        (
            "model: x\nenabled_tools: null  # none, as in Loki\nvisible_tools:\n  - a.sh\n",
            "model: x\nvisible_tools:\n  - a.sh\n  - new.sh\nenabled_tools: new\n",
            True,
        ),
        ("model: x\nenabled_tools: a\n", "model: x\nenabled_tools: a, new\nvisible_tools:\n  - new.sh\n", True),
        ("model: x\nenabled_tools: all\n", "model: x\nenabled_tools: all\nvisible_tools:\n  - new.sh\n", False),
    ],
)
def test_a_new_tool_is_enabled_in_a_config_that_enables_none_without_enabled_tools(
    text: str, expected: str, enabled: bool
) -> None:
    assert add_to_config(text, "new.sh", "new", enables_none=True) == (expected, enabled)


def test_add_to_config_refuses_what_it_cannot_edit_safely() -> None:
    with pytest.raises(BadRequest, match=r"^config.yaml is not valid YAML"):
        add_to_config("visible_tools: [a\n", "new.sh", "new")
    with pytest.raises(BadRequest, match=r"^cannot add new.sh to config.yaml safely"):
        add_to_config("visible_tools: !!set {a.py}\n", "new.sh", "new")


def test_new_refusals(tmp_path: Path) -> None:
    assert toolexec("init", str(tmp_path)).returncode == 0
    config = tmp_path / "config.yaml"
    before = config.read_text()
    for args, message in [
        (["new", "demo_py", "--lang", "sh"], f"a tool named 'demo_py' is already listed in visible_tools of {config}"),
        (
            ["new", "bad name", "--lang", "py"],
            "invalid tool name 'bad name': names may use only letters, digits, '_', '.', ':' and '-'",
        ),
        (["new", "x.py", "--lang", "py"], "invalid tool name 'x.py': leave out the extension; --lang chooses it"),
        (
            ["new", "demo_js", "--lang", "js"],
            f"{tmp_path / 'functions' / 'tools' / 'demo_js.js'} already exists; choose another name or edit that file",
        ),
    ]:
        result = toolexec("--config", str(config), *args)
        assert (result.returncode, result.stderr) == (2, f"toolexec: {message}\n")
    assert config.read_text() == before
    bad_lang = toolexec("--config", str(config), "new", "x", "--lang", "rb")
    assert bad_lang.returncode == 2 and "invalid choice: 'rb'" in bad_lang.stderr
    embedded = toolexec("new", "x", "--lang", "py", cwd=tmp_path / "functions")
    assert (embedded.returncode, embedded.stderr) == (
        2,
        "toolexec: no config of your own to add 'x' to (the embedded default is in use); "
        "run `toolexec init` in a project folder first, or pass --config PATH\n",
    )
