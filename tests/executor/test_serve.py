"""``toolexec serve``: a one-shot ``toolexec run`` through the running server prints, exits and leaves behind exactly
what the local run does; anything the server will not take runs locally, silently; the socket is the user's alone."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import alive, wait_until
from toolexec.runtimes import baseline
from toolexec.serve_client import NO_SERVER_VARIABLE, socket_folder, socket_name

ECHO_SH = """#!/usr/bin/env bash
# @describe Echo the text, the working directory and FOO.
# @option --text! The text.
main() {
    printf "%s|%s|%s" "$argc_text" "$PWD" "${FOO-unset}" >>"$LLM_OUTPUT"
}
"""
FAIL_SH = """#!/usr/bin/env bash
# @describe Fail loudly.
main() {
    echo "something broke" >&2
    exit 3
}
"""
PY = '''import os, sys, time

def run(mode: str, n: int = 1) -> str:
    """Behave as mode says: echo, sleep, flood, stdout, raise."""
    if mode == "sleep":
        time.sleep(60)
    if mode == "flood":
        return "x" * n
    if mode == "stdout":
        print("progress on stdout")
        sys.stderr.write("a warning\\n")
        return "done"
    if mode == "raise":
        raise ValueError("no good")
    return f"{mode} {os.getcwd()} {os.environ.get('FOO')}"
'''


class Served:
    """A ``toolexec serve`` of one config, in a process of its own (stopped by :meth:`stop`)."""

    def __init__(self, config: Path, *extra: str) -> None:
        self.config = config
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolexec", "serve", "--config", str(config), "-v", *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stderr is not None
        self.banner = self.process.stderr.readline()
        self.path = Path(socket_folder()) / socket_name(os.path.realpath(config))

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, int, str]:
        """Stop it with ``sig``: its exit status, how many calls it served, and what else it said."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=60)
        served = re.search(r"served (\d+) call", err)
        return self.process.returncode, int(served[1]) if served else -1, err


def started(said: str) -> tuple[int, int, int]:
    """How the calls a server stopped with ``-v`` served started, as it counted them: in a sandbox set up ahead,
    forked from a warm server, and in their tool's process started ahead ((-1, -1, -1): it did not say)."""
    found = re.search(
        r"\((\d+) in a sandbox set up ahead, (\d+) forked from a warm server, (\d+) in their tool's process started "
        r"ahead, the others cold\)",
        said,
    )
    return (int(found[1]), int(found[2]), int(found[3])) if found else (-1, -1, -1)


@pytest.fixture
def tools(project: Project) -> Project:
    project.tool("echo.sh", ECHO_SH)
    project.tool("fail.sh", FAIL_SH)
    project.tool("py.py", PY)
    project.configure(max_output_bytes=2000)
    return project


@pytest.fixture
def served(tools: Project) -> Iterator[Served]:
    server = Served(tools.config)
    assert server.banner.startswith("toolexec: serving "), server.banner
    yield server
    server.stop()
    assert not server.path.exists()


def toolexec(*argv: str, local: bool = False, **options: object) -> subprocess.CompletedProcess[bytes]:
    """``python -m toolexec ARGV`` (the installed command's path: the client first), or with no server tried."""
    env = dict(options.pop("env", None) or os.environ)  # type: ignore[call-overload]
    if local:
        env[NO_SERVER_VARIABLE] = "1"
    return subprocess.run([sys.executable, "-m", "toolexec", *argv], capture_output=True, env=env, timeout=120, **options)  # type: ignore[call-overload]


def shown(done: subprocess.CompletedProcess[bytes]) -> tuple[int, bytes, bytes]:
    """What a run showed, with what differs between any two runs (durations, kept files' random names) masked."""
    masked = [re.sub(rb'"duration_ms": [0-9.]+', b'"duration_ms": 0', s) for s in (done.stdout, done.stderr)]
    masked = [re.sub(rb"-[0-9a-f]{8}\.", b"-XXXXXXXX.", s) for s in masked]
    masked = [re.sub(rb"call_[0-9a-f]{24}", b"call_X", s) for s in masked]  # a generated call id
    return done.returncode, masked[0], masked[1]


CASES = [
    pytest.param(["run", "echo", '{"text": "h\u00e9 there"}'], None, id="ok-bash"),
    pytest.param(["run", "py", '{"mode": "echo"}', "--json", "--call-id", "c1"], None, id="ok-python-json"),
    pytest.param(["run", "py", '{"mode": "stdout"}'], None, id="ok-stdout-stderr"),
    pytest.param(["run", "fail", "{}"], None, id="tool-error"),
    pytest.param(["run", "fail", "{}", "--json", "--call-id", "c2"], None, id="tool-error-json"),
    pytest.param(["run", "py", '{"mode": "raise"}'], None, id="python-raises"),
    pytest.param(["run", "py", '{"mode": "echo", "n": "two"}'], None, id="bad-argument"),
    pytest.param(["run", "ecko", "{}"], None, id="unknown-tool"),
    pytest.param(["run", "echo", "{not json"], None, id="bad-json"),
    pytest.param(["run", "echo"], b'{"text": "from stdin"}', id="arguments-on-stdin"),
    pytest.param(["run", "py", '{"mode": "sleep"}', "--timeout", "0.5"], None, id="timeout"),
    pytest.param(["run", "py", '{"mode": "flood", "n": 50000}'], None, id="output-cap"),
    pytest.param(["run", "py", '{"mode": "flood", "n": 50000}', "--json", "--call-id", "c3"], None, id="output-cap-json"),
]


WARMING = {"echo": '{"text": "w"}', "py": '{"mode": "echo"}', "fail": "{}"}  # a call of each tool that runs it


@pytest.mark.parametrize("warm", ["", "--warm"])
@pytest.mark.parametrize(("argv", "stdin"), CASES)
def test_a_run_through_the_server_shows_what_the_local_run_shows(
    tools: Project, tmp_path: Path, argv: list[str], stdin: bytes | None, warm: str
) -> None:
    """Served cold (the server's child spawns the tool) or warm (``serve --warm``: forked from the server's own warm
    server of the tool, started at the first served call of it, which runs cold)."""
    where = tmp_path / "somewhere else"
    where.mkdir()
    env = {**os.environ, "FOO": "from the caller"}
    served = Served(tools.config, *([warm] if warm else []))
    try:
        warming = 3 if warm and argv[1] in WARMING else 0  # the first asks; the spare forked before may not know it
        for _ in range(warming):
            assert toolexec("--config", str(tools.config), "run", argv[1], WARMING[argv[1]], cwd=where, env=env).returncode in (
                0,
                3,
            )
        call = ["--config", str(tools.config), *argv]
        local = toolexec(*call, local=True, cwd=where, env=env, input=stdin)
        remote = toolexec(*call, cwd=where, env=env, input=stdin)
        assert shown(remote) == shown(local)
        assert local.returncode in (0, 1, 2, 3, 124)
    finally:
        _, count, _ = served.stop()
    assert count == warming + 1  # the second run was the server's


PROBE_SH = """#!/usr/bin/env bash
# @describe Say who started the namespace the call runs in (its init's command line).
main() {
    mapfile -d '' -t init </proc/1/cmdline
    echo "${init[*]}" >>"$LLM_OUTPUT"
}
"""
PROBE_PY = '''def run() -> str:
    """Say who started the namespace the call runs in (its init's command line)."""
    return open("/proc/1/cmdline", "rb").read().replace(b"\\0", b" ").decode()
'''


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
@pytest.mark.parametrize(("file", "server"), [("probe_sh.sh", "_bash_zygote.py"), ("probe_py.py", "python_zygote.py")])
def test_served_runs_of_a_warm_tool_fork_from_the_servers_own_warm_server(project: Project, file: str, server: str) -> None:
    """The first served run of a warm tool runs cold (under bwrap's init) and has the server start the tool's warm
    server; the runs after it fork from that server (under the init of a namespace it made), until it stops with
    ``toolexec serve``, leaving nothing behind."""
    project.tool(file, PROBE_SH if file.endswith(".sh") else PROBE_PY)
    config = project.configure(warm_tools=["all"])
    tool = file.partition(".")[0]
    served = Served(config)
    try:
        inits = [toolexec("--config", str(config), "run", tool, "{}").stdout.decode() for _ in range(5)]
        servers = [pid for pid in _descendants(served.process.pid) if server in _cmdline(pid)]
    finally:
        status, count, said = served.stop()
    assert (status, count) == (0, 5)
    assert ["bwrap" in init for init in inits[:1]] == [True]
    assert [server in init for init in inits[2:]] == [True] * 3
    assert started(said) == (0, sum(server in init for init in inits), 0)  # the server's count: what the calls saw
    assert servers and not any(alive(pid) for pid in servers)


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
def test_served_runs_of_a_warm_tool_under_a_policy_run_cold_in_their_own_sandbox(project: Project) -> None:
    """A served run's child would make a confined server's sandbox and calls' directory, and ends with its call: under
    strict every run of a warm Python tool starts its own sandbox (bwrap's init), none is handed to a server."""
    project.tool("probe_py.py", PROBE_PY)
    config = project.configure(warm_tools=["all"], sandbox="strict")
    served = Served(config)
    try:
        inits = [toolexec("--config", str(config), "run", "probe_py", "{}").stdout.decode() for _ in range(4)]
        servers = [pid for pid in _descendants(served.process.pid) if "python_zygote.py" in _command(pid)]
    finally:
        assert served.stop()[:2] == (0, 4)
    assert ["bwrap" in init for init in inits] == [True] * 4, inits
    assert servers == []  # none was asked for (one started by the server's process would not be in the sandbox)


PARENT_SH = """#!/usr/bin/env bash
# @describe Say what started the call's process (its parent's command line).
main() {
    read -r -a stat </proc/$BASHPID/stat
    tr '\\0' ' ' </proc/"${stat[3]}"/cmdline >>"$LLM_OUTPUT"
}
"""


def test_served_runs_of_a_warm_bash_tool_with_the_sandbox_off_each_fork_from_its_server(project: Project) -> None:
    """With ``sandbox: off`` a warm Bash tool's server is one bash forking each call (``BashServer``), through a slot
    (FIFOs in its private folder). Every served run's child is forked from the same ``toolexec serve``, with that
    process's (empty) list of slots: each made slot 1, and every run after the second ran cold (its slot was there
    already). Each run now has a slot of its own, from the server's third run on forks from the warm bash, and
    removes its slot once it has answered."""
    project.tool("parent_sh.sh", PARENT_SH)
    config = project.configure(warm_tools=["all"], sandbox="off")
    served = Served(config)
    try:
        parents = [toolexec("--config", str(config), "run", "parent_sh", "{}").stdout.decode() for _ in range(6)]
        servers = [pid for pid in _descendants(served.process.pid) if "bash_warm.sh" in _command(pid)]
        slots = {
            entry.partition(b"=")[2].decode()
            for pid in servers
            for entry in _environ(pid)
            if entry.startswith(b"TOOLEXEC_WARM_SLOTS=")
        }
        assert len(slots) == 1, (servers, slots)
        assert ["bash_warm.sh" in parent for parent in parents] == [False, "bash_warm.sh" in parents[1], *[True] * 4], parents
        wait_until(lambda: not any(os.listdir(folder) for folder in slots), "the runs' slots removed", timeout=20)
    finally:
        status, count, said = served.stop()
    assert (status, count) == (0, 6)
    assert started(said) == (0, sum("bash_warm.sh" in parent for parent in parents), 0)
    assert not any(Path(folder).exists() for folder in slots)


def _environ(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        children = _children(stack.pop())
        found += children
        stack += children
    return found


def test_a_config_and_a_catalog_changed_after_the_waiting_child_read_them_are_the_next_run_s(
    tools: Project, served: Served, tmp_path: Path
) -> None:
    """The child waiting for the next run has read the config and the catalog's index ahead; an edit of the config
    (the same size: another output cap) and a new tool built meanwhile are what that run sees, as a local run."""
    call = ["--config", str(tools.config), "run", "py", '{"mode": "flood", "n": 3000}']
    assert toolexec(*call).returncode == 0  # a child waits now, having read both
    tools.configure(max_output_bytes=1000)  # (2000 before: the same length)
    assert shown(toolexec(*call)) == shown(toolexec(*call, local=True))
    assert b"1000" in toolexec(*call).stderr
    tools.tool("echo2.sh", ECHO_SH)
    tools.configure(max_output_bytes=1000)
    assert toolexec("--config", str(tools.config), "build").returncode == 0
    again = ["--config", str(tools.config), "run", "echo2", '{"text": "new"}']
    done = toolexec(*again, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"new|{tmp_path}|unset".encode()), done.stderr
    assert shown(done) == shown(toolexec(*again, cwd=tmp_path, local=True))
    assert served.stop()[:2] == (0, 4)


def test_the_caller_s_directory_environment_and_umask_are_the_call_s(tools: Project, served: Served, tmp_path: Path) -> None:
    env = {**os.environ, "FOO": "bar"}
    done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "t"}', cwd=tmp_path, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"t|{tmp_path}|bar".encode(), b"")
    env.pop("FOO")
    done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "t"}', cwd=tools.root, env=env)
    assert done.stdout == f"t|{tools.root}|unset".encode()
    assert served.stop()[1] == 2


def test_the_client_imports_almost_nothing(tools: Project, served: Served) -> None:
    """Through a server, a run imports toolexec's entry point and client only, and no standard module but three built
    into the interpreter (the socket, SHA-256 and the garbage collector's switch)."""
    script = "import sys; sys.argv[0] = 'toolexec'; from toolexec.entry import program; sys.exit(program())"
    bare = subprocess.run([sys.executable, "-v", "-c", "import sys"], capture_output=True, text=True, check=True)
    done = subprocess.run(
        [sys.executable, "-v", "-c", script, "--config", str(tools.config), "run", "echo", '{"text": "x"}'],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (0, f"x|{os.getcwd()}|unset")

    def imported(stderr: str) -> set[str]:
        return {found[1] for line in stderr.splitlines() if (found := re.match(r"import '([\w.]+)' ", line))}

    extra = imported(done.stderr) - imported(bare.stderr)
    assert sorted(extra) == ["_socket", "gc", "toolexec", "toolexec.entry", "toolexec.serve_client", "toolexec.version"]
    assert served.stop()[1] == 1


def test_a_served_call_leaves_nothing_behind(tools: Project, served: Served, tmp_path: Path) -> None:
    """After served calls (one that succeeds, one that fails, one that times out with a grandchild), the server is as
    it was when idle: itself, one spare and the spare's guard; no call file is left in the temporary folder."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary)}
    for argv in (["run", "echo", '{"text": "x"}'], ["run", "fail", "{}"], ["run", "py", '{"mode": "sleep"}', "--timeout", "0.5"]):
        done = toolexec("--config", str(tools.config), *argv, env=env)
        assert done.returncode in (0, 3, 124), done.stderr
    wait_until(lambda: _idle(served.process.pid), "the server to be idle again")
    assert list(temporary.iterdir()) == []
    assert served.stop()[:2] == (0, 3)


def _idle(server: int) -> bool:
    """Whether the server's processes are those of an idle server: one spare child, whose children are its guard and
    at most the tool's process it started ahead of the next call (toolexec.serve_early: the last call's tool, in its
    bwrap under the baseline, waiting in its bootstrap)."""
    spares = _children(server)
    if len(spares) != 1:
        return False
    children = _children(spares[0])
    guards = [pid for pid in children if _comm(pid).endswith("awk")]  # (the guard reads with awk)
    ahead = [pid for pid in children if pid not in guards]
    started_ahead = all(_started_ahead(pid) for pid in ahead) and len(ahead) <= 1
    return len(guards) == 1 and not _children(guards[0]) and started_ahead


def _started_ahead(pid: int) -> bool:
    """Whether ``pid`` is a tool's process started ahead: its bootstrap, or the bwrap it waits in."""
    command = _cmdline(pid)
    return any(name in command for name in ("python_bootstrap.py", "bash_bootstrap.sh", "bwrap"))


# --- falling back ---------------------------------------------------------------------------------------------


def test_without_a_server_the_run_is_local_and_leaves_nothing(tools: Project) -> None:
    done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}')
    assert (done.returncode, done.stdout, done.stderr) == (0, f"x|{os.getcwd()}|unset".encode(), b"")
    folder = Path(socket_folder())
    assert not folder.exists() or list(folder.iterdir()) == []


@pytest.mark.parametrize("option", [["--confirm", "all"], ["--ask"], ["-v"]])
def test_options_that_need_the_local_terminal_run_locally(tools: Project, served: Served, option: list[str]) -> None:
    done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}', *option, stdin=subprocess.DEVNULL)
    local = toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}', *option, local=True, stdin=subprocess.DEVNULL)
    assert shown(done)[:2] == shown(local)[:2]
    assert served.stop()[1] == 0  # (each was refused by the server's child: counted as forked, not as served)


def test_a_call_whose_local_run_uses_another_config_runs_locally(tools: Project, tmp_path: Path) -> None:
    """A server for the user config does not take a call made where ./config.yaml is a toolexec config."""
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "toolexec"
    user.mkdir(parents=True)
    (user / "functions" / "tools").mkdir(parents=True)
    (user / "functions" / "tools" / "echo.sh").write_text(ECHO_SH.replace('"$argc_text"', '"user:$argc_text"'))
    (user / "config.yaml").write_text("visible_tools: [echo.sh]\n")
    server = Served(user / "config.yaml")
    try:
        assert toolexec("run", "echo", '{"text": "a"}', cwd=tmp_path).stdout.startswith(b"user:a|")  # served
        done = toolexec("run", "echo", '{"text": "b"}', cwd=tools.root)  # ./config.yaml is the project's
        assert (done.returncode, done.stdout) == (0, f"b|{tools.root}|unset".encode())
    finally:
        code, count, _ = server.stop()
    assert (code, count) == (0, 1)  # the second was refused (its local run uses ./config.yaml)


def test_a_stale_socket_is_passed_over_and_replaced(tools: Project) -> None:
    server = Served(tools.config)
    server.process.kill()
    server.stop()  # returns once nothing holds its stderr: its waiting child died with it (it held the socket too)
    assert server.path.exists()  # a server that died leaves its socket
    started = time.monotonic()
    done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}')
    assert (done.returncode, done.stdout) == (0, f"x|{os.getcwd()}|unset".encode())
    assert time.monotonic() - started < 60
    again = Served(tools.config)
    assert again.banner.startswith("toolexec: serving ")
    assert toolexec("--config", str(tools.config), "run", "echo", '{"text": "y"}').returncode == 0
    assert again.stop()[:2] == (0, 1)
    assert not server.path.exists()


def test_past_max_clients_a_run_is_local(tools: Project) -> None:
    server = Served(tools.config, "--max-clients", "1")
    try:
        busy = subprocess.Popen(
            [sys.executable, "-m", "toolexec", "--config", str(tools.config), "run", "py", '{"mode": "sleep"}'],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: _running(server.process.pid), "the first call")
        done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}')
        assert (done.returncode, done.stdout, done.stderr) == (0, f"x|{os.getcwd()}|unset".encode(), b"")
        assert _running(server.process.pid) != []  # the first still runs: the second was local
    finally:
        code, count, _ = server.stop()
        busy.wait(timeout=60)
    assert (code, count, busy.returncode) == (0, 1, 130)


def test_a_second_server_for_the_same_config_is_refused(tools: Project, served: Served) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "toolexec", "serve", "--config", str(tools.config)], capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 2
    assert second.stderr == (
        f"toolexec: a server for {os.path.realpath(tools.config)} is already running (pid {served.process.pid}) "
        f"on {served.path}; stop it first\n"
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_the_socket_and_lock_are_removed_when_the_server_is_stopped(tools: Project, sig: int) -> None:
    server = Served(tools.config)
    assert stat.S_IMODE(server.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(server.path.parent.stat().st_mode) == 0o700
    assert server.stop(sig)[0] == 0
    assert list(server.path.parent.iterdir()) == []


def test_a_call_running_when_the_server_stops_is_cancelled_as_a_local_one(tools: Project, tmp_path: Path) -> None:
    server = Served(tools.config)
    run = _sleeping_call(tools, server.process.pid, subprocess.PIPE)
    code, count, _ = server.stop()
    out, err = run.communicate(timeout=60)
    assert (code, count, run.returncode, out) == (0, 1, 130, b"")
    assert err.endswith(b"was cancelled\n")
    assert list(server.path.parent.iterdir()) == []


def test_ctrl_c_of_the_client_cancels_the_call(tools: Project, served: Served) -> None:
    run = _sleeping_call(tools, served.process.pid, subprocess.PIPE)
    child, _ = _running(served.process.pid)[0]
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert (run.returncode, out) == (130, b"")
    assert err.endswith(b"was cancelled\n")
    wait_until(lambda: not alive(child), "the server's child to end")


def test_a_client_that_dies_takes_its_call_with_it(tools: Project, served: Served) -> None:
    run = _sleeping_call(tools, served.process.pid, subprocess.DEVNULL)
    child, tool = _running(served.process.pid)[0]
    run.kill()
    run.wait()
    wait_until(lambda: not alive(child) and not alive(tool), "the call to end")


def test_a_server_killed_mid_call_is_reported_and_leaves_no_tool_behind(tools: Project) -> None:
    """The server and its children killed outright while a call runs: the client says so and exits 1 at once (it
    never waits on a socket no one will write to), and the call's tool ends with the child that ran it."""
    server = Served(tools.config)
    run = _sleeping_call(tools, server.process.pid, subprocess.PIPE)
    # The tool's Python itself, not the bwrap that starts it: killed while bwrap sets its namespace up (before the
    # process helper has told its guard about the call), bwrap's inner process would wait on it forever.
    wait_until(lambda: [pid for _, pid in _running(server.process.pid) if _comm(pid).startswith("python")], "the tool's Python")
    child, tool = next((c, pid) for c, pid in _running(server.process.pid) if _comm(pid).startswith("python"))
    for pid in (server.process.pid, *_children(server.process.pid)):
        os.kill(pid, signal.SIGKILL)
    out, err = run.communicate(timeout=30)
    server.stop()
    assert (run.returncode, out, err) == (1, b"", b"toolexec: the server ended during the call; its result is unknown\n")
    wait_until(lambda: not alive(child) and not alive(tool), "the call's tool to end")


def _cmdline(pid: int) -> str:
    """``pid``'s command line; empty once it is gone (a call's child may still be ending as its client returns)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _sleeping_call(tools: Project, server: int, output: int) -> subprocess.Popen[bytes]:
    """A run of the py tool that sleeps, through the server ``server``, once its tool runs."""
    command = [sys.executable, "-m", "toolexec", "--config", str(tools.config), "run", "py", '{"mode": "sleep"}']
    run = subprocess.Popen(command, stdout=output, stderr=output)
    wait_until(lambda: _running(server), "the tool")
    return run


def _running(server: int) -> list[tuple[int, int]]:
    """(the server's child, the tool's process) of each call of the py tool running now."""
    found = []
    for child in _children(server):
        for pid in _children(child):
            stack = [pid]
            while stack:
                current = stack.pop()
                try:
                    if b"py.py" in Path(f"/proc/{current}/cmdline").read_bytes():
                        found.append((child, current))
                except OSError:
                    pass
                stack += _children(current)
    return found


def _children(pid: int) -> list[int]:
    """The live children of every thread of ``pid`` (warm servers are started by a thread of their own)."""
    words = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:  # (gone meanwhile: a call's child ends as its client returns)
        return []
    for task in tasks:
        try:
            words += (task / "children").read_text().split()
        except OSError:
            continue
    return [int(word) for word in words if alive(int(word))]


# --- toolexec mcp offers the socket too ---------------------------------------------------------------------------


def test_toolexec_mcp_serves_one_shot_runs_while_it_runs(tools: Project) -> None:
    mcp = subprocess.Popen(
        [sys.executable, "-m", "toolexec", "mcp", "--config", str(tools.config), "--no-reload"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    path = Path(socket_folder()) / socket_name(os.path.realpath(tools.config))
    lock = path.with_suffix(".lock")
    try:
        wait_until(path.exists, "the socket of toolexec mcp's server")
        wait_until(lambda: lock.exists() and lock.read_text().isdigit(), "its lock")
        companion = int(lock.read_text())
        assert Path(f"/proc/{companion}/cmdline").read_bytes().split(b"\0")[-3:-1] == [
            str(tools.config).encode(),
            b"--until-stdin-closes",
        ]
        done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}')
        assert (done.returncode, done.stdout, done.stderr) == (0, f"x|{os.getcwd()}|unset".encode(), b"")
    finally:
        assert mcp.stdin is not None
        mcp.stdin.close()  # the end of stdin ends toolexec mcp, and its server with it
        assert mcp.wait(timeout=60) == 0
    wait_until(lambda: not path.exists() and not lock.exists() and not alive(companion), "the server to end")


def test_toolexec_mcp_leaves_a_running_server_alone(tools: Project, served: Served) -> None:
    mcp = subprocess.Popen(
        [sys.executable, "-m", "toolexec", "mcp", "--config", str(tools.config), "--no-reload"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert mcp.stdin is not None
    mcp.stdin.close()
    assert mcp.wait(timeout=60) == 0
    assert toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}').returncode == 0
    assert served.stop()[:2] == (0, 1)


# --- hostile clients ----------------------------------------------------------------------------------------------


def raw(path: Path, data: bytes, fds: tuple[int, ...] = (0, 1, 2, 0), then: bytes = b"") -> bytes:
    """What the server answers a client that sends ``data`` with ``fds`` (and ``then``, once answered)."""
    import array
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
        sock.sendmsg([data], ancillary)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
        return answer


def request_for(argv: list[str], cwd: Path, **changes: bytes) -> bytes:
    from toolexec.serve_client import request
    from toolexec.version import __version__

    body = request(argv, version=__version__)[4:]
    fields = body.split(b"\0")
    for index, value in changes.items():
        fields[int(index.removeprefix("f"))] = value
    fields[2] = os.fsencode(cwd)
    body = b"\0".join(fields)
    return len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize(
    ("data", "fds", "answer"),
    [
        (
            b"\0\0\0\x05hello",
            (),
            b"no malformed request: it must come with stdin, stdout, stderr and the token (four descriptors)\n",
        ),
        (
            b"\0\0\0\x05hello",
            (0, 1),
            b"no malformed request: it must come with stdin, stdout, stderr and the token (four descriptors)\n",
        ),
        (
            b"\0\0\0\x05hello",
            (0, 1, 2, 0, 1, 2),
            b"no malformed request: it must come with stdin, stdout, stderr and the token (four descriptors)\n",
        ),
        (
            b"\xff\xff\xff\xff",
            (0, 1, 2, 0),
            b"no too large: a request may have at most 8388608 bytes, this one says 4294967295\n",
        ),
        (b"\0\0\0\x05hello", (0, 1, 2, 0), b"no malformed request: its fields must each end in NUL\n"),
        (b"\0\0\0\x06hello\0", (0, 1, 2, 0), b"no version: this server speaks toolexec-serve/2\n"),
        (b"\0\0\0\x02x", (0, 1, 2, 0), b"no malformed request: it ended early\n"),
    ],
    ids=["no-fds", "two-fds", "six-fds", "oversized", "no-nul", "not-the-protocol", "short"],
)
def test_a_malformed_request_is_refused_with_a_reason(
    tools: Project, served: Served, data: bytes, fds: tuple[int, ...], answer: bytes
) -> None:
    if data == b"\0\0\0\x02x":
        import socket

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:  # sends less than it said, then stops sending
            sock.settimeout(30)
            sock.connect(str(served.path))
            import array

            sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())])
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(4096) == answer
    else:
        assert raw(served.path, data, fds) == answer
    assert toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}').returncode == 0  # others are served
    assert served.stop()[:2] == (0, 1)


def test_a_request_for_another_config_or_a_terminal_option_is_refused(tools: Project, served: Served, tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text("visible_tools: []\n")
    asked = raw(served.path, request_for(["--config", str(other), "run", "echo", "{}"], tmp_path))
    assert asked == f"no config: this call's config is {other}, this server's {os.path.realpath(tools.config)}\n".encode()
    asked = raw(served.path, request_for(["--config", str(tools.config), "run", "echo", "{}", "--confirm", "all"], tmp_path))
    assert asked == b"no terminal: --confirm, --ask and -v need the local terminal\n"
    asked = raw(served.path, request_for(["--config", str(tools.config), "build"], tmp_path))
    assert asked.startswith(b"no unsupported: ")
    asked = raw(served.path, request_for(["--config", str(tools.config), "run", "echo", "{}"], tmp_path, f1=b"0.0.0"))
    assert asked.startswith(b"no version: this server is toolexec ")
    assert served.stop()[:2] == (0, 0)


def test_a_slow_client_is_refused_and_disturbs_no_other(tools: Project, served: Served) -> None:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.settimeout(60)
        slow.connect(str(served.path))  # and sends nothing
        done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}')
        assert (done.returncode, done.stdout) == (0, f"x|{os.getcwd()}|unset".encode())
        assert slow.recv(4096) == b"no slow: the request did not arrive within 5 seconds\n"
    assert served.stop()[:2] == (0, 1)


def test_a_folder_others_may_open_is_refused_by_both_sides(tools: Project, served: Served) -> None:
    folder = served.path.parent
    folder.chmod(0o755)
    try:
        done = toolexec("--config", str(tools.config), "run", "echo", '{"text": "x"}')
        assert (done.returncode, done.stdout) == (0, f"x|{os.getcwd()}|unset".encode())  # run locally
        assert served.stop()[:2] == (0, 0)
        again = subprocess.run(
            [sys.executable, "-m", "toolexec", "serve", "--config", str(tools.config)], capture_output=True, text=True, timeout=60
        )
        assert (again.returncode, again.stderr) == (
            2,
            f"toolexec: cannot serve on a socket in {folder}: {folder} has mode 755: others may open it (chmod 700 {folder}); "
            "it must be a folder of your own (mode 700)\n",
        )
    finally:
        folder.chmod(0o700)


@pytest.mark.skipif(os.getuid() != 0 or not os.access("/usr/bin/python3", os.X_OK), reason="needs root and /usr/bin/python3")
def test_another_user_is_refused(tools: Project, served: Served) -> None:
    folder = served.path.parent
    modes = {path: path.stat().st_mode for path in (folder, *folder.parents)}
    for path, mode in modes.items():  # let another user reach the socket at all, as a mistake might
        path.chmod(mode | 0o001)
    served.path.chmod(0o666)
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])\n"
        "print(s.recv(4096).decode(), end='')\n"
    )
    try:
        done = subprocess.run(
            ["/usr/bin/python3", "-c", probe, str(served.path)],
            capture_output=True,
            text=True,
            user=65534,
            group=65534,
            timeout=60,
            cwd="/",
        )
    finally:
        for path, mode in modes.items():
            path.chmod(stat.S_IMODE(mode))
    assert (done.returncode, done.stdout) == (0, "no uid: this server serves its own user only\n"), done.stderr
    assert served.stop()[:2] == (0, 0)


# --- a socket that is not the user's server's ----------------------------------------------------------------------

CLAIMER = """
import os, socket, sys
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o600)
if sys.argv[2] != "-":  # listen as that user: the kernel records who listens (SO_PEERCRED), not who bound
    os.setgid(int(sys.argv[2]))
    os.setuid(int(sys.argv[2]))
listener.listen(1)
listener.settimeout(30)
print("listening", flush=True)
try:
    conn, _ = listener.accept()
except TimeoutError:
    sys.exit(0)
conn.recv(1 << 20)
conn.sendall(b"ready 1\\nexit 7\\n")  # a server that would take the call and make the client exit 7
conn.recv(1)
"""


def _claimer(path: Path, uid: str = "-") -> subprocess.Popen[str]:
    """A listener at ``path`` (as user ``uid``, or this one) that claims every call it gets, ending it with 7."""
    process = subprocess.Popen([sys.executable, "-c", CLAIMER, str(path), uid], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "listening\n"
    return process


@pytest.mark.parametrize("how", ["link", "another-owner", "another-listener"])
def test_a_socket_that_is_not_the_user_s_own_server_s_is_passed_over(project: Project, tmp_path: Path, how: str) -> None:
    """The client runs the call locally when the config's socket is a symbolic link (to a listener that would take
    the call), a socket file of another user's, or a socket whose listener is another user's process: nothing that
    is not the user's own server ever answers."""
    if how != "link" and os.getuid() != 0:
        pytest.skip("needs root (to make a socket another user owns or listens on)")
    project.tool("mark.sh", MARK_SH)
    config = project.configure()
    path = Path(socket_folder()) / socket_name(os.path.realpath(config))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if how == "link":
        elsewhere = tmp_path / "elsewhere.sock"
        claimer = _claimer(elsewhere)
        path.symlink_to(elsewhere)
    else:
        claimer = _claimer(path, "65534" if how == "another-listener" else "-")
        if how == "another-owner":
            os.chown(path, 65534, 65534, follow_symlinks=False)
    try:
        done = toolexec("--config", str(config), "run", "mark", "{}", cwd=tmp_path)
    finally:
        path.unlink()
        claimer.kill()
        claimer.communicate()
    assert (done.returncode, done.stdout, done.stderr) == (0, b"ok", b"")  # run locally
    assert (tmp_path / "marks").read_text() == "ran\n"


# --- the token: a call runs once, whoever answers late ------------------------------------------------------------

MARK_SH = """#!/usr/bin/env bash
# @describe Leave a mark in the working directory.
main() {
    echo ran >>marks
    printf ok >>"$LLM_OUTPUT"
}
"""


class FakeServer:
    """A listener on a config's socket that takes a client's request (and its descriptors) and answers as told."""

    def __init__(self, config: Path) -> None:
        import socket

        self.path = Path(socket_folder()) / socket_name(os.path.realpath(config))
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen(1)
        self.listener.settimeout(60)

    def take(self) -> tuple[object, int]:
        """The next client's connection and its token (its stdin, stdout and stderr are closed here)."""
        import socket

        conn, _ = self.listener.accept()
        conn.settimeout(60)
        fds: list[int] = []
        _, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(4 * 4))
        for _, _, data in ancillary:
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, len(data), 4)]
        assert len(fds) == 4
        for fd in fds[:3]:
            os.close(fd)
        return conn, fds[3]

    def close(self) -> None:
        self.listener.close()
        self.path.unlink()


def _marking_client(project: Project, cwd: Path) -> tuple[FakeServer, subprocess.Popen[bytes]]:
    """A fake server of the project's config, and a client running the mark tool in ``cwd`` through it."""
    project.tool("mark.sh", MARK_SH)
    project.configure()
    fake = FakeServer(project.config)
    command = [sys.executable, "-m", "toolexec", "--config", str(project.config), "run", "mark", "{}"]
    return fake, subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_server_that_never_answers_is_passed_over_and_cannot_run_the_call_later(project: Project, tmp_path: Path) -> None:
    """The client waits 3 seconds for an answer, takes its token back and runs the call locally: the server's token
    pipe is then empty, so a server that wakes up late finds nothing to run."""
    fake, client = _marking_client(project, tmp_path)
    try:
        conn, token = fake.take()
        out, err = client.communicate(timeout=120)  # no answer: the client runs it itself after READY_SECONDS
        assert (client.returncode, out, err) == (0, b"ok", b"")
        assert os.read(token, 2) == b""  # the client took the byte back: nothing for a late server to run
        os.close(token)
        conn.close()  # type: ignore[attr-defined]
    finally:
        fake.close()
    assert (tmp_path / "marks").read_text() == "ran\n"  # once


def test_a_server_that_took_the_token_has_the_call_even_when_it_answers_late(project: Project, tmp_path: Path) -> None:
    """Once the server holds the token, the client never runs the call itself: it waits for the server's status,
    however late (here 4 seconds, past the client's 3), and exits with it."""
    fake, client = _marking_client(project, tmp_path)
    try:
        conn, token = fake.take()
        assert os.read(token, 2) == b"t"  # the server's: the call is its now
        os.close(token)
        threading.Event().wait(4.0)  # past the client's patience: it must not run the call locally
        conn.sendall(b"ready 1\nexit 7\n")  # type: ignore[attr-defined]
        out, err = client.communicate(timeout=120)
        conn.close()  # type: ignore[attr-defined]
    finally:
        fake.close()
    assert (client.returncode, out, err) == (7, b"", b"")
    assert not (tmp_path / "marks").exists()


@pytest.mark.parametrize("token", ["taken", "not-a-pipe"])
def test_a_request_without_its_token_is_not_run(tools: Project, served: Served, tmp_path: Path, token: str) -> None:
    """A child that finds the token gone (the client took it back) or something else than a pipe in its place ends
    without running the call and without a word: the client runs it, or, hostile, gets nothing."""
    tools.tool("mark.sh", MARK_SH)
    tools.configure(max_output_bytes=2000)
    request = request_for(["--config", str(tools.config), "run", "mark", "{}"], tmp_path)
    read, write = os.pipe()
    os.close(write)  # an empty pipe whose writer is gone: the byte was read back
    fd = read if token == "taken" else os.open(os.devnull, os.O_RDONLY)
    try:
        assert raw(served.path, request, (0, 1, 2, fd)) == b""
    finally:
        os.close(read)
        if fd != read:
            os.close(fd)
    assert not (tmp_path / "marks").exists()
    assert served.stop()[:2] == (0, 0)


# --- what the server prepares once ----------------------------------------------------------------------------------

WARM_PROBE = """
import os, sys
from toolexec.serve import Server
from toolexec.cli import dispatch, quick_run

server = Server(sys.argv[1])
assert server.open()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    before = set(sys.modules)
    args = quick_run(["--config", sys.argv[1], "run", sys.argv[2], sys.argv[3]])
    args.handle_signals = True
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    code = dispatch(args)
    os.write(write, f"{code} {' '.join(sorted(set(sys.modules) - before))}".encode())
    os._exit(0)
os.close(write)
print(os.read(read, 65536).decode())
os.waitpid(pid, 0)
server.close()
"""


@pytest.mark.parametrize(("tool", "arguments"), [("echo", '{"text": "x"}'), ("py", '{"mode": "echo"}')])
@pytest.mark.parametrize("sandbox", ["off", "declared", "strict"])
def test_a_served_call_imports_nothing_the_server_had_not(tools: Project, tool: str, arguments: str, sandbox: str) -> None:
    """Whatever a call loads (a runtime, bwrap's lookup, the C library, a digest) the server loaded before forking:
    a child of ``toolexec serve`` pays for none of it."""
    tools.configure(max_output_bytes=2000, sandbox=sandbox)
    done = subprocess.run(
        [sys.executable, "-c", WARM_PROBE, str(tools.config), tool, arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == ["0"], done.stderr


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
def test_a_served_warm_tool_whose_sibling_module_changed_is_run_anew_and_served_warm_again(project: Project) -> None:
    """A served run finds the server's warm server holding a sibling module edited since (toolexec.runtimes.loaded):
    it runs cold, with the new code, and has the server replace it; later runs fork from the new one."""
    helpers = project.tool("helpers.py", 'WORD = "hello"\n')
    project.tool(
        "greet.py",
        'from helpers import WORD\n\n\ndef run() -> str:\n    """Greet, saying whether the call was forked warm."""\n'
        '    warm = b"python_zygote.py" in open("/proc/1/cmdline", "rb").read()\n'
        '    return WORD + (" warm" if warm else " cold")\n',
    )
    config = project.configure(["greet.py"], warm_tools=["all"])
    served = Served(config)
    try:
        runs = lambda: [toolexec("--config", str(config), "run", "greet", "{}").stdout.decode() for _ in range(4)]  # noqa: E731
        before = runs()
        stat = helpers.stat()
        helpers.write_text('WORD = "howdy"\n')
        os.utime(helpers, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same size and mtime: only the ctime moved
        after = runs()
    finally:
        assert served.stop()[:2] == (0, 8)
    assert (before[0], before[-1]) == ("hello cold", "hello warm")
    assert (after[0], after[-1]) == ("howdy cold", "howdy warm")


def test_a_request_longer_than_its_first_message_is_sent_whole(project: Project) -> None:
    """A caller's environment of 100 KB makes a request longer than the part that goes with the descriptors: the rest
    follows, and the server runs the call in that very environment (the served count says the server ran it)."""
    project.tool(
        "size.sh", '#!/usr/bin/env bash\n# @describe Say how long BIG is.\nmain() {\n    echo "${#BIG}" >>"$LLM_OUTPUT"\n}\n'
    )
    config = project.configure()
    served = Served(config)
    try:
        done = toolexec("--config", str(config), "run", "size", "{}", env={**os.environ, "BIG": "x" * 100_000})
    finally:
        stopped = served.stop()[:2]
    assert (done.returncode, done.stdout, done.stderr, stopped) == (0, b"100000\n", b"", (0, 1))
