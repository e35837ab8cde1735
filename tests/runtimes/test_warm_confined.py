"""Warm Python calls under a declared policy and under ``sandbox: strict``: the server lives inside the tool's own
sandbox (runtimes/_python_confined.py) and each call it forks gets what a cold confined call gets. The hostile tools
of tests/runtimes/test_sandbox.py run warm too (its ``sandbox_modes``); these check what only a warm call could get
wrong: that it was forked from the one load inside the sandbox, that the tool's top level is confined as its calls
are, that one call leaves nothing to the next (its /tmp, its files), and that the server's view follows what it
depends on (a hidden path made after the server started, the working directory a policy writes).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.helpers import alive, run_executor_script, zombies_of
from toolexec import Executor
from toolexec.records import ToolCall
from toolexec.runtimes import baseline, process_linux, sandbox
from toolexec.runtimes.warm_fork import running_servers

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available() and sandbox.mechanism()[0] == "bwrap"),
    reason="needs bwrap, PID namespaces, pidfd and /proc",
)


@pytest.fixture(autouse=True)
def _no_zombie() -> Iterator[None]:
    """A confined server's bwrap and its namespace's init are reaped when it ends (retired, refused, closed)."""
    before = zombies_of()
    yield
    assert zombies_of() - before == set()


PROBE = '''
import os, socket

LOADED = os.readlink("/proc/self/ns/pid")
with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "loads"), "a") as f:
    f.write("x")


def _attempts(secret_name):
    """What the tool's top level, and each call, can do: every answer is what the kernel said."""
    seen = {}
    for where in ("~/planted", "/etc/toolexec-planted"):
        try:
            with open(os.path.expanduser(where), "w") as handle:
                handle.write("x")
            seen[where] = "written"
        except OSError as exc:
            seen[where] = exc.strerror
    try:
        with open(os.path.expanduser("~/.ssh/id_ed25519")) as handle:
            seen["key"] = handle.read()
    except OSError as exc:
        seen["key"] = exc.strerror
    seen["secret"] = os.environ.get(secret_name, "<unset>")
    try:
        socket.create_connection(("127.0.0.1", int(os.environ.get("PROBE_PORT", "9"))), timeout=2).close()
        seen["loopback"] = "connected"
    except OSError as exc:
        seen["loopback"] = exc.strerror
    return seen


AT_LOAD = _attempts("WARM_SECRET")


def run(action: str, arg: str = "") -> dict:
    """Look around, or leave something behind.

    Warm: true
    Env: PROBE_PORT

    Args:
        action: what to do
        arg: its argument
    """
    if action == "leave":  # in its /tmp, and beside its own files
        open("/tmp/left-by-a-call", "w").close()
        open(os.path.join(os.path.dirname(os.environ["LLM_OUTPUT"]), "left-beside"), "w").close()
    return {
        "loaded_in": LOADED,
        "namespace": os.readlink("/proc/self/ns/pid"),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "processes": sorted(int(name) for name in os.listdir("/proc") if name.isdigit()),
        "tmp": sorted(os.listdir("/tmp")),
        "beside": sorted(os.listdir(os.path.dirname(os.environ["LLM_OUTPUT"]))),
        "capabilities": sorted(line.split()[1] for line in open("/proc/self/status") if line.startswith("Cap")),
        "uid": os.getuid(),
        "at_load": AT_LOAD,
        "in_call": _attempts("WARM_SECRET"),
    }
'''


def _executor(project: Project, *, warm: bool = True, **settings: Any) -> Executor:
    return Executor(project.configure(sandbox="strict", **settings), warm=warm)


def _look(executor: Executor, action: str = "look") -> dict:
    result = executor.call("probe", {"action": action})
    assert (result.status, result.stderr) == ("ok", ""), result
    return json.loads(result.output)


def test_strict_warm_calls_are_forked_from_one_load_inside_the_tools_sandbox(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.tool("probe.py", PROBE)
    (Path.home() / ".ssh").mkdir()
    (Path.home() / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    monkeypatch.setenv("WARM_SECRET", "hunter2")
    listener = socket.create_server(("127.0.0.1", 0))
    monkeypatch.setenv("PROBE_PORT", str(listener.getsockname()[1]))
    with listener, _executor(project) as executor:
        seen = [_look(executor) for _ in range(3)]
        assert (executor.config.state.tool_cache("probe") / "loads").read_text() == "x"  # one load for three calls
        servers = running_servers()
        assert len(servers) == 1
        with _executor(project, warm=False) as cold_executor:
            cold = _look(cold_executor)
    # (a namespace's number is reused once it is gone; concurrent calls' differ: the next test)
    namespaces = {s["namespace"] for s in seen}
    assert seen[0]["loaded_in"] not in namespaces and os.readlink("/proc/self/ns/pid") not in namespaces
    # as a cold confined call: process 2 under its namespace's init, alone, no capability left, its uid
    assert [(s["pid"], s["ppid"], s["processes"], s["uid"]) for s in seen] == [(2, 1, [1, 2], os.getuid())] * 3
    assert {c for s in seen for c in s["capabilities"]} == {"0000000000000000"}
    refused = {
        "~/planted": "Read-only file system",
        "/etc/toolexec-planted": "Read-only file system",
        "key": "No such file or directory",  # covered by an empty directory
        "secret": "<unset>",
        "loopback": "Connection refused",  # its own loopback: the host's listener is not there
    }
    # the tool's top level (run once, in the server) is refused what each call is, and as a cold call is
    assert [s["in_call"] for s in seen] == [refused] * 3
    assert seen[0]["at_load"] == refused == cold["in_call"] == cold["at_load"]
    assert not (Path.home() / "planted").exists()
    assert not any(alive(pid) for pid in servers)


def test_a_warm_call_leaves_nothing_to_the_next_one(project: Project) -> None:
    project.tool("probe.py", PROBE)
    with _executor(project) as executor:
        first = _look(executor, "leave")
        executor.calls.settle()  # its set is given back off the call's path: emptied for the next call once settled
        second = _look(executor)
        concurrent = executor.call_many([ToolCall(name="probe", arguments={"action": "leave"}) for _ in range(3)])
        assert (executor.config.state.tool_cache("probe") / "loads").read_text() == "x"  # all warm, from one load
    assert "left-by-a-call" in first["tmp"] and "left-beside" in first["beside"]
    # a private /tmp per call, empty but for what the view binds under /tmp (as a cold call's), and only its own
    # three files beside its LLM_OUTPUT
    assert "left-by-a-call" not in second["tmp"] and second["tmp"] == sorted(set(first["tmp"]) - {"left-by-a-call"})
    assert len(second["beside"]) == 3 and "left-beside" not in second["beside"]
    # (the sealed call's set, used again: what it left was in its own cover of the directory, gone with it)
    assert second["beside"] == sorted(set(first["beside"]) - {"left-beside"})
    views = [json.loads(result.output) for result in concurrent]
    for seen in views:
        assert seen["tmp"].count("left-by-a-call") == 1 and len(seen["beside"]) == 4, seen


def test_a_hidden_path_made_after_the_server_started_stays_hidden(project: Project) -> None:
    project.tool("probe.py", PROBE)
    with _executor(project) as executor:
        before = _look(executor)
        (Path.home() / ".ssh").mkdir()
        (Path.home() / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
        after = _look(executor)
        # two servers, each warm: a new one, whose view covers it (the old one's PID namespace is gone by then, so
        # the new one's may have the same inode number: loads, not namespaces, tell them apart)
        assert (executor.config.state.tool_cache("probe") / "loads").read_text() == "xx"
    assert before["in_call"]["key"] == after["in_call"]["key"] == "No such file or directory"


@pytest.mark.parametrize("change", ["link repointed", "directory made again"])
def test_a_hidden_path_replaced_after_the_server_started_stays_hidden(project: Project, change: str) -> None:
    """A cover is a mount on the file the hidden path named when the server's sandbox was made: once the path names
    another (a symbolic link pointed elsewhere, as a dotfiles manager does; the directory removed and made again), an
    old server would show what it names now. A new server covers it, as a cold call's bwrap would."""
    project.tool("probe.py", PROBE)
    home = Path.home()
    for keys in ("keys-a", "keys-b"):
        (home / keys).mkdir()
        (home / keys / "id_ed25519").write_text("PRIVATE KEY")
    ssh = home / ".ssh"
    if change == "link repointed":
        ssh.symlink_to("keys-a")
    else:
        ssh.mkdir()
    with _executor(project) as executor:
        before = _look(executor)
        if change == "link repointed":
            ssh.unlink()
            ssh.symlink_to("keys-b")
        else:
            ssh.rmdir()
            ssh.mkdir()
            (ssh / "id_ed25519").write_text("PRIVATE KEY")
        after = _look(executor)
        assert (executor.config.state.tool_cache("probe") / "loads").read_text() == "xx"  # two servers, each warm
    assert before["in_call"]["key"] == after["in_call"]["key"] == "No such file or directory"


WRITER = '''
import os

def run(name: str, other: str) -> str:
    """Write a file in the working directory, then in another.

    Warm: true
    Writes: cwd
    Network: none

    Args:
        name: the file
        other: the other directory
    """
    with open(name, "w") as handle:
        handle.write(os.getcwd())
    try:
        with open(os.path.join(other, name), "w") as handle:
            handle.write("x")
        return "both"
    except OSError as exc:
        return exc.strerror
'''


def test_a_policy_that_writes_cwd_gets_a_server_per_working_directory(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.tool("writer.py", WRITER)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    with Executor(project.configure(), warm=True) as executor:
        answers = []
        for here, other in ((first, second), (second, first)):
            monkeypatch.chdir(here)
            result = executor.call("writer", {"name": "out", "other": str(other)})
            answers.append((result.status, result.output))
        assert len(running_servers()) == 1  # the first directory's server was retired
    # each call writes its own working directory, and cannot even see the one an earlier call's server wrote (under
    # the private /tmp, as for a cold call)
    assert answers == [("ok", "No such file or directory")] * 2
    assert ((first / "out").read_text(), (second / "out").read_text()) == (str(first), str(second))


CONFIG_WRITER = '''
def run(text: str) -> str:
    """Write toolexec's config in the working directory.

    Warm: true
    Writes: cwd
    Network: none

    Args:
        text: what to write
    """
    try:
        with open("config.yaml", "a") as handle:
            handle.write(text)
        return "written"
    except OSError as exc:
        return exc.strerror
'''


def test_a_protected_file_replaced_after_the_server_started_stays_read_only(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor saves toolexec's config by writing a new file and renaming it over the old: an old server's cover (a
    read-only bind of the old file) leaves the new one writable in a place the policy writes."""
    project.tool("config_writer.py", CONFIG_WRITER)
    config = project.configure()
    monkeypatch.chdir(project.root)
    with Executor(config, warm=True) as executor:
        first = executor.call("config_writer", {"text": "# first"})
        saved = project.root / "config.yaml.new"
        saved.write_text(config.read_text())
        os.replace(saved, config)
        second = executor.call("config_writer", {"text": "# second"})
        assert len(running_servers()) == 1  # warm (the first server retired)
    assert [(r.status, r.output) for r in (first, second)] == [("ok", "Permission denied")] * 2
    assert "#" not in config.read_text()


LOADS_A_PROCESS = '''
import subprocess

subprocess.Popen(["sleep", "30"])


def run() -> str:
    """Started a process as it loaded.

    Warm: true
    """
    return "ran"
'''


def test_a_tool_that_starts_a_process_as_it_loads_runs_cold(project: Project) -> None:
    """The process would outlive the load inside the server's sandbox, beside every call: the server refuses the tool
    (and its namespace ends with the process), and each call runs cold, as it would without a server."""
    project.tool("loader.py", LOADS_A_PROCESS)
    with _executor(project) as executor:
        results = [executor.call("loader", {}) for _ in range(2)]
        assert running_servers() == frozenset()
    assert [(result.status, result.output) for result in results] == [("ok", "ran")] * 2


GREEDY = '''
import os

with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "loads"), "a") as f:
    f.write("x")


def run() -> str:
    """Ask for more CPU seconds than a process without privileges may set here.

    Warm: true
    CPU: 200 s
    """
    return open("/proc/self/limits").read().split("Max cpu time")[1].split()[0]
'''


# In a process of its own, whose hard CPU limit is lowered first (for good: no process here may raise it again).
LOWERED = """
import json, resource, sys
from toolexec import Executor

resource.setrlimit(resource.RLIMIT_CPU, (100, 100))
for warm in (True, False):
    with Executor(sys.argv[1], warm=warm) as executor:
        for _ in range(2):
            result = executor.call("greedy", {})
            print(json.dumps([warm, result.status, result.output, result.error]), flush=True)
"""


def test_a_limit_the_calls_process_cannot_set_runs_the_call_cold(project: Project) -> None:
    """The server, and so each call's process (which has no capability), inherits toolexec's hard CPU limit. A call
    whose declared limit is above it cannot start warm: it runs cold, with the result a cold call has (here a refusal,
    as toolexec cannot raise the limit either), never with a limit left unset."""
    project.tool("greedy.py", GREEDY)
    config = project.configure(sandbox="strict")
    lines = run_executor_script(LOWERED, config, "", "", {})
    warm, cold = [line[1:] for line in lines if line[0]], [line[1:] for line in lines if not line[0]]
    assert warm == cold and len(warm) == 2, lines
    assert warm[0][0] in ("ok", "unavailable"), warm
    loads = (project.root / "functions" / "cache" / "greedy" / "loads").read_text()
    # the warm server's load, then each call's own (cold) load where a call started at all
    assert loads == ("x" + "x" * 4 if warm[0][0] == "ok" else "x"), loads


TMP_WRITER = '''
import os


def run(name: str) -> list:
    """Write the host's /tmp, as its policy lets it.

    Warm: true
    Writes: /tmp
    Network: none

    Args:
        name: the file's name there
    """
    with open(os.path.join("/tmp", name), "w") as handle:
        handle.write("x")
    return [os.environ["TMPDIR"]]
'''


def test_a_policy_that_writes_tmp_gets_the_hosts_tmp_warm_as_cold(project: Project) -> None:
    """A cold call under ``writes: /tmp`` writes the host's /tmp (no private one covers it): so does each warm one."""
    project.tool("tmpwriter.py", TMP_WRITER)
    names = [f"toolexec-warm-test-{os.urandom(6).hex()}" for _ in range(2)]
    try:
        with Executor(project.configure(), warm=True) as executor:
            results = [executor.call("tmpwriter", {"name": name}) for name in names]
            assert len(running_servers()) == 1
        assert [(result.status, json.loads(result.output)) for result in results] == [("ok", ["/tmp"])] * 2
        assert [Path("/tmp", name).read_text() for name in names] == ["x", "x"]
    finally:
        for name in names:
            Path("/tmp", name).unlink(missing_ok=True)


UNDOER = '''
import ctypes, os

libc = ctypes.CDLL(None, use_errno=True)
KEY = os.path.expanduser("~/.ssh/id_ed25519")


def _try(what, result):
    TRIED[what] = os.strerror(ctypes.get_errno()) if result != 0 else "done"


# The top level runs in the server, which holds capabilities in its own user namespace: it tries to undo the view.
TRIED = {}
_try("unmount the cover", libc.umount2(os.path.dirname(KEY).encode(), 2))
os.makedirs("/tmp/root-again", exist_ok=True)
_try("bind / without what covers it", libc.mount(b"/", b"/tmp/root-again", None, 4096, None))
_try("make / writable", libc.mount(None, b"/", None, 32 | 4096, None))
_try("unmount /proc", libc.umount2(b"/proc", 2))  # the server's own: under it, the host's
TRIED["processes seen"] = len([name for name in os.listdir("/proc") if name.isdigit()])
try:
    with open("/tmp/root-again" + KEY) as handle:
        TRIED["read through the bind"] = handle.read()
except OSError as exc:
    TRIED["read through the bind"] = exc.strerror


def run() -> dict:
    """Say what the top level could undo, and read the key.

    Warm: true
    """
    try:
        with open(KEY) as handle:
            key = handle.read()
    except OSError as exc:
        key = exc.strerror
    return {"tried": TRIED, "key": key}
'''


def test_the_tools_top_level_cannot_undo_its_servers_view(project: Project) -> None:
    """The server holds capabilities in a user namespace of its own, in which every mount of the sandbox is locked:
    its top level can neither unmount a hidden path's cover, nor bind the filesystem without it, nor make it
    writable; and no call sees the key."""
    project.tool("undoer.py", UNDOER)
    (Path.home() / ".ssh").mkdir()
    (Path.home() / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    with _executor(project) as executor:
        result = executor.call("undoer", {})
        assert len(running_servers()) == 1
    assert result.status == "ok", result
    seen = json.loads(result.output)
    assert seen["key"] == "No such file or directory"
    assert seen["tried"]["unmount the cover"] != "done" and seen["tried"]["make / writable"] != "done"
    assert seen["tried"]["bind / without what covers it"] != "done"
    assert seen["tried"]["read through the bind"] != "PRIVATE KEY"
    assert (seen["tried"]["unmount /proc"], seen["tried"]["processes seen"]) == ("Invalid argument", 1)
