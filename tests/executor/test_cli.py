"""The toolexec command as a user runs it: exit statuses, stdout/stderr discipline, --json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO, Project, cli, toolexec
from tests.helpers import wait_until

# What list says of a tool that declares no sandbox policy under the default sandbox: declared.
UNCONFINED = (
    "it declares no sandbox policy (sandbox: declared): its files, network and environment are not confined, "
    "only its own PID namespace and the baseline limits apply"
)
ADD = 'def run(a: int, b: int = 1) -> int:\n    """Add two numbers."""\n    return a + b\n'
FAIL = 'import sys\n\ndef run():\n    """Fail loudly."""\n    print("partial")\n    sys.stderr.write("it broke\\n")\n    sys.exit(4)\n'


def test_run_prints_only_the_output(project: Project) -> None:
    project.tool("add.py", ADD)
    config = str(project.configure())
    done = toolexec("--config", config, "run", "add", '{"a": 2, "b": 40}')
    assert (done.returncode, done.stdout, done.stderr) == (0, "42", "")
    from_stdin = toolexec("--config", config, "run", "add", input='{"a": 1}')
    assert (from_stdin.returncode, from_stdin.stdout) == (0, "2")
    dash = toolexec("--config", config, "run", "add", "-", input='{"a": 5}')
    assert (dash.returncode, dash.stdout) == (0, "6")


def test_run_json_result_object(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    project.tool("add.py", ADD)
    status, out, err = cli(capsys, "--config", str(project.configure()), "run", "add", '{"a": 1}', "--json", "--call-id", "c1")
    result = json.loads(out)
    assert isinstance(result.pop("duration_ms"), float)
    assert result == {
        "ok": True,
        "status": "ok",
        "output": "2",
        "error": None,
        "exit_code": 0,
        "stderr": "",
        "tool_call_id": "c1",
        "tool_name": "add",
        "signal": None,
        "tool_call_error": None,
        "notes": [],
        "output_file": None,
        "stderr_file": None,
        "reason": None,
    }
    assert (status, err) == (0, "")


def test_failing_tool_exit_status_and_streams(project: Project) -> None:
    project.tool("fail.py", FAIL)
    config = str(project.configure())
    done = toolexec("--config", config, "run", "fail")
    assert (done.returncode, done.stdout) == (4, "partial\n")
    assert done.stderr == "it broke\ntoolexec: Tool call 'fail' exited with code 4\n"  # the reason is said once
    as_json = json.loads(toolexec("--config", config, "run", "fail", "--json").stdout)
    assert (as_json["ok"], as_json["exit_code"], as_json["tool_call_error"], as_json["stderr"]) == (
        False,
        4,
        "Tool call 'fail' exited with code 4",
        "it broke\n",
    )


RAISES = 'def run(x: int) -> str:\n    """Fail."""\n    raise ValueError(f"bad value {x}")\n'
SAYS = """#!/usr/bin/env bash
# @describe Fail, or succeed with a warning.
# @option --code <INT>
main() { echo "first line" >&2; echo "oops: it broke" >&2; exit "$argc_code"; }
"""
QUIET = 'import sys\n\ndef run():\n    """Fail silently."""\n    sys.exit(5)\n'
NAP = 'import sys, time\n\ndef run():\n    """Say something, then sleep."""\n    print("going to sleep", file=sys.stderr, flush=True)\n    time.sleep(60)\n'


@pytest.mark.parametrize(
    ("tool", "arguments", "code", "error"),
    [
        ("raises", '{"x": 1}', 1, "toolexec: Tool call 'raises' exited with code 1"),
        ("says", '{"code": 3}', 3, "toolexec: Tool call 'says' exited with code 3"),
        ("quiet", "{}", 5, "toolexec: Tool call 'quiet' exited with code 5"),
        ("nap", "{}", 124, "toolexec: Tool call 'nap' timed out after 1s"),
    ],
)
def test_a_failure_is_said_once(project: Project, tool: str, arguments: str, code: int, error: str) -> None:
    sources = {"raises.py": RAISES, "says.sh": SAYS, "quiet.py": QUIET, "nap.py": NAP}
    for file, source in sources.items():
        project.tool(file, source)
    timeout = "1" if tool == "nap" else "60"  # only the napping tool is meant to time out, even on a loaded machine
    done = toolexec("--config", str(project.configure()), "run", tool, arguments, "--timeout", timeout)
    assert (done.returncode, done.stdout) == (code, "")
    lines = done.stderr.splitlines()
    assert lines[-1] == error
    assert [line for line in lines if line.strip()] == list(dict.fromkeys(line for line in lines if line.strip()))
    if tool == "raises":
        assert lines[-2] == "ValueError: bad value 1"
    elif tool == "says":
        assert lines == ["first line", "oops: it broke", error]
    elif tool == "nap":
        assert lines == ["going to sleep", error]
    else:
        assert lines == [error]
    as_json = json.loads(
        toolexec("--config", str(project.configure()), "run", tool, arguments, "--timeout", timeout, "--json").stdout
    )
    assert as_json["error"].startswith(error.removeprefix("toolexec: "))  # the result keeps the detail for a model


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--json"],
        ["describe", "add"],
        ["declarations", "--format", "anthropic"],
        ["run", "add", '{"a": 1}'],
        ["run", "add", '{"a": 1}', "--json"],
        ["compile", "functions/tools/add.py"],
    ],
    ids=" ".join,
)
def test_a_reader_that_left_ends_it_quietly_with_the_sigpipe_status(project: Project, argv: list[str]) -> None:
    import os
    import subprocess
    import sys

    project.tool("add.py", ADD)
    config = str(project.configure())
    reader, writer = os.pipe()
    os.close(reader)  # as `toolexec list | head -1` once head has read its line and left
    try:
        done = subprocess.run(
            [sys.executable, "-m", "toolexec", "--config", config, *argv],
            stdout=writer,
            stderr=subprocess.PIPE,
            cwd=project.root,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (141, "")


def test_head_of_a_long_output_in_a_pipeline(project: Project) -> None:
    import subprocess
    import sys

    project.tool("add.py", ADD)
    # Far more than a pipe holds (64 KiB) and head reads: toolexec is still writing when head leaves.
    files = " ".join(["functions/tools/add.py"] * 1000)
    pipeline = f"set -o pipefail; {sys.executable} -m toolexec compile {files} | head -n 1"
    done = subprocess.run(["bash", "-c", pipeline], cwd=project.root, capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (141, "[\n", "")


def test_refusals_exit_2_with_a_message(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    project.tool("add.py", ADD)
    config = str(project.configure())
    cases = {
        ("run", "ad", "{}"): "toolexec: unknown tool 'ad'; did you mean 'add'?\n",
        (
            "run",
            "add",
            "{bad",
        ): "toolexec: arguments for tool 'add' are not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2\n",
        (
            "run",
            "add",
            "[1]",
        ): "toolexec: arguments for tool 'add' must be a JSON object of parameter names to values, got an array [1]\n",
        ("run", "add", '{"a": "x", "c": 1}'): "toolexec: invalid arguments for tool 'add':\n"
        "- unknown parameter 'c'; known parameters: a, b\n"
        "- parameter 'a': expected an integer, got a string \"x\"\n",
    }
    for args, message in cases.items():
        assert cli(capsys, "--config", config, *args) == (2, "", message), args
    from_stdin = cli(capsys, "--config", config, "run", "add", input='{"a": "one"}')
    assert from_stdin == (
        2,
        "",
        "toolexec: invalid arguments for tool 'add':\n- parameter 'a': expected an integer, got a string \"one\"\n",
    )


@pytest.mark.usefixtures("process_backend")
def test_timeout_exits_124(project: Project) -> None:
    project.tool("nap.py", 'import time\n\ndef run():\n    """Sleep."""\n    time.sleep(60)\n')
    done = toolexec("--config", str(project.configure()), "run", "nap", "--timeout", "0.5", "--json")
    result = json.loads(done.stdout)
    assert (done.returncode, result["status"], result["exit_code"]) == (124, "timeout", 124)
    assert result["tool_call_error"] == "Tool call 'nap' timed out after 0.5s"


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(
    capsys: pytest.CaptureFixture[str], project: Project, timeout: str
) -> None:
    project.tool("add.py", ADD)
    done = cli(capsys, "--config", str(project.configure()), "run", "add", '{"a": 1}', "--timeout", timeout)
    assert done == (2, "", f"toolexec: timeout must be a positive number of seconds, got {float(timeout)!r}\n")


def test_build_list_describe(project: Project) -> None:
    project.tool("add.py", ADD)
    project.tool("broken.py", "def run(:\n")
    config = str(project.configure())
    built = toolexec("--config", config, "build")
    assert built.returncode == 1
    assert built.stdout == f"built 1 tool(s), 1 failed (2 compiled); wrote {project.root / 'functions' / 'functions.json'}\n"
    assert f"{project.tools / 'broken.py'}:1:" in built.stderr
    listed = toolexec("--config", config, "list")
    assert (listed.returncode, listed.stdout) == (
        0,
        "add     python      Add two numbers.  (unconfined: declares no sandbox policy)\n"
        f"broken  python      FAILED TO BUILD: {project.tools / 'broken.py'}:1:5: function 'run' has no docstring\n",
    )
    as_json = json.loads(toolexec("--config", config, "list", "--json").stdout)
    broken = as_json.pop()
    assert as_json == [
        {
            "name": "add",
            "language": "python",
            "description": "Add two numbers.",
            "title": None,
            "summary": "Add two numbers.",
            "tags": [],
            "annotations": {"read_only": None, "destructive": None, "idempotent": None, "open_world": None},
            "source": str(project.tools / "add.py"),
            "error": None,
            "enabled": True,
            "enabled_why": "enabled: no enabled_tools (the default: all)",
            "unconfined": UNCONFINED,
        }
    ]
    assert broken == {
        "name": "broken",
        "language": "python",
        "description": None,
        "title": None,
        "summary": None,
        "tags": [],
        "annotations": None,
        "source": str(project.tools / "broken.py"),
        "error": broken["error"],
        "enabled": True,
        "enabled_why": "enabled: no enabled_tools (the default: all)",
        "unconfined": None,  # it does not build: no policy to judge
    }
    assert broken["error"].startswith(f"{project.tools / 'broken.py'}:1:5: function 'run' has no docstring\n")
    described = toolexec("--config", config, "describe", "add")
    assert described.stdout == (
        f"add  (python, {project.tools / 'add.py'})\n\nAdd two numbers.\n\nParameters:\n"
        "  a: integer (required)\n  b: integer (optional, default 1)\nSummary: Add two numbers.\n"
    )
    full = json.loads(toolexec("--config", config, "describe", "add", "--json").stdout)
    assert (full["name"], full["invocation"]["kind"], full["parameters"]["required"]) == ("add", "kwargs", ["a"])


def test_compile_needs_no_config(tmp_path: Path) -> None:
    good, bad = tmp_path / "add.py", tmp_path / "bad.py"
    good.write_text(ADD)
    bad.write_text("x = 1\n")
    done = toolexec("compile", str(good), str(bad), cwd=tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout) == [
        {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 1}},
                "required": ["a"],
            },
        }
    ]
    assert (
        done.stderr == f'{bad}:1:1: no top-level function \'run\'\n  hint: define the tool as def run(...): """What it does."""\n'
    )


def test_config_error_is_reported_not_raised(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("visible_tool: [a.py]\n")
    assert cli(capsys, "--config", str(config), "list") == (
        2,
        "",
        f"toolexec: {config}: key 'visible_tool': unknown setting: neither toolexec, Loki, Coyote nor AIChat has it; did you mean 'visible_tools'?\n",
    )


def test_init_writes_a_working_project(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    done = toolexec("init", str(target))
    assert done.returncode == 0
    assert (target / "config.yaml").is_file() and (target / "functions" / "tools" / "demo_py.py").is_file()
    listed = sorted(p.name for p in (REPO / "functions" / "tools").iterdir() if p.is_file())
    wrote = [f"wrote {target / 'config.yaml'}", *(f"wrote {target / 'functions' / 'tools' / name}" for name in listed)]
    following = f"next: cd {target} && toolexec new my_tool --lang py   (a tool of your own, listed and enabled in config.yaml)"
    assert done.stdout.splitlines() == [*wrote, following]
    again = toolexec("init", str(target))
    assert again.stderr.splitlines() == [line.replace("wrote", "kept", 1) + " (already exists)" for line in wrote]
    assert again.stdout == following + "\n"
    here = toolexec("init", cwd=target)
    assert here.stdout == "next: toolexec new my_tool --lang py   (a tool of your own, listed and enabled in config.yaml)\n"
    ran = toolexec("run", "demo_py", '{"text": "hey", "count": 2}', cwd=target)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["said"] == "hey hey"
    assert (target / "functions" / "functions.json").is_file()


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_says_which_config_and_why(
    isolated: Path, capsys: pytest.CaptureFixture[str], project: Project, where: str
) -> None:
    (isolated / "config.yaml").write_text("server: {port: 80}\n")  # another application's file
    project.tool("add.py", ADD)
    user = Path.home() / ".config" / "toolexec" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(
        project.configure().read_text().replace("visible_tools:", f"functions_dir: {project.root}/functions\nvisible_tools:")
    )
    argv = ["--verbose", "list"] if where == "before" else ["list", "--verbose"]
    assert cli(capsys, *argv) == (
        0,
        "add  python      Add two numbers.  (unconfined: declares no sandbox policy)\n",
        f"toolexec: config: skipped {isolated / 'config.yaml'}: not a toolexec config (it has neither visible_tools nor functions_dir)\n"
        f"toolexec: config: using {user} (the user config)\n"
        "toolexec: add: enabled: no enabled_tools (the default: all)\n",
    )
    # --config after the command works too, and a later --config never resets an earlier one
    assert (
        cli(capsys, "list", "--config", str(project.config))[1]
        == "add  python      Add two numbers.  (unconfined: declares no sandbox policy)\n"
    )
    assert (
        cli(capsys, "--config", str(project.config), "list")[1]
        == "add  python      Add two numbers.  (unconfined: declares no sandbox policy)\n"
    )


def test_list_shows_tools_that_failed_to_build(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    project.tool("add.py", ADD)
    project.tool("bad.py", "def run(*args):\n    '''Bad.'''\n")
    config = str(project.configure())
    status, out, err = cli(capsys, "--config", config, "list")
    problem = f"{project.tools / 'bad.py'}:1:9: parameter '*args' cannot be described to a model"
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "add  python      Add two numbers.  (unconfined: declares no sandbox policy)",
        f"bad  python      FAILED TO BUILD: {problem}",
    ]
    rows = json.loads(cli(capsys, "--config", config, "list", "--json")[1])
    assert [(r["name"], r["error"] and r["error"].split("\n")[0]) for r in rows] == [("add", None), ("bad", problem)]


def test_init_keeps_the_executable_bit_and_refuses_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os

    target = tmp_path / "new"
    assert cli(capsys, "init", str(target))[0] == 0
    for tool in (p for p in (REPO / "functions" / "tools").iterdir() if p.is_file()):  # not a __pycache__
        assert os.access(target / "functions" / "tools" / tool.name, os.X_OK) == os.access(tool, os.X_OK), tool.name
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert cli(capsys, "init", str(a_file)) == (
        2,
        "",
        f"toolexec: cannot initialise {a_file}: it is a file, not a directory; name a new or existing directory\n",
    )
    assert a_file.read_text() == "x"


def test_main_leaves_signal_handlers_and_descriptors_as_they_were(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    """A test or a library calling main(argv) keeps its own SIGINT/SIGTERM handlers (only the program installs them)."""
    import os
    import signal

    project.tool("add.py", ADD)
    config = str(project.configure())
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    fds = sorted(os.listdir("/proc/self/fd"))
    assert cli(capsys, "--config", config, "run", "add", '{"a": 1}') == (0, "2", "")
    batch = '[{"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 2}}}]'
    assert cli(capsys, "--config", config, "call", input=batch) == (
        0,
        '[{"role": "tool", "tool_call_id": "c1", "content": "3"}]\n',
        "",
    )
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert sorted(os.listdir("/proc/self/fd")) == fds


def test_the_installed_command_cancels_on_sigint(project: Project) -> None:
    """The console script is the program: SIGINT ends the tool and the batch still gets its result."""
    import signal
    import subprocess
    import sys

    project.tool(
        "wait.py",
        'import os, time\n\ndef run():\n    """Wait."""\n    open(os.environ["LLM_TOOL_CACHE_DIR"] + "/ready", "w").close()\n    time.sleep(600)\n',
    )
    ready = project.root / "functions" / "cache" / "wait" / "ready"
    command = Path(sys.executable).with_name("toolexec")
    batch = project.root / "batch.json"
    batch.write_text('[{"id": "c1", "type": "function", "function": {"name": "wait", "arguments": "{}"}}]')
    with batch.open() as stdin:
        child = subprocess.Popen(
            [command, "--config", str(project.configure()), "call"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    wait_until(lambda: ready.exists() or child.poll() is not None, "the tool to start")
    assert child.poll() is None, child.stderr.read() if child.stderr else ""
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert (child.returncode, err) == (0, "")
    assert json.loads(out) == [{"role": "tool", "tool_call_id": "c1", "content": "Tool call 'wait' was cancelled"}]


PROGRAM_WITH_A_WITNESS = """
import atexit, sys, threading, time
from toolexec.cli import program
witness, thread = sys.argv.pop(1), sys.argv.pop(1)
atexit.register(lambda: open(witness, "a").write("atexit ran\\n"))
if thread == "thread":  # a thread still at work when the command is done: the exit waits for it, as Python's does
    threading.Thread(target=lambda: (time.sleep(0.5), open(witness, "a").write("thread done\\n"))).start()
sys.argv[0] = "toolexec"
raise SystemExit(program())
"""


@pytest.mark.parametrize("thread", ["no-thread", "thread"])
def test_the_program_ends_without_teardown_yet_as_a_normal_exit_would(project: Project, thread: str) -> None:
    """Skipping the interpreter's teardown loses nothing: the status, every byte of the output (more than a pipe
    or a buffer holds), the atexit handlers (the guard's is one), and a thread still at work."""
    import subprocess
    import sys

    project.tool("big.py", 'def run(n: int) -> str:\n    """Many bytes."""\n    return "x" * n\n')
    config = str(project.configure())
    witness = project.root / "witness"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM_WITH_A_WITNESS, str(witness), thread, "--config", config, "run", "big", '{"n": 300000}'],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, len(done.stdout), set(done.stdout), done.stderr) == (0, 300000, {"x"}, "")
    expected = "thread done\natexit ran\n" if thread == "thread" else "atexit ran\n"
    assert witness.read_text() == expected


# The installed program with a witness: at exit, whether the cyclic collector is on and what a collection finds.
PROGRAM_WITH_A_COLLECTOR_WITNESS = """
import atexit, gc, sys
from toolexec.entry import program
witness = sys.argv.pop(1)
atexit.register(lambda: open(witness, "w").write(f"{gc.isenabled()} {gc.collect()}"))
sys.argv[0] = "toolexec"
raise SystemExit(program())
"""
SLEEPS = '#!/usr/bin/env bash\n# @describe Sleep.\n# @option --secs Seconds.\nmain() {\n    sleep "$argc_secs"\n}\n'


def collector_at_exit(project: Project, *argv: str) -> tuple[bool, int]:
    """The installed program run with ``argv``: (whether the collector was on at its exit, the cyclic garbage found)."""
    import subprocess
    import sys

    witness = project.root / "collector"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM_WITH_A_COLLECTOR_WITNESS, str(witness), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "TOOLEXEC_NO_SERVER": "1"},
    )
    assert (done.returncode, done.stderr) == (0, ""), done
    enabled, found = witness.read_text().split()
    return enabled == "True", int(found)


def test_the_program_runs_a_one_shot_call_without_the_cyclic_collector_and_every_other_command_with_it(
    project: Project,
) -> None:
    """Start-up is spent without collections; only a one-shot run (one call, then the end) keeps the collector off:
    a command that may live long (list here; mcp and serve take the same path) gets it back once parsed."""
    project.tool("add.py", ADD)
    config = str(project.configure())
    assert collector_at_exit(project, "--config", config, "run", "add", '{"a": 1}')[0] is False
    assert collector_at_exit(project, "--config", config, "list")[0] is True
    assert collector_at_exit(project, "--config", config, "describe", "add")[0] is True


def test_a_one_shot_call_makes_no_more_cyclic_garbage_the_longer_its_tool_runs(project: Project) -> None:
    """What keeps the collector off safe: the garbage only a collection would free is a fixed amount per call, not an
    amount per tick of the wait (a tool running for hours must not grow toolexec's memory)."""
    project.tool("nap.sh", SLEEPS)
    config = str(project.configure())
    enabled, short = collector_at_exit(project, "--config", config, "run", "nap", '{"secs": "0"}')
    assert enabled is False
    _, long = collector_at_exit(project, "--config", config, "run", "nap", '{"secs": "1.5"}')
    assert short < 2000
    assert long <= short + 50, (short, long)


def test_main_leaves_the_collector_as_its_caller_had_it(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    """Only the program turns the collector on or off: a library calling main(argv) keeps its own choice."""
    import gc

    project.tool("add.py", ADD)
    config = str(project.configure())
    gc.disable()
    try:
        assert cli(capsys, "--config", config, "list")[0] == 0
        assert gc.isenabled() is False
    finally:
        gc.enable()
    assert cli(capsys, "--config", config, "run", "add", '{"a": 1}') == (0, "2", "")
    assert gc.isenabled() is True


LISTING = '''from typing import TypedDict


class Listing(TypedDict):
    entries: list[str]


def run(path: str, limit: int = 100) -> Listing:
    """List a directory.

    Args:
        path: Directory to list.
        limit: At most this many entries.

    Title: List directory
    Tags: fs, read
    Read-only: true
    Idempotent: true
    Timeout: 30
    Examples:
        {"path": "."}
    Errors:
        not a directory: the path is a file
    """
    return {"entries": []}
'''
WRITE = "#!/usr/bin/env bash\n# @describe Write a file.\n# @meta tags fs,write\n# @meta destructive\n# @option --path! File.\nmain() { :; }\n"


def test_list_tags_keeps_tools_with_every_tag(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    project.tool("add.py", ADD)
    project.tool("listing.py", LISTING)
    project.tool("write.sh", WRITE)
    project.tool("bad.py", "def run(*args):\n    '''Bad.'''\n")
    config = str(project.configure())
    assert cli(capsys, "--config", config, "list", "--tags", "fs") == (
        0,
        "listing  python      List a directory.  [fs, read]  (unconfined: declares no sandbox policy)\nwrite    bash        Write a file.  [fs, write]  (unconfined: declares no sandbox policy)\n",
        "",
    )
    assert cli(capsys, "--config", config, "list", "--tags", "fs, read") == (
        0,
        "listing  python      List a directory.  [fs, read]  (unconfined: declares no sandbox policy)\n",
        "",
    )
    assert cli(capsys, "--config", config, "list", "--tags", "read,write") == (0, "", "")
    rows = json.loads(cli(capsys, "--config", config, "list", "--tags", "write", "--json")[1])
    assert rows == [
        {
            "name": "write",
            "language": "bash",
            "description": "Write a file.",
            "title": None,
            "summary": "Write a file.",
            "tags": ["fs", "write"],
            "annotations": {"read_only": None, "destructive": True, "idempotent": None, "open_world": None},
            "source": str(project.tools / "write.sh"),
            "error": None,
            "enabled": True,
            "enabled_why": "enabled: no enabled_tools (the default: all)",
            "unconfined": UNCONFINED,
        }
    ]
    assert cli(capsys, "--config", config, "list", "--tags", " , ") == (
        2,
        "",
        "toolexec: --tags names no tag; write --tags fs,read\n",
    )


def test_describe_shows_the_metadata(capsys: pytest.CaptureFixture[str], project: Project) -> None:
    project.tool("listing.py", LISTING)
    config = str(project.configure())
    status, out, err = cli(capsys, "--config", config, "describe", "listing")
    assert (status, err) == (0, "")
    assert out == (
        f"listing  (python, {project.tools / 'listing.py'})\n"
        "\n"
        "List directory\n"
        "\n"
        "List a directory.\n"
        "\n"
        "Parameters:\n"
        "  path: string (required)\n"
        "      Directory to list.\n"
        "  limit: integer (optional, default 100)\n"
        "      At most this many entries.\n"
        "Summary: List a directory.\n"
        "Tags: fs, read\n"
        "Behaviour: read-only yes, idempotent yes\n"
        "Limits: timeout 30\n"
        "Examples:\n"
        '  {"path": "."}\n'
        "Errors:\n"
        "  not a directory: the path is a file\n"
        "Output:\n"
        "  {\n"
        '    "type": "object",\n'
        '    "properties": {\n'
        '      "entries": {\n'
        '        "type": "array",\n'
        '        "items": {\n'
        '          "type": "string"\n'
        "        }\n"
        "      }\n"
        "    },\n"
        '    "required": [\n'
        '      "entries"\n'
        "    ]\n"
        "  }\n"
    )
    full = json.loads(cli(capsys, "--config", config, "describe", "listing", "--json")[1])
    assert full["metadata"] == {
        "title": "List directory",
        "summary": "List a directory.",
        "tags": ["fs", "read"],
        "examples": [{"path": "."}],
        "annotations": {"read_only": True, "destructive": None, "idempotent": True, "open_world": None},
        "output_schema": {
            "type": "object",
            "properties": {"entries": {"type": "array", "items": {"type": "string"}}},
            "required": ["entries"],
        },
        "errors": ["not a directory: the path is a file"],
    }
    assert full["limits"] == {"timeout": 30.0, "max_output_bytes": None}


def test_executor_tools_filters_by_tags(project: Project) -> None:
    project.tool("listing.py", LISTING)
    project.tool("write.sh", WRITE)
    executor = project.executor()
    assert [t.name for t in executor.tools(tags=["fs"])] == ["listing", "write"]
    assert [t.name for t in executor.tools(tags=("fs", "write"))] == ["write"]
    assert [t.name for t in executor.tools(tags=["nope"])] == []


# `run` is parsed without argparse when it can be (a one-shot call does not pay for argparse); each row
# says whether the quick parser takes it, and a taken row must parse exactly as argparse parses it.
QUICK_RUN_ARGV = [
    (["run", "add"], True),
    (["run", "add", '{"a": 1}'], True),
    (["run", "add", "-"], True),
    (["--config", "c.yaml", "run", "add", "{}"], True),
    (["--config=c.yaml", "-v", "run", "add"], True),
    (["run", "add", "{}", "--json", "--timeout", "2.5", "--call-id", "c1", "--confirm", "all"], True),
    (["run", "--timeout=3", "add", "--call-id=", "--verbose"], True),
    (["--config", "a.yaml", "run", "add", "--config", "b.yaml"], True),
    (["run", "add", "--timeout", "inf"], True),
    (["run", "add", "--json", "{}"], True),  # options between the positionals, as people write them
    (["run", "add", "--timeout", "5", "{}", "--call-id", "c"], True),  # refused later, by the same check as argparse's value
    (["run", "add", "{}", "extra"], False),  # a third positional: argparse words the error
    (["run"], False),
    (["run", "add", "--timeout", "soon"], False),
    (["run", "add", "--confirm", "sometimes"], False),
    (["run", "add", "--jso"], False),  # an abbreviation: argparse decides
    (["run", "add", "-h"], False),
    (["run", "add", "--", "{}"], False),
    (["--json", "run", "add"], False),  # --json belongs after the command
    (["--timeout", "1", "run", "add"], False),
    (["run", "add", "--timeout"], False),
    (["list"], False),
    ([], False),
]


@pytest.mark.parametrize(("argv", "quick"), QUICK_RUN_ARGV, ids=[" ".join(a) or "(none)" for a, _ in QUICK_RUN_ARGV])
def test_run_is_parsed_without_argparse_exactly_as_argparse_parses_it(argv: list[str], quick: bool) -> None:
    from toolexec.cli import _parse, quick_run

    parsed = quick_run(list(argv))
    assert (parsed is not None) == quick
    if parsed is not None:
        assert vars(parsed) == vars(_parse(argv))
