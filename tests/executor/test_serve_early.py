"""``toolexec serve``'s waiting child starts the tool's process of the last served call ahead (toolexec.serve_early):
the next call adopts it only when it is what that call's own start would be, and it changes nothing a call sees
(its result, its environment, its directory, its config's confinement, the tool's current code); nothing is left."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.executor.test_serve import Served, _cmdline, _descendants, started, toolexec
from tests.executor.test_serve_spares import _processes_under
from tests.helpers import Ordinary, alive, wait_until
from toolexec.runtimes import baseline
from toolexec.serve_early import read_call, start_ahead, write_call

ECHO_PY = '''import os

def run(text: str) -> str:
    """Echo the text, the working directory, FOO and whether the call runs in a PID namespace of its own."""
    alone = b"bwrap" in open("/proc/1/cmdline", "rb").read()
    return f"{text}|{os.getcwd()}|{os.environ.get('FOO', 'unset')}|{'ns' if alone else 'host'}"
'''
ECHO_SH = """#!/usr/bin/env bash
# @describe Echo the text, the working directory, FOO and whether the call runs in a PID namespace of its own.
# @option --text! The text.
main() {
    local where=host
    if tr '\\0' ' ' </proc/1/cmdline | grep -q bwrap; then where=ns; fi
    printf "%s|%s|%s|%s" "$argc_text" "$PWD" "${FOO-unset}" "$where" >>"$LLM_OUTPUT"
}
"""
TOOLS = {"echo_py": ("echo_py.py", ECHO_PY), "echo_sh": ("echo_sh.sh", ECHO_SH)}
SANDBOXES = [
    pytest.param("off", id="off"),
    pytest.param(
        "declared",
        id="baseline",
        marks=pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace"),
    ),
]
# (a Bash tool under the baseline keeps the sandbox set up ahead instead: tests/executor/test_serve_spares.py)
CASES = [
    pytest.param("echo_py", "off", id="echo_py-off"),
    pytest.param("echo_py", "declared", id="echo_py-baseline", marks=SANDBOXES[1].marks),
    pytest.param("echo_sh", "off", id="echo_sh-off"),
]
BOOTSTRAPS = ("python_bootstrap.py", "bash_bootstrap.sh")


def _ahead(server: int) -> int | None:
    """The process a waiting child of ``server`` started ahead (its tool's bootstrap, waiting for the call), if any."""
    for pid in _descendants(server):
        if any(name in _cmdline(pid) for name in BOOTSTRAPS):
            return pid
    return None


def _run(config: Path, tool: str, text: str, cwd: Path, foo: str = "bar") -> tuple[int, str, bytes]:
    done = toolexec("--config", str(config), "run", tool, f'{{"text": "{text}"}}', cwd=cwd, env={**os.environ, "FOO": foo})
    return done.returncode, done.stdout.decode(), done.stderr


def _started_ahead(served: Served) -> int:
    wait_until(lambda: _ahead(served.process.pid) is not None, "the tool's process started ahead")
    found = _ahead(served.process.pid)
    assert found is not None
    return found


@pytest.mark.parametrize(("tool", "sandbox"), CASES)
def test_a_served_run_starts_in_the_tool_s_process_started_ahead_with_the_cold_run_s_result(
    project: Project, tmp_path: Path, tool: str, sandbox: str
) -> None:
    """From a tool's second served run on, the child waiting for the next call starts the tool's process ahead (its
    interpreter, under the baseline in its bwrap); the call takes it and shows what the cold run shows (the caller's
    directory and environment, the same confinement); the server's end leaves nothing of the last one."""
    project.tool(*TOOLS[tool])
    config = project.configure(sandbox=sandbox)
    here = tmp_path / "here"
    here.mkdir()
    cold = toolexec("--config", str(config), "run", tool, '{"text": "a"}', local=True, cwd=here, env={**os.environ, "FOO": "bar"})
    served = Served(config)
    spares = []
    try:
        runs = [_run(config, tool, "a", here)]
        for _ in range(2):
            spares.append(_started_ahead(served))
            runs.append(_run(config, tool, "a", here))
        last = _started_ahead(served)
    finally:
        status, count, said = served.stop()
    where = "ns" if sandbox != "off" else "host"
    assert (cold.returncode, cold.stdout.decode()) == (0, f"a|{here}|bar|{where}")
    assert runs == [(0, f"a|{here}|bar|{where}", b"")] * 3
    assert (status, count, started(said)) == (0, 3, (0, 0, 2))
    assert [alive(pid) for pid in (*spares, last)] == [False] * 3


@pytest.mark.parametrize(("tool", "sandbox"), CASES)
def test_a_tool_edited_after_its_process_started_ahead_runs_its_new_code(
    project: Project, tmp_path: Path, tool: str, sandbox: str
) -> None:
    """The process started ahead has not read the tool: edited on disk meanwhile, the call runs the new code."""
    file, source = TOOLS[tool]
    path = project.tool(file, source)
    config = project.configure(sandbox=sandbox)
    served = Served(config)
    try:
        first = _run(config, tool, "a", tmp_path)
        spare = _started_ahead(served)
        path.write_text(source.replace("|{os.getcwd()}", "|new {os.getcwd()}").replace('|%s|%s|%s"', '|new %s|%s|%s"'))
        edited = _run(config, tool, "a", tmp_path)
    finally:
        status, count, said = served.stop()
    where = "ns" if sandbox != "off" else "host"
    assert first == (0, f"a|{tmp_path}|bar|{where}", b"")
    assert edited == (0, f"a|new {tmp_path}|bar|{where}", b"")
    assert (status, count, started(said)) == (0, 2, (0, 0, 1))  # (it was the process started ahead that ran it)
    assert not alive(spare)


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_config_changed_after_the_tool_s_process_started_ahead_ends_it_and_the_call_runs_as_the_new_config_says(
    project: Project, tmp_path: Path, tool: str
) -> None:
    """A process started ahead under ``sandbox: off`` is never a call's once the config says otherwise: it is ended,
    and the call starts cold, in a PID namespace of its own, as the new config's baseline says."""
    project.tool(*TOOLS[tool])
    config = project.configure(sandbox="off")
    served = Served(config)
    try:
        first = _run(config, tool, "a", tmp_path)
        spare = _started_ahead(served)
        project.configure(sandbox="declared")
        changed = _run(config, tool, "b", tmp_path)
        wait_until(lambda: not alive(spare), "the stale process to end")
    finally:
        status, count, said = served.stop()
    assert (first, changed) == ((0, f"a|{tmp_path}|bar|host", b""), (0, f"b|{tmp_path}|bar|ns", b""))
    assert (status, count, started(said)) == (0, 2, (0, 0, 0))


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_caller_with_another_environment_or_directory_never_gets_a_process_started_for_another(
    project: Project, tmp_path: Path, tool: str
) -> None:
    """A process started ahead holds the last caller's environment and directory: a caller with another value of a
    variable (a secret of its own, say) or another working directory runs cold, seeing its own; the stale process
    is ended."""
    project.tool(*TOOLS[tool])
    config = project.configure(sandbox="off")
    other = tmp_path / "other"
    other.mkdir()
    served = Served(config)
    try:
        runs = [_run(config, tool, "a", tmp_path, foo="first-caller-secret")]
        spares = [_started_ahead(served)]
        runs.append(_run(config, tool, "b", tmp_path, foo="second"))
        spares.append(_started_ahead(served))
        runs.append(_run(config, tool, "c", other, foo="second"))
        wait_until(lambda: not any(alive(pid) for pid in spares), "the stale processes to end")
    finally:
        status, count, said = served.stop()
    assert runs == [
        (0, f"a|{tmp_path}|first-caller-secret|host", b""),
        (0, f"b|{tmp_path}|second|host", b""),
        (0, f"c|{other}|second|host", b""),
    ]
    assert (status, count, started(said)) == (0, 3, (0, 0, 0))


def test_a_process_started_ahead_is_ended_after_warm_idle_seconds_without_a_call(project: Project, tmp_path: Path) -> None:
    """A process no call came for within ``warm_idle`` seconds is ended by the child that waits; the next call runs
    cold, as it would."""
    project.tool(*TOOLS["echo_py"])
    config = project.configure(sandbox="off", warm_idle=0.5)
    served = Served(config)
    try:
        first = _run(config, "echo_py", "a", tmp_path)
        spare = _started_ahead(served)
        wait_until(lambda: not alive(spare), "the unused process to end")
        second = _run(config, "echo_py", "b", tmp_path)
    finally:
        status, count, said = served.stop()
    assert (first, second) == ((0, f"a|{tmp_path}|bar|host", b""), (0, f"b|{tmp_path}|bar|host", b""))
    assert (status, count, started(said)) == (0, 2, (0, 0, 0))


def test_a_call_told_reads_back_as_it_was_written() -> None:
    call = (["--config", "/c.yaml", "run", "echo", "{}"], b"/somewhere", {b"FOO": b"bar", b"EMPTY": b""}, 0o077)
    assert read_call(write_call(*call)) == call


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"not marshal",
        marshal.dumps(None),
        marshal.dumps((["run"], b"/x", [])),  # a field short
        marshal.dumps((["run"], b"/x", [], 0o022, 0)),  # a field more
        marshal.dumps((("run",), b"/x", [], 0o022)),  # words not a list
        marshal.dumps(([b"run"], b"/x", [], 0o022)),  # words not strings
        marshal.dumps((["run"], "/x", [], 0o022)),  # directory not bytes
        marshal.dumps((["run"], b"relative", [], 0o022)),  # not an absolute directory
        marshal.dumps((["run"], b"/x\0y", [], 0o022)),
        marshal.dumps((["run"], b"/x", [(b"A=B", b"c")], 0o022)),  # a name with =
        marshal.dumps((["run"], b"/x", [(b"", b"c")], 0o022)),
        marshal.dumps((["run"], b"/x", [(b"A", b"c\0d")], 0o022)),
        marshal.dumps((["run"], b"/x", [(b"A", "c")], 0o022)),  # a value not bytes
        marshal.dumps((["run"], b"/x", [(b"A", b"c", b"d")], 0o022)),
        marshal.dumps((["run"], b"/x", {b"A": b"c"}, 0o022)),
        marshal.dumps((["run"], b"/x", [], "022")),  # a umask not a number
        marshal.dumps((["run"], b"/x", [], True)),
        marshal.dumps((["run"], b"/x", [], -1)),
        marshal.dumps((["run"], b"/x", [], 0o1000)),
    ],
)
def test_a_call_told_that_does_not_read_back_whole_and_well_typed_starts_nothing(message: bytes) -> None:
    mask = os.umask(0o022)
    os.umask(mask)
    before = dict(os.environ), os.getcwd(), mask
    assert (read_call(message), start_ahead(message)) == (None, False)
    assert (dict(os.environ), os.getcwd(), os.umask(mask)) == before


def test_an_ordinary_users_served_calls_start_in_their_own_process_started_ahead_and_leave_nothing(
    ordinary: Ordinary,
) -> None:
    """``toolexec serve`` run by an ordinary user (started from a directory that user may not open): the process
    started ahead of its calls is that user's, the served runs after the first start in it with the first run's
    result, and nothing of it is left once it stops."""
    import subprocess

    import yaml

    root = ordinary.root
    (root / "functions" / "tools" / "echo_py.py").write_text(ECHO_PY)
    ordinary.config.write_text(
        yaml.safe_dump({"visible_tools": ["echo_py.py"], "sandbox": "off", "runtimes": {"python": ordinary.python}})
    )
    ordinary.own()
    command = [*ordinary.prefix, ordinary.python, "-m", "toolexec", "serve", "--config", str(ordinary.config), "-v"]
    pipe, nothing = subprocess.PIPE, subprocess.DEVNULL
    server = subprocess.Popen(command, stdin=nothing, stdout=nothing, stderr=pipe, text=True, env=ordinary.env)
    run = ("python", "-m", "toolexec", "--config", str(ordinary.config), "run", "echo_py", '{"text": "a"}')
    owners = []
    try:
        assert server.stderr is not None
        banner = server.stderr.readline()
        assert banner.startswith("toolexec: serving "), banner
        runs = [ordinary.run(*run)]
        for _ in range(2):
            wait_until(lambda: _ahead(server.pid) is not None, "the tool's process started ahead")
            spare = _ahead(server.pid)
            owners.append(os.stat(f"/proc/{spare}").st_uid if spare is not None else None)
            runs.append(ordinary.run(*run))
    finally:
        server.terminate()
        _, said = server.communicate(timeout=60)
    assert server.returncode == 0 and "(0 in a sandbox set up ahead, 0 forked from a warm server, 2 in their" in said, said
    assert len({done.stdout for done in runs}) == 1 and runs[0].stdout.startswith("a|")
    assert [(done.returncode, done.stderr) for done in runs] == [(0, "")] * 3
    assert owners == [ordinary.uid] * 2
    assert _processes_under(root) == []


@pytest.mark.parametrize(("tool", "sandbox"), CASES)
def test_a_directory_replaced_at_the_same_path_never_gets_a_process_started_in_the_old_one(
    project: Project, tmp_path: Path, tool: str, sandbox: str
) -> None:
    """The process started ahead stands in the directory the last call's path named then: once that directory is
    moved away and another made at its path, a caller there runs in its own directory (the path is the same, the
    directory is not), never in the old one; the stale process is ended."""
    project.tool(*TOOLS[tool])
    config = project.configure(sandbox=sandbox)
    here, old = tmp_path / "here", tmp_path / "old"
    here.mkdir()
    served = Served(config)
    try:
        first = _run(config, tool, "a", here)
        spare = _started_ahead(served)
        here.rename(old)
        here.mkdir()
        second = _run(config, tool, "b", here)
        wait_until(lambda: not alive(spare), "the stale process to end")
    finally:
        status, count, said = served.stop()
    where = "ns" if sandbox != "off" else "host"
    assert (first, second) == ((0, f"a|{here}|bar|{where}", b""), (0, f"b|{here}|bar|{where}", b""))
    assert (status, count, started(said)) == (0, 2, (0, 0, 0))


UMASK_TOOLS = {
    "mask_py": (
        "mask_py.py",
        'import os\n\ndef run(text: str) -> str:\n    """Say the umask."""\n    mask = os.umask(0)\n    os.umask(mask)\n'
        '    return f"{text}|{mask:04o}"\n',
    ),
    "mask_sh": (
        "mask_sh.sh",
        "#!/usr/bin/env bash\n# @describe Say the umask.\n# @option --text! The text.\n"
        'main() {\n    printf "%s|%s" "$argc_text" "$(umask)" >>"$LLM_OUTPUT"\n}\n',
    ),
}


@pytest.mark.parametrize(
    ("tool", "sandbox"),
    [
        pytest.param(tool.replace("echo", "mask"), *case.values[1:], id=case.id.replace("echo", "mask"), marks=case.marks)
        for case in CASES
        for tool in case.values[:1]
    ],
)
def test_a_process_started_ahead_never_runs_a_call_with_another_umask_than_its_caller_s(
    project: Project, tmp_path: Path, tool: str, sandbox: str
) -> None:
    """The process started ahead was started with the server's umask: a caller whose umask is another (077, its files
    private) runs with its own, as a cold start would, never with the server's (022: its files readable by all)."""
    project.tool(*UMASK_TOOLS[tool])
    config = project.configure(sandbox=sandbox)
    mask = os.umask(0o022)
    try:
        served = Served(config)
    finally:
        os.umask(mask)

    def run(text: str, umask: str) -> tuple[int, str, bytes]:
        command = [sys.executable, "-m", "toolexec", "--config", str(config), "run", tool, f'{{"text": "{text}"}}']
        done = subprocess.run(["sh", "-c", f'umask {umask} && exec "$@"', "sh", *command], capture_output=True, timeout=120)
        return done.returncode, done.stdout.decode(), done.stderr

    try:
        runs = [run("a", "077")]
        _started_ahead(served)
        runs.append(run("b", "077"))
        _started_ahead(served)
        runs.append(run("c", "022"))
    finally:
        status, count, said = served.stop()
    assert runs == [(0, "a|0077", b""), (0, "b|0077", b""), (0, "c|0022", b"")]
    assert (status, count, started(said)) == (0, 3, (0, 0, 1))  # (b's umask is a's: it took the process started ahead)
