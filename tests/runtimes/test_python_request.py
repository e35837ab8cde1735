"""How a Python tool's arguments reach its bootstrap: marshal's format after a NUL (read with a module every
interpreter has loaded at start), JSON text where marshal cannot hold a value; the tool sees the same values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from toolexec.runtimes.python import BOOTSTRAP, MARSHALLED, request

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

REPORT = '''import sys

SCANNER = "_json" in sys.modules  # what the bootstrap loaded before this module

import json


def run(**kw):
    """Report the arguments, whether two of them are one object, and whether the JSON scanner was loaded."""
    return json.dumps({"kw": kw, "same": kw["a"] is kw["b"], "json": SCANNER}, sort_keys=True)
'''


def _through_bootstrap(tmp_path: Path, data: bytes) -> dict:
    tool = tmp_path / "report.py"
    tool.write_text(REPORT)
    output = tmp_path / "output"
    done = subprocess.run(
        [sys.executable, str(BOOTSTRAP), str(tool)],
        input=data,
        env={**os.environ, "LLM_OUTPUT": str(output)},
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    return json.loads(output.read_text())


def test_a_request_is_marshalled_and_the_tool_gets_the_values_unshared(tmp_path: Path) -> None:
    shared = ["x", 1]
    arguments = {"a": shared, "b": shared, "text": "h\u00e9 \ud800", "n": [1, 2.5, -3e2, None, True, False, {}], "big": 2**80}
    data = request(arguments)
    assert data[:1] == MARSHALLED
    report = _through_bootstrap(tmp_path, data)
    assert report == {"kw": json.loads(json.dumps(arguments)), "same": False, "json": False}


def test_what_marshal_cannot_hold_goes_as_json(tmp_path: Path) -> None:
    class Text(str):
        pass

    arguments = {"a": Text("one"), "b": "two"}
    data = request(arguments)
    assert data == b'{"arguments": {"a": "one", "b": "two"}}'
    assert _through_bootstrap(tmp_path, data) == {"kw": {"a": "one", "b": "two"}, "same": False, "json": True}


def test_a_call_passes_its_arguments_marshalled(project: Project) -> None:
    declared = REPORT.replace("def run(**kw):", "def run(a: list, b: list):").replace(
        "return", "kw = {'a': a, 'b': b}\n    return"
    )
    project.tool("report.py", declared)
    result = project.executor().call("report", {"a": [1], "b": [1]})
    assert (result.ok, json.loads(result.output)) == (True, {"kw": {"a": [1], "b": [1]}, "same": False, "json": False})
