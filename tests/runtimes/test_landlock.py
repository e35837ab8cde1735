# ruff: noqa: F811 - the fixtures language and loopback_server come from test_sandbox
"""The fallback where bubblewrap cannot start (missing here: ``TOOLEXEC_BWRAP`` names nothing): the same hostile tools,
in every language, stopped by Landlock, seccomp and rlimits applied by the launcher before the tool's ``exec``.

What differs from bubblewrap is what the kernel says (``Permission denied`` where bwrap's read-only mounts say
``Read-only file system``), and that a process the tool leaves is found by the call's marker, not ended with a
PID namespace. ``TOOLEXEC_LANDLOCK_ABI`` makes the kernel's Landlock look older (or missing).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.runtimes.test_sandbox import (  # the hostile tools and their fixtures
    TOOLS,
    _call,
    _sleepers,
    language,  # noqa: F401 - a fixture
    loopback_server,  # noqa: F401 - a fixture
)
from toolexec.runtimes import fallback

pytestmark = pytest.mark.skipif(not fallback.abi(), reason="Linux with Landlock only")
DENIED = ("permission denied", "eacces", "operation not permitted", "eperm")


@pytest.fixture(autouse=True)
def without_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLEXEC_BWRAP", "/nonexistent/bwrap")
    from toolexec.runtimes import sandbox

    assert sandbox.mechanism() == ("landlock", "")


def _denied(result: Any) -> bool:
    said = f"{result.error}\n{result.stderr}\n{result.output}".lower()
    return result.status == "error" and result.reason == "tool_failed" and any(word in said for word in DENIED)


def test_writes_outside_its_places_are_refused(project: Project, language: str) -> None:
    other_cache = project.root / "functions" / "cache" / "other"
    other_cache.mkdir(parents=True)
    config_home = Path(os.environ["XDG_CONFIG_HOME"])
    targets = {
        "home": Path.home() / "planted",
        "etc": Path("/etc/toolexec-planted"),
        "functions": project.tools / "evil.py",
        "a tool file": project.tools / "hostile.py",
        "other cache": other_cache / "planted",
        "its config": project.config,
        "user config": config_home / "planted",
        "system tmp": Path("/tmp") / f"toolexec-planted-{os.getpid()}",
    }
    for where, target in targets.items():
        before = target.read_bytes() if target.exists() else None
        result = _call(project, language, "write", str(target))
        assert _denied(result), (where, result)
        assert (target.read_bytes() if target.exists() else None) == before, where
    notes = Path.home() / "notes"
    notes.mkdir()
    granted = _call(project, language, "write", str(notes / "granted"), granted={"writes": ["~/notes"]})
    assert (granted.status, granted.output.strip()) == ("ok", "wrote")
    assert (notes / "granted").read_text() == ("x\n" if language == "bash" else "x")


def test_a_hidden_path_cannot_be_read_unless_declared(project: Project, language: str) -> None:
    secret = Path.home() / ".ssh" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY")
    for path in ("~/.ssh/id_ed25519", str(project.config)):
        result = _call(project, language, "read", path)
        assert _denied(result), (path, result)
        assert "PRIVATE KEY" not in result.output + result.stderr + (result.error or "")
    granted = _call(project, language, "read", "~/.ssh/id_ed25519", granted={"reads": ["~/.ssh"]})
    assert (granted.status, granted.output.strip()) == ("ok", "PRIVATE KEY")


def test_toolexec_secrets_never_reach_the_tool(project: Project, language: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    assert _call(project, language, "env", "SECRET_TOKEN").output.strip() == "<unset>"
    granted = _call(project, language, "env", "SECRET_TOKEN", granted={"env": ["SECRET_TOKEN"]})
    assert (granted.status, granted.output.strip()) == ("ok", "hunter2")


def test_no_network_means_not_even_loopback(project: Project, language: str, loopback_server: int) -> None:
    result = _call(project, language, "connect", f"127.0.0.1:{loopback_server}")
    assert _denied(result), result
    granted = _call(project, language, "connect", f"127.0.0.1:{loopback_server}", granted={"network": "all"})
    assert granted.status == "ok", granted


@pytest.mark.parametrize("version", ["4", "1"])
def test_before_landlock_scopes_seccomp_still_refuses_the_network(
    project: Project,
    loopback_server: int,
    version: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLEXEC_LANDLOCK_ABI", version)  # 4: TCP rules, no scopes; 1: no network rules at all
    result = _call(project, "python", "connect", f"127.0.0.1:{loopback_server}")
    assert _denied(result), result


def test_an_allow_list_is_refused_without_bwrap(project: Project, language: str, loopback_server: int) -> None:
    result = _call(
        project, language, "connect", f"127.0.0.1:{loopback_server}", granted={"network": [f"localhost:{loopback_server}"]}
    )
    assert (result.status, result.reason, result.exit_code) == ("unavailable", "unavailable", 127)


@pytest.mark.parametrize("version", ["", "4"])
def test_the_tool_cannot_signal_toolexec(project: Project, language: str, version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kill -STOP $PPID``, with toolexec in a process of its own: were it stopped, this test sees it (and wakes it)."""
    if version:  # before ABI 6 Landlock does not scope signals: the seccomp filter refuses them by pid
        monkeypatch.setenv("TOOLEXEC_LANDLOCK_ABI", version)
    file, source = TOOLS[language]
    project.tool(file, source)
    config = project.configure([file], timeout=3)
    argv = [sys.executable, "-m", "toolexec", "--config", str(config), "run", "hostile", '{"action": "stop-parent"}']
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stopped, deadline = False, time.monotonic() + 30
    while run.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            stopped = stopped or Path(f"/proc/{run.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
        if stopped:
            run.send_signal(signal.SIGCONT)
        time.sleep(0.05)
    if run.poll() is None:
        run.kill()
    out, err = run.communicate()
    assert not stopped, "the tool stopped toolexec"
    said = (out + err).decode().lower()
    # refused: the tool's own error (Python, Node), or it goes on to sleep past its timeout (Bash's kill only complains)
    assert run.returncode != 0 and (any(word in said for word in DENIED) or "timed out" in said), said


def test_an_escapee_is_found_and_ended(project: Project, language: str) -> None:
    pid_file = project.root / "functions" / "cache" / "hostile" / "escapee.pid"
    result = _call(project, language, "escape", str(pid_file))
    assert (result.status, result.output.strip()) == ("ok", "left one behind"), result
    assert not _sleepers(project)


@pytest.mark.parametrize(
    ("action", "arg", "reason"),
    [("memory", str(4 << 30), "memory_limit"), ("cpu", "", "cpu_limit"), ("big-file", str(2 << 30), "file_size_limit")],
)
def test_each_limit_stops_the_tool_with_its_reason(project: Project, language: str, action: str, arg: str, reason: str) -> None:
    if language == "bash" and action == "memory":
        pytest.skip("bash has no allocation of its own to try")
    result = _call(project, language, action, arg)
    assert (result.status, result.reason) == ("error", reason), result
    assert not list(Path(os.environ["TMPDIR"]).iterdir())  # the call's private TMPDIR is gone with it


def test_forking_past_the_process_limit_is_refused(project: Project, language: str) -> None:
    if language in ("javascript", "typescript"):
        pytest.skip("Node starts threads, not processes; fork bombs are the Python and Bash cases")
    result = _call(project, language, "fork", "10000")
    assert result.status == "error" or "forked" in result.output
    assert result.reason == "process_limit" or language == "bash", result
    assert not _sleepers(project)


def test_a_bwrap_that_cannot_start_gives_way_to_landlock(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "bwrap"  # user namespaces refused: it fails toolexec's first try
    broken.write_text('#!/bin/sh\necho "bwrap: setting up uid map: Permission denied" >&2\nexit 1\n')
    broken.chmod(0o755)
    monkeypatch.setenv("TOOLEXEC_BWRAP", str(broken))
    from toolexec.runtimes import sandbox

    assert sandbox.mechanism() == ("landlock", "")
    assert _denied(_call(project, "python", "write", str(Path.home() / "planted")))
    assert (_call(project, "python", "env", "LLM_TOOL_NAME").output.strip()) == "hostile"


UNIX_PY = '''
import socket, subprocess

def run(path: str = "") -> str:
    """Talk to a child of its own through a pipe, then to a Unix socket.

    Args:
        path: the socket (none: no socket)

    Network: all
    """
    child = subprocess.run(["echo", "piped"], capture_output=True, text=True, check=True).stdout.strip()
    a, b = socket.socketpair()
    a.sendall(b"paired")
    paired = b.recv(6).decode()
    if not path:
        return f"{child} {paired}"
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        return f"{child} {paired} {s.recv(5).decode()}"
'''
UNIX_JS = """
import net from "node:net";
import { execFileSync } from "node:child_process";

/**
 * Talk to a child of its own through a pipe, then to a Unix socket.
 * @param {string} [path] - the socket (none: no socket)
 * @network all
 * @memory 4GiB
 */
export async function run(path = "") {
  const child = execFileSync("echo", ["piped"], { encoding: "utf8" }).trim();
  if (!path) return `${child} paired`;
  return await new Promise((ok, fail) => {
    const s = net.connect(path, () => {});
    s.on("data", (data) => { s.end(); ok(`${child} paired ${data}`); });
    s.on("error", fail);
  });
}
"""


@pytest.mark.parametrize("file", ["unix.py", "unix.js"])
def test_no_unix_socket_but_its_own_pipes(project: Project, file: str, tmp_path: Path) -> None:
    """A named Unix socket may be the user's D-Bus, which can start programs outside the sandbox: refused in every
    network mode; the tool's own pipes and socket pairs (Node's child processes use them) still work."""
    import socket

    if file.endswith(".js"):
        from toolexec.runtimes.interpreter import which

        if which("node") is None:
            pytest.skip("node is not installed")
    project.tool(file, UNIX_PY if file.endswith(".py") else UNIX_JS)
    path = str(tmp_path / "service.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        server.settimeout(0.1)
        with project.executor([file]) as executor:
            assert (executor.call("unix", {}).output) == "piped paired"
            result = executor.call("unix", {"path": path})
            assert _denied(result), result
            with contextlib.suppress(TimeoutError):
                assert server.accept() is None  # nobody connected
            plain = project.executor([file], sandbox="off")
            with plain:
                thread_result: list[Any] = []
                import threading

                caller = threading.Thread(target=lambda: thread_result.append(plain.call("unix", {"path": path})))
                caller.start()
                server.settimeout(30)
                connection, _ = server.accept()
                connection.sendall(b"hello")
                connection.close()
                caller.join()
            assert (thread_result[0].status, thread_result[0].output) == ("ok", "piped paired hello"), thread_result[0]


def test_the_rules_grant_around_what_they_withhold(tmp_path: Path) -> None:
    """The launcher alone, on a tree: a writable place with a protected and a hidden directory inside it."""
    from toolexec.runtimes import landlock

    top = tmp_path / "top"
    for directory in ("protected", "hidden", "sub"):
        (top / directory).mkdir(parents=True)
    (top / "protected" / "p.txt").write_text("p")
    (top / "hidden" / "secret").write_text("s")
    (top / "f.txt").write_text("f")
    rules = [("grant", landlock.READ, "/"), ("grant", landlock.READ | landlock.WRITE, str(top))]
    rules += [("grant", landlock.WRITE_FILE, "/dev/null")]
    rules += [
        ("except", landlock.WRITE, str(top / "protected")),
        ("except", landlock.ALL & ~landlock.READ_DIR, str(top / "hidden")),
    ]
    spec = "\n".join(f"{word} {rights} {os.fsencode(path).hex()}" for word, rights, path in rules)
    steps = {
        "write in a subdirectory": "echo x > sub/new",
        "write an existing file": "echo x >> f.txt",
        "write a protected file": "echo x > protected/p.txt",
        "make a file beside the protected directory": "echo x > new",  # the documented limit of granting around
        "read a hidden file": "cat hidden/secret",
        "list a hidden directory": "ls hidden",
        "read a protected file": "cat protected/p.txt",
    }
    script = "; ".join(
        f'if {{ {step}; }} >/dev/null 2>&1; then echo "{name}: yes"; else echo "{name}: no"; fi' for name, step in steps.items()
    )
    done = subprocess.run(
        [sys.executable, "-S", "-I", "-B", str(fallback.LAUNCHER), spec, "/bin/sh", "-c", script],
        cwd=top,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "write in a subdirectory: yes",
        "write an existing file: yes",
        "write a protected file: no",
        "make a file beside the protected directory: no",
        "read a hidden file: no",
        "list a hidden directory: yes",
        "read a protected file: yes",
    ]
    assert (top / "protected" / "p.txt").read_text() == "p" and not (top / "new").exists()


def test_a_launcher_that_cannot_confine_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    done = subprocess.run(
        [sys.executable, "-S", "-I", "-B", str(fallback.LAUNCHER), "grant x 00", "/bin/touch", str(marker)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stderr) == (
        1,
        "toolexec-sandbox: cannot confine /bin/touch: invalid literal for int() with base 10: 'x'\n",
    )
    assert not marker.exists()


BOMB = '''
import os, time

def run(count: int) -> str:
    """Fork many.

    Args:
        count: how many

    Processes: 16
    """
    for _ in range(count):
        if os.fork() == 0:
            time.sleep(2)
            os._exit(0)
    return f"forked {count}"
'''


def _as_nobody(python: str) -> list[str]:
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python]


def test_as_an_ordinary_user_the_process_limit_counts_from_the_users_tasks() -> None:
    """Not root, no cgroup to write: ``RLIMIT_NPROC`` is set to the user's tasks at the start plus the limit."""
    import shutil
    import site
    import sysconfig

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root (to become nobody) and util-linux's setpriv")
    packages = sysconfig.get_paths()["purelib"]
    probe = (
        f"import subprocess, sys; assert sys.version_info[:2] == {sys.version_info[:2]}; open({packages!r} + '/yaml/__init__.py');"
        "subprocess.run([sys.executable, '-c', ''], check=True)"  # it can start itself again (the launcher), as nobody
    )
    candidates = ("/usr/bin/python3", sys.executable)
    ok = [
        c for c in candidates if subprocess.run([*_as_nobody(c), "-c", probe], capture_output=True, check=False).returncode == 0
    ]
    python = ok[0] if ok else None
    if python is None:
        pytest.skip("no Python of this version that nobody may run, with toolexec's packages readable")
    root = Path("/tmp") / f"toolexec-nobody-{os.urandom(6).hex()}"  # pytest's own directory is root's only
    try:
        (root / "functions" / "tools").mkdir(parents=True)
        (root / "home").mkdir()
        (root / "functions" / "tools" / "bomb.py").write_text(BOMB)
        (root / "config.yaml").write_text("visible_tools: [bomb.py]\n")
        (root / "run.py").write_text(
            f"import site, sys\nsite.addsitedir({packages!r})\nfor path in {site.getsitepackages()!r}: site.addsitedir(path)\n"
            "from toolexec.cli import program\nsys.exit(program())\n"
        )
        shutil.chown(root, 65534, 65534)
        for path in root.rglob("*"):
            shutil.chown(path, 65534, 65534)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(root / "home"), "TOOLEXEC_BWRAP": "/nonexistent/bwrap"}
        argv = [*_as_nobody(python), str(root / "run.py"), "--config", str(root / "config.yaml"), "run", "bomb"]
        few = subprocess.run([*argv, '{"count": 5}'], env=env, cwd=root, capture_output=True, text=True, timeout=60, check=False)
        assert (few.returncode, few.stdout) == (0, "forked 5"), few.stderr
        many = subprocess.run(
            [*argv, '{"count": 200}'], env=env, cwd=root, capture_output=True, text=True, timeout=60, check=False
        )
        assert many.returncode == 1
        assert "the tool could not start more than its sandbox limit of 16 processes" in many.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)


SIGNAL_PY = '''
import os, signal

def run(pid: int) -> str:
    """Signal a process.

    Args:
        pid: which

    Network: none
    """
    os.kill(pid, signal.SIGUSR1)
    return "sent"
'''


@pytest.mark.parametrize("version", ["", "4"])
def test_no_thread_of_toolexec_can_be_signalled(project: Project, version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill() of any thread's id reaches its whole process: each of toolexec's threads is protected, not only its main one
    (SIGUSR1, caught here: were it delivered, the test would see it rather than stop)."""
    import threading

    if version:
        monkeypatch.setenv("TOOLEXEC_LANDLOCK_ABI", version)
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda number, frame: received.append(number))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        project.tool("signaller.py", SIGNAL_PY)
        with project.executor(["signaller.py"]) as executor:
            for target in (os.getpid(), other.native_id):
                result = executor.call("signaller", {"pid": target})
                assert _denied(result), (target, result)
        unconfined = project.executor(["signaller.py"], sandbox="off")
        with unconfined:  # the same tool, unconfined, does reach it
            assert unconfined.call("signaller", {"pid": other.native_id}).output == "sent"
    finally:
        stop.set()
        other.join()
        signal.signal(signal.SIGUSR1, previous)
    assert received == [signal.SIGUSR1]


def test_elsewhere_than_linux_a_policy_is_refused(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS and the rest: no mechanism is used (Seatbelt is not), the call is refused, naming the way out."""
    monkeypatch.setattr(sys, "platform", "darwin")
    marker = project.root / "out" / "ran"
    marker.parent.mkdir(parents=True)
    result = _call(project, "python", "write", str(marker), granted={"writes": [str(marker.parent)]})
    assert (result.status, result.exit_code) == ("unavailable", 127)
    assert result.error == (
        "hostile: its sandbox policy cannot be enforced here, so it is not run: confinement is supported on Linux only "
        "(bubblewrap, or Landlock and seccomp); this is darwin: set sandbox: off to run tools unconfined"
    )
    assert not marker.exists()


def test_a_launcher_that_cannot_confine_is_a_refusal(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the kernel refuse a rule at the call (the launcher says so and exits 1), the call is refused, not failed."""
    failing = tmp_path / "launcher.py"
    failing.write_text(
        "import sys\nsys.stderr.write('toolexec-sandbox: cannot confine x: Operation not permitted\\n')\nsys.exit(1)\n"
    )
    monkeypatch.setattr(fallback, "LAUNCHER", failing)
    result = _call(project, "python", "env", "HOME")
    assert (result.status, result.reason, result.exit_code) == ("unavailable", "unavailable", 127)
    assert result.error == (
        "hostile: its sandbox policy cannot be enforced here, so it is not run: "
        "toolexec-sandbox: cannot confine x: Operation not permitted"
    )
