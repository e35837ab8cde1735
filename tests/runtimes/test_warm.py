"""Warm tools (toolexec.runtimes.warm): each call a fresh process forked from a server that loaded the tool once.

Real interpreters throughout: the process boundary is what is tested. The cold-call behaviour suite runs warm too
(modules marked ``launch_modes``); here is what only warm calls have: one load per tool, restarts on edits and
config changes, the pool's bounds, what runs cold instead, and that nothing outlives the pool.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import alive, marked_processes, wait_until
from toolexec import Executor
from toolexec.records import ToolCall, ToolResult
from toolexec.runtimes import process_linux
from toolexec.runtimes.warm_fork import ForkedCall, running_servers

pytestmark = [
    pytest.mark.skipif(not process_linux.available(), reason="warm calls need pidfd and /proc (Linux)"),
    # The pool's own behaviour, read through the tools' process ids (which a PID namespace per call would renumber):
    # tests/runtimes/test_warm_baseline.py runs warm calls under the sandbox's baseline.
    pytest.mark.usefixtures("unconfined"),
]

# Reports the process that loaded it, the one running the call, and what a call must see of its own.
PIDS = '''
import os, sys

LOADED = os.getpid()
LOADS = os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "loads")
with open(LOADS, "a") as f:
    f.write("x")


def run(text: str) -> dict:
    """Report pids.

    Warm: true
    """
    print("out:" + text)
    print("err:" + text, file=sys.stderr)
    return {
        "text": text,
        "loaded": LOADED,
        "pid": os.getpid(),
        "leads_session": os.getsid(0) == os.getpid(),
        "leads_group": os.getpgid(0) == os.getpid(),
        "call_id": os.environ.get("LLM_TOOL_CALL_ID"),
        "cwd": os.getcwd(),
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "stdin": sys.stdin.read(),
        "version": 1,
    }
'''


def _servers_of(tool: str) -> list[int]:
    """Live warm servers of ``tool`` (by the marker in their environment)."""
    found = []
    for pid in running_servers():
        try:
            if f"TOOLEXEC_WARM_SERVER={tool}\0".encode() in Path(f"/proc/{pid}/environ").read_bytes() and alive(pid):
                found.append(pid)
        except OSError:
            continue
    return found


def test_each_call_is_a_fresh_process_forked_from_one_load(project: Project, private_tmpdir: Path) -> None:
    project.tool("pids.py", PIDS)
    descriptors = None
    with project.executor() as executor:
        executor.build()
        descriptors = sorted(os.listdir("/proc/self/fd"))
        results = [executor.call("pids", {"text": f"t{n}"}, call_id=f"call-{n}") for n in range(3)]
        seen = [json.loads(result.output) for result in results]
        assert [(r.ok, r.stderr) for r in results] == [(True, f"err:t{n}\n") for n in range(3)]
        assert len({s["loaded"] for s in seen}) == 1  # one load
        assert len({s["pid"] for s in seen} | {seen[0]["loaded"]}) == 4  # every call a new process
        assert [(s["text"], s["call_id"], s["leads_session"], s["leads_group"]) for s in seen] == [
            (f"t{n}", f"call-{n}", True, True) for n in range(3)
        ]
        assert {s["cwd"] for s in seen} == {os.getcwd()}
        assert {tuple(s["fds"]) for s in seen} == {(0, 1, 2, 3)}  # 3: the listing's own descriptor
        assert {s["stdin"] for s in seen} == {""}
        assert (executor.config.state.tool_cache("pids") / "loads").read_text() == "x"
        assert _servers_of("pids") == [seen[0]["loaded"]]
    assert _servers_of("pids") == []
    assert not alive(seen[0]["loaded"])
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert marked_processes(private_tmpdir) == []


def test_an_edited_tool_runs_its_new_code_on_the_next_call(project: Project) -> None:
    path = project.tool("pids.py", PIDS)
    with project.executor() as executor:
        first = json.loads(executor.call("pids", {"text": "a"}).output)
        path.write_text(PIDS.replace('"version": 1', '"version": 2'), encoding="utf-8")
        second = json.loads(executor.call("pids", {"text": "b"}).output)
        assert (first["version"], second["version"]) == (1, 2)
        assert first["loaded"] != second["loaded"]
        wait_until(lambda: not alive(first["loaded"]), "the old server to end")
        assert _servers_of("pids") == [second["loaded"]]


def test_a_config_change_of_the_environment_restarts_the_server(project: Project) -> None:
    project.tool(
        "env.py",
        'import os\nAT_LOAD = os.environ.get("GREETING")\n\ndef run() -> str:\n    """Env.\n\n    Warm: true\n    """\n    return f"{AT_LOAD} {os.environ.get(\'GREETING\')}"\n',
    )
    (project.root / "functions" / ".env").write_text("GREETING=hello\n")
    with project.executor() as executor:
        assert executor.call("env", {}).output == "hello hello"
        (project.root / "functions" / ".env").write_text("GREETING=bonjour\n")
        assert executor.call("env", {}).output == "bonjour bonjour"


AT_LOAD = """import json, os
SEEN = {name: os.environ.get(name) for name in ("OLDPWD", "TRACEPARENT", "LLM_TOOL_CALL_ID")}
LOADED_IN = os.getcwd()


def run() -> str:
    \"\"\"What my top level saw, and what this call sees.

    Warm: true
    \"\"\"
    now = {name: os.environ.get(name) for name in SEEN}
    return json.dumps({"pid": os.getppid(), "load": SEEN, "call": now, "loaded_in": LOADED_IN, "cwd": os.getcwd()})
"""


def test_a_server_is_shared_only_by_calls_whose_environment_its_load_saw(
    project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A warm server's key holds the environment it starts in, all of it: what its tool's top level can read (a
    shell's ``OLDPWD`` as any other variable). A call whose environment differs from a server's in anything but its
    own variables (``LLM_*``, ``TRACEPARENT``...) gets another server, whose load saw that call's values; calls that
    differ only in their own variables share one, whose load saw none of them. The working directory is not in the
    key: a load's is its first call's, while each call runs in its own (read files inside ``run``, not at import)."""
    project.tool("at_load.py", AT_LOAD)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.setenv("OLDPWD", "/first")
    with project.executor() as executor:

        def call(call_id: str) -> dict:
            result = executor.call("at_load", {}, call_id=call_id)
            assert result.ok, result.stderr
            return json.loads(result.output)

        first, again = call("one"), call("two")
        monkeypatch.setenv("OLDPWD", "/second")
        second = call("three")
        monkeypatch.setenv("OLDPWD", "/first")
        back = call("four")
        monkeypatch.chdir(other)
        moved = call("five")
    unseen = {"TRACEPARENT": None, "LLM_TOOL_CALL_ID": None}
    assert first["load"] == again["load"] == back["load"] == moved["load"] == {**unseen, "OLDPWD": "/first"}
    assert second["load"] == {**unseen, "OLDPWD": "/second"}
    assert [c["call"]["LLM_TOOL_CALL_ID"] for c in (first, again, second, back, moved)] == ["one", "two", "three", "four", "five"]
    assert first["pid"] == again["pid"] != second["pid"]  # the same server for the same environment, another for another
    assert back["pid"] != second["pid"]  # (the tool's other server was retired: this load is new, and saw /first)
    assert (moved["pid"], moved["loaded_in"], moved["cwd"]) == (back["pid"], back["loaded_in"], str(other))


def test_warm_opt_in_spellings_and_the_executor_switch(project: Project) -> None:
    plain = PIDS.replace("\n    Warm: true\n", "\n")
    project.tool("plain.py", plain)
    project.tool("named.py", plain)
    project.tool("pids.py", PIDS)

    def loaded_by_a_server(executor: Executor, tool: str) -> bool:
        one, two = (json.loads(executor.call(tool, {"text": "x"}).output) for _ in range(2))
        return one["loaded"] == two["loaded"]

    with project.executor(warm_tools=["named"]) as executor:
        assert [loaded_by_a_server(executor, tool) for tool in ("plain", "named", "pids")] == [False, True, True]
    with Executor(project.configure(), warm=True) as executor:
        assert loaded_by_a_server(executor, "plain")
    with Executor(project.configure(warm_tools="all"), warm=False) as executor:
        assert [loaded_by_a_server(executor, tool) for tool in ("plain", "pids")] == [False, False]
    with project.executor(warm_tools="all") as executor:
        assert loaded_by_a_server(executor, "plain")


def test_the_pool_keeps_at_most_warm_max_servers(project: Project) -> None:
    for name in ("a", "b", "c"):
        project.tool(f"{name}.py", PIDS)
    with project.executor(warm_max=2) as executor:
        loaded = [json.loads(executor.call(name, {"text": "x"}).output)["loaded"] for name in ("a", "b", "c")]
        wait_until(lambda: not alive(loaded[0]), "the least recently used server to end")
        assert len(executor.calls._pool) == 2  # type: ignore[arg-type]
        assert [alive(pid) for pid in loaded] == [False, True, True]


def test_an_idle_server_ends_after_warm_idle(project: Project) -> None:
    project.tool("pids.py", PIDS)
    with project.executor(warm_idle=0.2) as executor:
        loaded = json.loads(executor.call("pids", {"text": "x"}).output)["loaded"]
        wait_until(lambda: not alive(loaded), "the idle server to end")
        again = json.loads(executor.call("pids", {"text": "y"}).output)
        assert again["loaded"] != loaded  # started anew, and the call is served as ever


@pytest.mark.parametrize(
    ("case", "source"),
    [
        (
            "a thread started at load",
            "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
        ),
        ("a failing import", "import no_such_module_anywhere\n"),
    ],
)
def test_a_tool_that_cannot_be_forked_runs_cold_with_the_same_result(project: Project, case: str, source: str) -> None:
    body = source + 'import os\n\ndef run() -> str:\n    """T.\n\n    Warm: true\n    """\n    return str(os.getpid())\n'
    project.tool("t.py", body)
    with project.executor() as executor:
        warm = executor.call("t", {})
        assert _servers_of("t") == []
    with project.executor() as executor:
        cold = Executor(executor.config, warm=False).call("t", {})
    assert (warm.status, warm.exit_code, warm.error is None) == (cold.status, cold.exit_code, cold.error is None)
    if not cold.ok:
        assert warm.stderr == cold.stderr


def test_a_killed_server_is_replaced_and_the_call_still_runs(project: Project) -> None:
    project.tool("pids.py", PIDS)
    with project.executor() as executor:
        first = json.loads(executor.call("pids", {"text": "a"}).output)["loaded"]
        os.kill(first, 9)
        wait_until(lambda: not alive(first), "the server to die")
        result = executor.call("pids", {"text": "b"})
        assert result.ok, result.error
        assert json.loads(result.output)["loaded"] != first


def test_concurrent_calls_share_one_server(project: Project) -> None:
    project.tool("pids.py", PIDS)
    with project.executor() as executor:
        results = executor.call_many([ToolCall(name="pids", arguments={"text": str(n)}) for n in range(8)])
        seen = [json.loads(r.output) for r in results]
        assert sorted(s["text"] for s in seen) == [str(n) for n in range(8)]
        assert len({s["loaded"] for s in seen}) == 1
        assert len({s["pid"] for s in seen}) == 8


FAST = {
    "fast.py": 'import os\n\nLOADED = os.getpid()\n\ndef run() -> str:\n    """F.\n\n    Warm: true\n    """\n    return str(LOADED)\n',
    "fast.sh": '#!/usr/bin/env bash\n# @describe F.\n# @meta warm\nLOADED=$$\nmain() { echo "$LOADED" >> "$LLM_OUTPUT"; }\n',
}


@pytest.mark.parametrize("file", sorted(FAST))
def test_concurrent_calls_share_one_server_and_never_take_it_for_theirs(project: Project, file: str) -> None:
    """A call that ends before toolexec looks at its process (its server reaped it) must not take the server, a
    child of toolexec started after the call's first moment, for an orphan of its own and kill it."""
    project.tool(file, FAST[file])
    with project.executor() as executor:
        results = [r for _ in range(6) for r in executor.call_many([ToolCall(name="fast", arguments={}) for _ in range(8)])]
        assert {(r.ok, r.error) for r in results} == {(True, None)}
        assert len({r.output.strip() for r in results}) == 1


BASH_PIDS = """#!/usr/bin/env bash
set -euo pipefail
# @describe Report pids.
# @meta warm
# @option --text! What to echo.
# @flag --loud Shout.
LOADED=$$
trap 'echo "trap:$argc_text" >&2' EXIT
main() {
    echo "out:$argc_text"
    printf '%s\\n' "$argc_text" "${argc_loud-}" "$LOADED" "$BASHPID" "$(cut -d' ' -f5 /proc/$BASHPID/stat)" \\
        "$LLM_TOOL_CALL_ID" "$PWD" "$-" "$(cat)" "version 1" >> "$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""


def test_a_warm_bash_tool_forks_a_subshell_per_call_from_one_sourcing(project: Project, private_tmpdir: Path) -> None:
    path = project.tool("pids.sh", BASH_PIDS)
    with project.executor() as executor:
        executor.build()
        descriptors = sorted(os.listdir("/proc/self/fd"))
        results = [executor.call("pids", {"text": f"t {n}", "loud": n == 1}, call_id=f"call-{n}") for n in range(3)]
        seen = [result.output.split("\n") for result in results]
        assert [(r.ok, r.stderr) for r in results] == [(True, f"trap:t {n}\n") for n in range(3)]
        assert [s[:2] for s in seen] == [["t 0", ""], ["t 1", "1"], ["t 2", ""]]
        assert len({s[2] for s in seen}) == 1  # one sourcing
        assert len({s[3] for s in seen} | {seen[0][2]}) == 4  # every call a new process ...
        assert [s[3] == s[4] for s in seen] == [True] * 3  # ... leading its own process group
        assert [s[5:] for s in seen] == [[f"call-{n}", os.getcwd(), "ehuB", "", "version 1", ""] for n in range(3)]
        path.write_text(BASH_PIDS.replace("version 1", "version 2"), encoding="utf-8")
        again = executor.call("pids", {"text": "x"}).output.split("\n")
        assert (again[-2], again[2] != seen[0][2]) == ("version 2", True)
    assert sorted(os.listdir("/proc/self/fd")) == descriptors  # the servers' own, too, are closed
    assert not alive(int(seen[0][2])) and not alive(int(again[2]))
    assert marked_processes(private_tmpdir) == []
    assert os.listdir(private_tmpdir) == []


@pytest.mark.parametrize(
    ("file", "source"),
    [
        (
            "prog.py",
            'import json, os\n\ndef run() -> str:\n    """P.\n\n    Warm: true\n    """\n'
            '    with open(os.environ["LLM_PROGRESS"], "a") as out:\n'
            '        out.write(json.dumps({"progress": 1, "total": 2}) + "\\n")\n'
            '        out.write(json.dumps({"progress": 2, "total": 2}) + "\\n")\n'
            '    return "ok"\n',
        ),
        (
            "prog.sh",
            "#!/usr/bin/env bash\n# @describe P.\n# @meta warm\nmain() {\n"
            '    echo \'{"progress": 1, "total": 2}\' >> "$LLM_PROGRESS"\n'
            '    echo \'{"progress": 2, "total": 2}\' >> "$LLM_PROGRESS"\n'
            '    echo ok >> "$LLM_OUTPUT"\n}\n',
        ),
    ],
)
def test_progress_of_a_warm_call(project: Project, file: str, source: str) -> None:
    from toolexec.runtimes import CallControl

    project.tool(file, source)
    with project.executor() as executor:
        for _ in range(2):  # the server's first call, and a later one
            events: list[dict] = []
            control = CallControl(on_event=events.append)
            try:
                result = executor.call("prog", {}, cancel=control)
            finally:
                control.close()
            assert (result.ok, result.output.strip()) == (True, "ok")
            assert [(e["progress"], e["total"]) for e in events if e["event"] == "progress"] == [(1, 2), (2, 2)]
        assert len(executor.calls._pool) == 1  # type: ignore[arg-type]


def test_toolexec_mcp_warm_serves_every_tool_warm_and_leaves_nothing(project: Project, private_tmpdir: Path) -> None:
    import subprocess
    import sys

    project.tool("pids.py", PIDS.replace("\n    Warm: true\n", "\n"))
    project.tool("bpids.sh", BASH_PIDS.replace("# @meta warm\n", ""))
    config = project.configure()
    argv = [sys.executable, "-m", "toolexec", "--config", str(config), "mcp", "--no-reload", "--warm"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None

    def request(number: int, method: str, params: dict) -> dict:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}).encode() + b"\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    try:
        request(
            1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        )
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        loaded = []
        for number, (tool, arguments) in enumerate(
            [("pids", {"text": "a"}), ("pids", {"text": "b"}), ("bpids", {"text": "c"}), ("bpids", {"text": "d"})]
        ):
            reply = request(10 + number, "tools/call", {"name": tool, "arguments": arguments})
            text = reply["result"]["content"][0]["text"]
            loaded.append(json.loads(text)["loaded"] if tool == "pids" else int(text.split("\n")[2]))
        assert loaded[0] == loaded[1] and loaded[2] == loaded[3] and loaded[0] != loaded[2]
        assert all(alive(pid) for pid in loaded)
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        proc.stdout.close()
        assert proc.stderr is not None
        proc.stderr.close()
    wait_until(lambda: not any(alive(pid) for pid in loaded), "the warm servers to end with the MCP server")
    assert marked_processes(private_tmpdir) == []


@pytest.mark.parametrize("sandbox", ["off", "declared"])
def test_describe_says_whether_a_tool_runs_warm_and_why_not(project: Project, sandbox: str) -> None:
    from tests.conftest import toolexec

    plain = PIDS.replace("\n    Warm: true\n", "\n")
    project.tool("pids.py", PIDS)
    project.tool("plain.py", plain)
    project.tool("named.py", plain)
    project.tool("confined.py", PIDS)
    project.tool("listed.py", PIDS)
    project.tool("kept.py", PIDS)
    project.tool("flat.js", "/**\n * Answer.\n * @warm\n */\nexport function run() {\n  return 1;\n}\n")
    project.tool("fast.sh", FAST["fast.sh"])
    policies = {"confined": {"network": "none"}, "listed": {"network": ["localhost:8080"]}}  # (its proxy: the server's)
    policies["kept"] = {"network": "none", "writes": []}  # no call keeps anything for the next: a server's would
    config = project.configure(warm_tools=["named"], sandbox=sandbox, sandbox_policies=policies)

    def warm_line(tool: str) -> list[str]:
        described = toolexec("--config", str(config), "describe", tool)
        assert described.returncode == 0, described.stderr
        return [line for line in described.stdout.splitlines() if line.startswith("Warm:")]

    yes = "Warm: yes: each call is a process forked from a server that loaded the tool once (Executor, toolexec mcp)"
    js = "Warm: yes: each call is a fresh node started ahead of it with the tool imported (Executor, toolexec mcp)"
    if sandbox == "off":  # no policy applies, nor the baseline
        expected = [[yes], [], [yes], [yes], [yes], [js], [yes], [yes]]
    else:
        alone = yes.replace("once", "once, in a PID namespace of its own")
        js = js.replace("it with", "it in a PID namespace of its own with")
        policy = alone.replace("once,", "once inside its sandbox,")
        bash = "Warm: yes: each call runs in a bash that sourced the tool ahead of it, in a PID namespace of its own (Executor, toolexec mcp)"
        kept = (
            "Warm: no: its policy lets no call keep anything for the next (writes: none, no open network), and the "
            "calls of a warm server share what the tool's top level keeps in it, so it runs cold"
        )
        expected = [[alone], [], [alone], [policy], [policy], [js], [bash], [kept]]
    tools = ("pids", "plain", "named", "confined", "listed", "flat", "fast", "kept")
    assert [warm_line(tool) for tool in tools] == expected


@contextlib.contextmanager
def _forked_call(server: object, *, isolated: bool = False) -> Iterator[tuple[ForkedCall, socket.socket]]:
    """A call's host side (its reply socket, its output pipes) with ``server`` standing for its fork server, and the
    server's end of the reply socket; everything closed after."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    call = ForkedCall(server, ours, out_read, err_read, isolated=isolated)  # type: ignore[arg-type]
    try:
        yield call, theirs
    finally:
        call.waiter.close()
        for channel in (call.stdout, call.stderr):
            assert channel is not None
            channel.close()
        for fd in (out_write, err_write):
            os.close(fd)
        theirs.close()


def test_a_status_read_with_the_pid_still_wakes_the_supervisor() -> None:
    """A call can end before toolexec reads its pid: both lines come in one read, and the channel (still open at the
    other end, as a copy held elsewhere may keep it) has nothing more to say. The waiter must say so all the same."""
    import select

    class Server:
        done = 0

        def _done(self) -> None:
            self.done += 1

    server = Server()
    with _forked_call(server) as (call, theirs):
        theirs.sendall(b"P4242\nX%d\n" % (3 << 8))
        assert call.started()
        assert select.select([call.waiter.fileno()], [], [], 5)[0] == [call.waiter.fileno()]
        assert (call.pid, call.wait(), server.done) == (4242, 3, 1)


def _send_with(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    import array

    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def _same_file(a: int, b: int) -> bool:
    return os.path.samestat(os.fstat(a), os.fstat(b))


class _Counting:
    done = 0

    def _done(self) -> None:
        self.done += 1


def test_an_unconfined_servers_pidfd_said_with_p_is_the_calls_leader_until_its_channel_closes() -> None:
    """Under ``sandbox: off`` the server sends a pidfd of the call's process with ``P``: the supervisor signals the
    call's group through it (tests/runtimes/test_group_number.py). It is held until the call's channel closes."""
    pidfd = os.pidfd_open(os.getpid())
    before = _open_descriptors()
    with _forked_call(_Counting()) as (call, theirs):
        _send_with(theirs, b"P4242\n", [pidfd])
        assert call.started()
        assert (call.pid, call.leader >= 0, _same_file(call.leader, pidfd)) == (4242, True, True)
        theirs.sendall(b"X0\n")
        assert call.wait() == 0
        assert call.leader >= 0  # (the supervisor signals what the tool left after its status)
    assert (call.leader, _open_descriptors()) == (-1, before)
    os.close(pidfd)


def test_no_descriptor_a_server_sends_but_an_unconfined_ones_with_p_is_kept() -> None:
    """Hostile servers: an isolated one (the tool's own top level, in its sandbox) sends descriptors with ``P``, an
    unconfined one two with ``P`` and one more with its status: none of them names the call's leader but the first
    that came with an unconfined server's ``P``, and every other is closed at once."""
    fds = [os.pidfd_open(os.getpid()), os.open(os.devnull, os.O_RDONLY)]
    with _forked_call(_Counting(), isolated=True) as (call, theirs):
        before = _open_descriptors()
        _send_with(theirs, b"P4242\n", fds)
        assert call.started()
        assert call.leader == -1
        assert _open_descriptors() == before
        _send_with(theirs, b"X0\n", fds)
        assert call.wait() == 0
        assert _open_descriptors() == before
    with _forked_call(_Counting()) as (call, theirs):
        before = _open_descriptors()
        _send_with(theirs, b"P4242\n", fds)
        assert call.started()
        assert (_same_file(call.leader, fds[0]), _open_descriptors() - before) == (True, {call.leader})
        _send_with(theirs, b"X0\n", fds[1:])
        assert call.wait() == 0
        assert (_same_file(call.leader, fds[0]), _open_descriptors() - before) == (True, {call.leader})
    for fd in fds:
        os.close(fd)


def _open_descriptors() -> set[int]:
    """This process's open descriptors (but the one its listing opened, closed by now)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            os.fstat(int(name))
            found.add(int(name))
    return found


# Each notes its server's process (sandbox off: its parent, or the Bash server's bash above the call's waiters) in
# its cache, stops it, then hangs (Bash: unless told to return). Bash's $PPID is its shell's parent (toolexec itself):
# parents are read from /proc.
STOPS_ITS_SERVER = {
    "python": (
        "stops.py",
        'import os, signal, time\n\n\ndef run() -> str:\n    """Stop my server.\n\n    Warm: true\n    """\n'
        '    with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "servers"), "a") as f:\n'
        '        f.write(f"{os.getppid()}\\n")\n'
        "    os.kill(os.getppid(), signal.SIGSTOP)\n    time.sleep(1000)\n",
    ),
    "bash": (
        "stops.sh",
        "#!/usr/bin/env bash\n# @describe Stop my server.\n# @meta warm\n# @option --whom=parent\n"
        'parent_of() { local stat; stat=$(</proc/$1/stat); stat=${stat##*) }; set -- $stat; echo "$2"; }\n'
        'main() {\n  local me=$BASHPID pid; pid=$(parent_of "$me")\n  [[ $argc_whom == parent ]] || pid=$(parent_of "$(parent_of "$pid")")\n'
        '  echo "$pid" >> "$LLM_TOOL_CACHE_DIR/servers"\n  kill -STOP "$pid"\n'
        '  [[ $argc_whom == server ]] || sleep 1000\n  echo returned >> "$LLM_OUTPUT"\n}\n'
        'eval "$(argc --argc-eval "$0" "$@")"\n',
    ),
}


def _stopped(pids: list[int]) -> list[int]:
    """Those of ``pids`` that are stopped (each is continued: a failing test leaves nothing stopped behind it)."""
    import signal

    found = []
    for pid in pids:
        with contextlib.suppress(OSError, IndexError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                found.append(pid)
                os.kill(pid, signal.SIGCONT)
    return found


@pytest.mark.parametrize("language", ["python", "bash"])
def test_a_tool_that_stops_its_server_still_times_out_and_its_server_is_replaced(project: Project, language: str) -> None:
    """``kill -STOP`` of its server (sandbox off: nothing keeps a tool from signalling its parent) hung the call past
    its timeout, whose status comes from that server: the call now ends at its timeout as a cold one, the server
    goes on to say so and is replaced, and the next call runs in a new one."""
    import threading

    project.tool(*STOPS_ITS_SERVER[language])
    servers = project.root / "functions" / "cache" / "stops" / "servers"
    results: list[ToolResult] = []

    def calls() -> None:
        results.extend(executor.call("stops", {}, timeout=2) for _ in range(2))

    with project.executor() as executor:
        caller = threading.Thread(target=calls)
        caller.start()
        caller.join(120)  # a hang fails the test here, rather than at pytest's own timeout
        noted = [int(line) for line in servers.read_text().split()]
        assert (caller.is_alive(), _stopped(noted)) == (False, [])
        assert [(r.status, r.exit_code, r.tool_call_error) for r in results] == [
            ("timeout", 124, "Tool call 'stops' timed out after 2s")
        ] * 2
        assert len(set(noted)) == 2  # the second call's server is a new one
    assert [pid for pid in noted if alive(pid)] == []


def test_a_bash_tool_that_stops_its_servers_bash_and_returns_leaves_the_next_call_on_time(project: Project) -> None:
    """A call that stops the server's bash (the call's waiter says its status) ends as ever; the next calls, which
    the slot's waiter starts (the server's bash forks only a new slot's waiter), run in that server, which stays
    stopped until the executor closes: then it is continued and ends, with the slot's waiter."""
    project.tool(*STOPS_ITS_SERVER["bash"])
    servers = project.root / "functions" / "cache" / "stops" / "servers"
    with project.executor() as executor:
        results = [executor.call("stops", {"whom": "server"}, timeout=30) for _ in range(3)]
        noted = [int(line) for line in servers.read_text().split()]
        waiters = process_linux._children(noted[0])  # the one slot's, kept: each call was forked from it
        stopped = process_linux.stopped_in_group(noted[0])
    assert [(r.ok, r.output) for r in results] == [(True, "returned\n")] * 3
    assert (len(set(noted)), len(waiters), stopped) == (1, 1, True)
    assert [pid for pid in [*noted, *waiters] if alive(pid)] == []


def test_a_call_given_up_on_whose_server_says_nothing_ends_that_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor gave up on a call (killed, no status): its server is woken, and ended when it still says
    nothing (a server stopped by a tracer, which SIGCONT does not resume), so that the call's wait returns."""
    from toolexec.runtimes import warm_fork

    monkeypatch.setattr(warm_fork, "GIVE_UP_SECONDS", 0.05)

    class Server:
        def __init__(self) -> None:
            self.said: list[str] = []
            self.theirs: socket.socket | None = None

        def wake(self) -> bool:
            self.said.append("wake")
            return False

        def kill(self) -> None:  # what ending the server does to the call's channel: its other end closes
            self.said.append("kill")
            assert self.theirs is not None
            self.theirs.shutdown(socket.SHUT_RDWR)

        def _done(self) -> None:
            self.said.append("done")

    server = Server()
    with _forked_call(server) as (call, theirs):
        server.theirs = theirs
        theirs.sendall(b"P4242\n")
        assert call.started()
        call.give_up()
        assert (call.wait(), call.reported, server.said) == (-9, False, ["wake", "kill", "done"])


# What a call's process imports on its way out (its exit's atexit, json for a value that is not text), and what of it
# the tool found loaded when it ran; the returned dict is rendered with json.
AHEAD = '''
import sys


def run() -> dict:
    """Say what is loaded.

    Warm: true
    """
    return {"loaded": [name in sys.modules for name in ("atexit", "json")], "dict": {"ok": [1, 0.5, None]}}
'''


def test_a_warm_calls_process_finds_what_it_imports_on_its_way_out_loaded(project: Project) -> None:
    """Imported in each call's process, atexit would cost a call 0.3 ms and json (for a returned dict) 2 ms: the
    server imports both once, after the tool; a cold call's process imports them as it always did."""
    project.tool("ahead.py", AHEAD)
    with project.executor() as executor:
        warm = [executor.call("ahead") for _ in range(2)]
    with Executor(project.configure(), warm=False) as executor:
        cold = executor.call("ahead")
    assert [json.loads(result.output) for result in warm] == [{"loaded": [True, True], "dict": {"ok": [1, 0.5, None]}}] * 2
    seen = json.loads(cold.output)  # (whether atexit is loaded at a cold start is the interpreter's site's affair)
    assert (seen["loaded"][1], seen["dict"]) == (False, {"ok": [1, 0.5, None]})


# Waits for its go file when given one.
WAITER = '''
import os, time


def run(go: str = "") -> str:
    """Wait for ``go`` to exist.

    Warm: true

    Args:
        go: the file to wait for
    """
    while go and not os.path.exists(go):
        time.sleep(0.01)
    return "done"
'''


def _within(condition: Callable[[], bool], seconds: float) -> bool:
    """Whether ``condition()`` comes true within ``seconds``."""
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.005)
    return True


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_a_call_that_follows_the_last_one_back_to_back_has_the_next_spare_made_while_it_runs(
    project: Project, tmp_path: Path
) -> None:
    """A spare is made once a call's status is said, unless calls come back to back: then the next call's spare is
    made as soon as a call is handed over, so that the call after it does not wait for one. (Back to back is a matter
    of milliseconds: a machine too busy for that is given a few tries.)"""
    project.tool("waiter.py", WAITER)
    with project.executor() as executor:
        assert executor.call("waiter").output == "done"  # the server is up
        (server,) = running_servers()
        seen = []
        for attempt in range(5):
            go = tmp_path / f"go{attempt}"
            results: list[ToolResult] = []
            assert executor.call("waiter").output == "done"
            waiting = threading.Thread(
                target=lambda go=go, results=results: results.append(executor.call("waiter", {"go": str(go)}))
            )
            waiting.start()
            try:  # the waiting call's process, and a spare beside it once made
                seen.append(_within(lambda: len(_children(server)) == 2, 2.0))
            finally:
                go.touch()
                waiting.join(30)
            assert [result.output for result in results] == ["done"]
            if seen[-1]:
                break
        assert seen[-1] is True, (seen, _children(server))
