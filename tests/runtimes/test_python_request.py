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
    status, output, stderr = _run_bootstrap(tmp_path, tool, data)
    assert (status, stderr) == (0, "")
    return json.loads(output)


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


def _run_bootstrap(tmp_path: Path, tool: Path, data: bytes) -> tuple[int, str, str]:
    output = tmp_path / "output"
    output.write_text("")
    done = subprocess.run(
        [sys.executable, str(BOOTSTRAP), str(tool)],
        input=data,
        env={**os.environ, "LLM_OUTPUT": str(output)},
        capture_output=True,
        timeout=60,
    )
    return done.returncode, output.read_text(), done.stderr.decode()


def test_the_bootstrap_runs_the_code_toolexec_compiled_only_on_the_python_that_compiled_it(tmp_path: Path) -> None:
    """A bootstrap of the same Python runs the code object handed over (its own compiler is never started); any other
    compiles the source. Told apart here by handing over code compiled from another text."""
    import marshal

    from toolexec.state import CODE_TAG

    tool = tmp_path / "which.py"
    source = 'def run() -> str:\n    """Which."""\n    return "from the source"\n'
    other = compile(source.replace("from the source", "from the code"), str(tool), "exec", dont_inherit=True)
    handed = (CODE_TAG, marshal.dumps(other))
    assert _run_bootstrap(tmp_path, tool, request({}, source, None, handed)) == (0, "from the code", "")
    elsewhere = ("30b00f0 cpython-311", handed[1])  # another Python's tag: its code is never loaded
    assert _run_bootstrap(tmp_path, tool, request({}, source, None, elsewhere)) == (0, "from the source", "")


def test_a_python_tool_is_handed_its_code_compiled_once_and_its_failures_show_its_lines(
    project: Project, launch_mode: str
) -> None:
    """The runtime hands the bootstrap the tool compiled by this Python (kept in the private state: a second call
    compiles nothing); a traceback still shows the tool's own lines. Warm, the tool's server imported it once, and
    forks every call from it: nothing is kept, and the second call starts no other server."""
    from toolexec.runtimes.warm_fork import running_servers
    from toolexec.state import State

    project.tool("fails.py", 'def run(x: int) -> int:\n    """Fail."""\n    return 1 // x  # the failing line\n')
    executor = project.executor(runtimes={"python": sys.executable})
    assert executor.call("fails", {"x": 1}).output == "1"
    state = State(project.root / "functions").validators_dir
    kept = sorted(state.iterdir()) if state.exists() else []
    servers = running_servers()
    if launch_mode == "warm":
        assert (kept, len(servers)) == ([], 1)
    else:
        assert kept  # the tool's code (and the stored validator's, once read from its record)
    failed = executor.call("fails", {"x": 0})
    assert (failed.ok, failed.error) == (
        False,
        "Tool call 'fails' exited with code 1: ZeroDivisionError: integer division or modulo by zero",
    )
    assert "return 1 // x  # the failing line" in failed.stderr
    assert (sorted(state.iterdir()) if state.exists() else []) == kept
    assert running_servers() == servers
