"""Python tools end to end: real interpreters, real processes, LLM_OUTPUT read back."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import close_warm
from toolexec.runtimes.environment import PROMPT_UTILS

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

ECHO_ENV = '''
import os, stat

def run(text: str = "") -> dict:
    """Report the LLM_* environment and the state of the output file."""
    out = os.environ["LLM_OUTPUT"]
    return {
        "env": {k: v for k, v in os.environ.items() if k.startswith("LLM_")},
        "output_mode": oct(stat.S_IMODE(os.stat(out).st_mode)),
        "output_size": os.path.getsize(out),
        "cache_is_dir": os.path.isdir(os.environ["LLM_TOOL_CACHE_DIR"]),
        "cwd": os.getcwd(),
    }
'''


def test_llm_environment_seen_by_the_tool(project: Project, private_tmpdir: Path, launch_mode: str) -> None:
    project.tool("echo-env.py", ECHO_ENV)
    result = project.executor().call("echo_env", {}, call_id="call-42")
    assert result.ok, result.error
    seen = json.loads(result.output)
    functions = project.root / "functions"
    output = seen["env"].pop("LLM_OUTPUT")
    artifacts = seen["env"].pop("LLM_ARTIFACTS_DIR")
    assert seen == {
        "env": {
            "LLM_ROOT_DIR": str(functions),
            "LLM_TOOL_NAME": "echo_env",
            "LLM_TOOL_CACHE_DIR": str(functions / "cache" / "echo_env"),
            "LLM_TOOL_CALL_ID": "call-42",
            "LLM_TOOL_RAW_JSON": "{}",
            "LLM_PROMPT_UTILS_FILE": str(PROMPT_UTILS),
        },
        "output_mode": "0o600",
        "output_size": 0,
        "cache_is_dir": True,
        "cwd": os.getcwd(),
    }
    within = Path(output).parent
    if launch_mode == "warm":  # from the executor's pool: a private directory in TMPDIR, kept until the executor closes
        assert (within.parent, within.name.startswith("toolexec-calls-"), within.stat().st_mode & 0o777) == (
            private_tmpdir,
            True,
            0o700,
        )
        close_warm()
    else:
        assert within == private_tmpdir
    assert not Path(output).exists(), "LLM_OUTPUT must be removed after the call"
    assert (Path(artifacts).parent, Path(artifacts).exists()) == (within, False)
    assert list(private_tmpdir.iterdir()) == []


def test_generated_call_id_is_unique(project: Project) -> None:
    project.tool("echo_env.py", ECHO_ENV)
    executor = project.executor()
    first, second = (executor.call("echo_env", {}) for _ in range(2))
    ids = [json.loads(r.output)["env"]["LLM_TOOL_CALL_ID"] for r in (first, second)]
    assert ids == [first.tool_call_id, second.tool_call_id]
    assert ids[0] != ids[1] and all(i.startswith("call_") for i in ids)


@pytest.mark.parametrize(
    ("returned", "expected"),
    [
        ('"plain text"', "plain text"),
        ('{"a": 1, "b": [True, None]}', '{"a": 1, "b": [true, null]}'),
        ("[1, 2.5, 'x']", '[1, 2.5, "x"]'),
        ("42", "42"),
        ("False", "false"),
        ("None", ""),
        ("(1, 2)", "[1, 2]"),
        ("{3}", "[3]"),
        ("{'when': __import__('datetime').date(2026, 1, 2)}", '{"when": "2026-01-02"}'),
        ("type('P', (), {'__str__': lambda self: 'custom str'})()", "custom str"),
        ("'ünïcødé ✓ 日本'", "ünïcødé ✓ 日本"),
        # A lone surrogate cannot be UTF-8: U+FFFD in its place, never a traceback from the bootstrap.
        ("'a\\ud800b'", "a\ufffdb"),
        ("{'name': 'a\\ud800b'}", '{"name": "a\ufffdb"}'),
    ],
)
def test_returned_value_is_written_to_llm_output(project: Project, returned: str, expected: str) -> None:
    project.tool("value.py", f'def run():\n    """Return a value."""\n    return {returned}\n')
    result = project.executor().call("value", {})
    assert (result.ok, result.output, result.error) == (True, expected, None)


def test_async_run_is_awaited(project: Project) -> None:
    project.tool(
        "slow.py",
        'import asyncio\n\nasync def run(n: int) -> int:\n    """Double n."""\n    await asyncio.sleep(0)\n    return n * 2\n',
    )
    assert project.executor().call("slow", {"n": 21}).output == "42"


def test_tool_writing_llm_output_itself_and_printing(project: Project) -> None:
    project.tool(
        "writer.py",
        'import os\n\ndef run():\n    """Write the result by hand."""\n    print("chatter")\n'
        '    with open(os.environ["LLM_OUTPUT"], "a") as f:\n        f.write("by hand")\n',
    )
    project.tool("printer.py", 'def run(x: str):\n    """Print only."""\n    print("printed", x)\n')
    executor = project.executor()
    assert executor.call("writer", {}).output == "by hand"
    assert executor.call("printer", {"x": "y"}).output == "printed y\n"


def test_exception_is_a_failed_result_with_traceback(project: Project) -> None:
    project.tool(
        "boom.py",
        'def helper():\n    raise ValueError("the disk is full")\n\ndef run():\n    """Fail."""\n    helper()\n',
    )
    result = project.executor().call("boom", {})
    assert (result.ok, result.status, result.exit_code) == (False, "error", 1)
    assert result.tool_call_error == "Tool call 'boom' exited with code 1"
    assert result.error == "Tool call 'boom' exited with code 1: ValueError: the disk is full"
    assert _frames(result.stderr) == [("boom.py", 6, "run"), ("boom.py", 2, "helper")]
    assert result.stderr.startswith("Traceback (most recent call last):\n")
    assert result.stderr.endswith("\nValueError: the disk is full\n")


def _frames(stderr: str) -> list[tuple[str, int, str]]:
    """The (file name, line, function) of every frame a traceback shows, outermost first."""
    found = re.findall(r'^  File "([^"]+)", line (\d+), in (\S+)$', stderr, re.M)
    return [(Path(file).name, int(line), function) for file, line, function in found]


@pytest.mark.parametrize(
    ("source", "frames", "last"),
    [
        (  # a coroutine: the event loop that awaits it is toolexec's too
            'import asyncio\n\nasync def run():\n    """Fail."""\n    await asyncio.sleep(0)\n    raise KeyError("k")\n',
            [("tb.py", 6, "run")],
            "KeyError: 'k'",
        ),
        (  # failing while the module loads: the import machinery is not shown
            'SETTINGS = {}\nHOME = SETTINGS["home"]\n\ndef run():\n    """Never reached."""\n',
            [("tb.py", 2, "<module>")],
            "KeyError: 'home'",
        ),
        (  # the failure is the call itself (a decorator changed run's signature): only the error
            "def strict(f):\n    def inner():\n        return f()\n    return inner\n\n"
            '@strict\ndef run(a: int = 1):\n    """Take a."""\n    return a\n',
            [],
            "TypeError: strict.<locals>.inner() got an unexpected keyword argument 'a'",
        ),
    ],
)
def test_traceback_starts_at_the_tools_own_code(
    project: Project, source: str, frames: list[tuple[str, int, str]], last: str
) -> None:
    project.tool("tb.py", source)
    result = project.executor().call("tb", {"a": 2} if "strict" in source else {})
    assert result.ok is False
    assert _frames(result.stderr) == frames
    assert "python_bootstrap" not in result.stderr and "_python_runner" not in result.stderr
    assert "<frozen importlib" not in result.stderr
    assert result.stderr.rstrip("\n").rsplit("\n", 1)[-1] == last
    assert result.stderr.startswith("Traceback (most recent call last):\n" if frames else last)


def test_sys_exit_code_is_the_tools_status(project: Project) -> None:
    project.tool("quit.py", 'import sys\n\ndef run():\n    """Exit 3."""\n    sys.exit(3)\n')
    result = project.executor().call("quit", {})
    assert (result.ok, result.status, result.exit_code, result.tool_call_error) == (
        False,
        "error",
        3,
        "Tool call 'quit' exited with code 3",
    )


def test_ok_false_convention_is_a_failure(project: Project) -> None:
    project.tool(
        "loaf.py",
        'def run(fail: bool):\n    """Loaf style."""\n    return {"ok": not fail, "output": "fine", "error": "no luck"}\n',
    )
    executor = project.executor()
    good, bad = executor.call("loaf", {"fail": False}), executor.call("loaf", {"fail": True})
    assert (good.ok, good.output) == (True, "fine")
    assert (bad.ok, bad.output, bad.exit_code, bad.error) == (False, "", 1, "Tool call 'loaf' exited with code 1: no luck")


def test_large_and_unicode_arguments_round_trip(project: Project) -> None:
    project.tool("echo.py", 'def run(text: str) -> str:\n    """Echo."""\n    return text\n')
    project.tool(
        "digest.py",
        'import hashlib\n\ndef run(text: str) -> str:\n    """Hash."""\n    return f"{len(text)} {hashlib.sha256(text.encode()).hexdigest()}"\n',
    )
    executor = project.executor(max_output_bytes=32 << 20)
    unicode_text = "naïve café — 日本語 🚀 עברית e\u0301 \u200d 'quotes' \"double\" $HOME `x` \\n\n\ttab"
    assert executor.call("echo", {"text": unicode_text}).output == unicode_text
    big = ("0123456789abcdef✓" * 700_000)[: 10 * 1024 * 1024]
    expected = f"{len(big)} {hashlib.sha256(big.encode()).hexdigest()}"
    assert executor.call("digest", {"text": big}).output == expected
    assert executor.call("echo", {"text": big}).output == big


def test_shebang_interpreter_wins(project: Project, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    report = '\ndef run() -> str:\n    """Which python."""\n    import sys\n    return sys.prefix\n'
    project.tool("by_shebang.py", f"#!{venv}/bin/python\n{report}")
    project.tool("by_env_shebang.py", f"#!/usr/bin/env -S {venv}/bin/python -B\n{report}")
    project.tool("by_default.py", report)
    executor = project.executor()
    assert executor.call("by_shebang", {}).output == str(venv)
    assert executor.call("by_env_shebang", {}).output == str(venv)
    assert executor.call("by_default", {}).output != str(venv)


def test_runtime_from_config_then_venv_next_to_functions(project: Project, tmp_path: Path) -> None:
    configured = tmp_path / "configured"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(configured)], check=True)
    project.tool("which.py", 'def run() -> str:\n    """Which python."""\n    import sys\n    return sys.prefix\n')
    assert project.executor(runtimes={"python": f"{configured}/bin/python"}).call("which", {}).output == str(configured)
    local = project.root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(local)], check=True)
    assert project.executor().call("which", {}).output == str(local)


def test_missing_interpreter_is_a_clear_error(project: Project) -> None:
    project.tool("ghost.py", '#!/usr/bin/env python9.99\ndef run():\n    """Never runs."""\n')
    result = project.executor().call("ghost", {})
    assert (result.ok, result.status, result.exit_code) == (False, "unavailable", 127)
    assert result.error == "interpreter 'python9.99' not found; install Python 3 or set runtimes.python in config.yaml"


def test_dotenv_files_and_precedence(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    functions = project.root / "functions"
    (functions / ".env").write_text("A=from-functions\nB='from functions'\nC=from-functions # comment\nexport D=\"x\\ny\"\n")
    (functions / "tools" / ".env").write_text("B=from-tools\n")
    monkeypatch.setenv("C", "from-environment")
    project.tool(
        "env.py", 'import os\n\ndef run() -> dict:\n    """Show A-D."""\n    return {k: os.environ.get(k) for k in "ABCD"}\n'
    )
    seen = json.loads(project.executor().call("env", {}).output)
    assert seen == {"A": "from-functions", "B": "from-tools", "C": "from-environment", "D": "x\ny"}


def test_tool_reads_empty_stdin_and_sibling_imports(project: Project) -> None:
    project.tool("helpers.py", 'def greet(name):\n    return "hi " + name\n')
    project.tool(
        "uses_helper.py",
        'import sys\nfrom helpers import greet\n\ndef run(name: str) -> str:\n    """Greet."""\n    return greet(name) + repr(sys.stdin.read())\n',
    )
    assert project.executor(["uses_helper.py"]).call("uses_helper", {"name": "ana"}).output == "hi ana''"


def test_arguments_are_never_mutated(project: Project) -> None:
    project.tool("d.py", 'def run(a: int = 3) -> str:\n    """D."""\n    return str(a)\n')
    arguments: dict = {}
    assert project.executor().call("d", arguments).output == "3"
    assert arguments == {}


RUNNER_SEEN = '''import os
import sys


def run() -> list:
    """Report how the runner was loaded and the tool's import path."""
    runner = sys.modules["_python_runner"]
    return [type(runner.__loader__).__name__, os.path.isfile(runner.__cached__), sys.path[:2]]
'''


@pytest.mark.parametrize("safe_path", ["", "1"])
def test_the_runner_loads_from_bytecode_and_leaves_the_tools_import_path_as_a_scripts(
    project: Project, monkeypatch: pytest.MonkeyPatch, safe_path: str
) -> None:
    """The bootstrap script imports the runner (a script would be compiled from source at every call), under
    ``PYTHONSAFEPATH`` too; the tool finds its own folder first, then the bootstrap's as a script's (none under
    ``PYTHONSAFEPATH``), as before."""
    from toolexec.runtimes.python import BOOTSTRAP

    monkeypatch.setenv("PYTHONSAFEPATH", safe_path)
    tool = project.tool("seen.py", RUNNER_SEEN)
    executor = project.executor()
    executor.call("seen", {})  # the first call may write the runner's bytecode (as pip does at install)
    result = executor.call("seen", {})
    loader, cached, path = json.loads(result.output)
    assert (loader, cached, path[0], path[1] == str(BOOTSTRAP.parent)) == (
        "SourceFileLoader",
        True,
        str(tool.parent),
        not safe_path,
    )
