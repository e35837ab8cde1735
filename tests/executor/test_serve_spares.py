"""``toolexec serve``'s calls start in sandboxes set up ahead by the child waiting for them (toolexec.serve_spares), and
a served run's caller gets the end of its output as the command exits: what a served call may change, and what it
may not (a spare used once, by an identical call; nothing left behind; a recipe that does not read back makes none)."""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.executor.test_serve import Served, _children, _descendants, _idle, started, toolexec
from tests.helpers import Ordinary, alive, wait_until
from toolexec.runtimes import baseline
from toolexec.runtimes.sandbox import Confinement
from toolexec.runtimes.sandbox_spare import LAUNCHER, Recipe
from toolexec.serve_spares import read_recipe, write_recipe

PROBE_SH = """#!/usr/bin/env bash
# @describe Say what started the namespace the call runs in (its init's command line).
main() {
    tr '\\0' ' ' </proc/1/cmdline >>"$LLM_OUTPUT"
}
"""
ECHO_SH = """#!/usr/bin/env bash
# @describe Echo the text.
# @option --text! The text.
main() {
    printf "%s" "$argc_text" >>"$LLM_OUTPUT"
}
"""
needs_baseline = pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")


def _waiting_sandbox(server: int) -> int | None:
    """The bwrap of the sandbox a waiting child of ``server`` set up ahead, if there is one."""
    for child in _children(server):
        for pid in _descendants(child):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap":
                    return pid
            except OSError:
                pass
    return None


def _set_up_ahead(served: Served, tool: str) -> int:
    """Two served runs of ``tool`` (each succeeds), then the bwrap of the sandbox the waiting child sets up for the
    next, once it is there."""
    for _ in range(2):
        assert toolexec("--config", str(served.config), "run", tool, "{}").returncode == 0
    wait_until(lambda: _waiting_sandbox(served.process.pid) is not None, "the sandbox set up ahead")
    spare = _waiting_sandbox(served.process.pid)
    assert spare is not None
    return spare


@needs_baseline
def test_a_kind_of_served_call_seen_twice_starts_in_a_sandbox_set_up_ahead(project: Project) -> None:
    """From a kind of call's second served run on, the child waiting for the next client sets its sandbox up while no
    call runs; the next such call starts in it (its namespace's init is the one that started the spare's launcher),
    with the cold call's result; the server's end takes a spare nobody used along, leaving nothing."""
    project.tool("probe.sh", PROBE_SH)
    config = project.configure()
    served = Served(config)
    try:
        runs = [toolexec("--config", str(config), "run", "probe", "{}") for _ in range(2)]
        wait_until(lambda: _waiting_sandbox(served.process.pid) is not None, "the sandbox set up ahead")
        spare = _waiting_sandbox(served.process.pid)
        runs.append(toolexec("--config", str(config), "run", "probe", "{}"))
        wait_until(lambda: _waiting_sandbox(served.process.pid) not in (None, spare), "the next one")
        left = _waiting_sandbox(served.process.pid)
    finally:
        status, count, said = served.stop()
    assert (status, count, started(said)) == (0, 3, (1, 0, 0))  # the server counted the call that started in the spare
    assert [(done.returncode, done.stderr) for done in runs] == [(0, b"")] * 3
    assert ["_spare_launcher.py" in done.stdout.decode() for done in runs] == [False, False, True]
    assert spare is not None and not alive(spare)
    assert left is not None and not alive(left)


@needs_baseline
def test_a_served_call_of_another_kind_runs_cold_and_its_child_ends_the_unused_sandbox(project: Project) -> None:
    """A sandbox set up for one tool's calls is never another's: a call of another tool runs cold, as it would, and
    the spare is ended with the child that made it."""
    project.tool("probe.sh", PROBE_SH)
    project.tool("echo.sh", ECHO_SH)
    config = project.configure()
    served = Served(config)
    try:
        spare = _set_up_ahead(served, "probe")
        done = toolexec("--config", str(config), "run", "echo", '{"text": "other"}')
        wait_until(lambda: not alive(spare), "the unused sandbox to end")
        wait_until(lambda: _idle(served.process.pid), "the server to be idle again")
    finally:
        status, count, said = served.stop()
    assert (status, count, started(said)) == (0, 3, (0, 0, 0))  # (the third, of another kind, started cold)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"other", b"")


@needs_baseline
def test_a_sandbox_set_up_ahead_is_ended_after_warm_idle_seconds_without_a_call(project: Project) -> None:
    """A spare no call came for within ``warm_idle`` seconds is ended by the child that waits (the next call runs
    cold, as it would have); the child goes on waiting."""
    project.tool("probe.sh", PROBE_SH)
    config = project.configure(warm_idle=0.5)
    served = Served(config)
    try:
        spare = _set_up_ahead(served, "probe")
        wait_until(lambda: not alive(spare), "the idle sandbox to end")
        done = toolexec("--config", str(config), "run", "probe", "{}")
    finally:
        stopped = served.stop()[:2]
    assert stopped == (0, 3)
    assert (done.returncode, "_spare_launcher.py" in done.stdout.decode(), done.stderr) == (0, False, b"")


def _spare_sandboxes() -> list[int]:
    """Every process of a sandbox set up ahead by this toolexec (its launcher's path in its command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and LAUNCHER.encode() in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


@needs_baseline
def test_a_server_stopped_while_its_waiting_child_sets_a_sandbox_up_leaves_none(project: Project) -> None:
    """The server's stop reaches the waiting child while it may be starting the sandbox of the next call (it starts
    as the call before ends): the child finishes or undoes it, then ends it; no sandbox outlives the server."""
    project.tool("probe.sh", PROBE_SH)
    config = project.configure()
    for _ in range(4):
        served = Served(config)
        try:
            for _ in range(2):
                assert toolexec("--config", str(config), "run", "probe", "{}").returncode == 0
        finally:
            stopped = served.stop()[:2]
        assert stopped == (0, 2)
        assert _spare_sandboxes() == []


def test_a_waiting_child_told_to_end_while_it_starts_a_sandbox_ends_once_it_is_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's stop (SIGTERM) may come while the waiting child starts a sandbox (a bwrap not yet known to the
    guard, which would outlive the child): the child ends once the start is over, through its cleanup. Nor does the
    server's death kill it meanwhile (its death signal is off while it starts one, and on again after)."""
    from toolexec import serve

    steps: list[object] = []
    monkeypatch.setattr(serve.process_linux, "die_with_parent", lambda sig: steps.append(("death signal", sig)))

    class Starting:
        idle = 60.0
        spare = None

        def make(self, message: bytes) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # the stop, in the middle of the start
            steps.append(message)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "s.sock"))
    listener.listen(1)
    recipe, given = os.pipe()
    os.write(given, b"the recipe")
    os.close(given)
    previous = signal.signal(signal.SIGTERM, serve._end_waiting)
    try:
        with pytest.raises(SystemExit):
            serve._accept_one(listener, recipe, Starting())  # type: ignore[arg-type]
    finally:
        signal.signal(signal.SIGTERM, previous)
        listener.close()
        os.close(recipe)
    assert steps == [("death signal", None), b"the recipe", ("death signal", signal.SIGKILL)]


# A declared policy (its network: none): a baseline Python call's tool starts ahead instead (toolexec.serve_early).
FDS_PY = '''import os

def run() -> str:
    """Name the descriptors this call holds open, and what started its namespace.

    Network: none
    """
    held = sorted(int(name) for name in os.listdir("/proc/self/fd"))
    return f"{held} {'spare' if b'_spare_launcher.py' in open('/proc/1/cmdline', 'rb').read() else 'cold'}"
'''


@needs_baseline
def test_a_tool_served_cold_or_from_a_spare_holds_nothing_of_toolexec_s(project: Project) -> None:
    """Hostile tools: whether its sandbox was set up ahead or not, a served call holds its three streams and nothing
    else (the descriptor listing its own), so no tool can reach the server's socket, the children's queue of recipes
    or another call's spare."""
    project.tool("fds.py", FDS_PY)
    config = project.configure()
    served = Served(config)
    try:
        runs = [toolexec("--config", str(config), "run", "fds", "{}").stdout.decode() for _ in range(2)]
        wait_until(lambda: _waiting_sandbox(served.process.pid) is not None, "the sandbox set up ahead")
        runs.append(toolexec("--config", str(config), "run", "fds", "{}").stdout.decode())
    finally:
        stopped = served.stop()[:2]
    assert stopped == (0, 3)
    assert runs == ["[0, 1, 2, 3] cold", "[0, 1, 2, 3] cold", "[0, 1, 2, 3] spare"]


@needs_baseline
def test_a_caller_whose_environment_would_make_another_sandbox_runs_cold(project: Project, tmp_path: Path) -> None:
    """A spare is made in the waiting child's environment (the server's): a caller whose environment would have its
    cold start make another (here its TMPDIR, where a call's files are made) does not use it."""
    project.tool("probe.sh", PROBE_SH)
    config = project.configure()
    served = Served(config)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        spare = _set_up_ahead(served, "probe")
        done = toolexec("--config", str(config), "run", "probe", "{}", env={**os.environ, "TMPDIR": str(elsewhere)})
    finally:
        stopped = served.stop()[:2]
    assert stopped == (0, 3)
    assert (done.returncode, "_spare_launcher.py" in done.stdout.decode(), done.stderr) == (0, False, b"")
    assert spare is not None and not alive(spare)
    assert list(elsewhere.iterdir()) == []


def _holders(pipe: int) -> list[int]:
    """The processes (other than this one) holding ``pipe``'s inode open."""
    target = os.readlink(f"/proc/self/fd/{pipe}")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if target in links:
            found.append(int(entry.name))
    return found


def test_the_caller_s_streams_are_let_go_before_the_command_exits(project: Project) -> None:
    """A caller reading a served run's output (``$(toolexec run …)``) sees its end as the command exits: the server's
    child lets go of the caller's stdout and stderr before it says the status, though it is still ending (here its
    guard is stopped, which holds its end for as long as the guard is)."""
    project.tool("echo.sh", ECHO_SH)
    config = project.configure(sandbox="off")
    served = Served(config)
    read_end, write_end = os.pipe()
    try:
        wait_until(lambda: _idle(served.process.pid), "the server's waiting child and its guard")
        (child,) = _children(served.process.pid)
        (guard,) = _children(child)
        os.kill(guard, signal.SIGSTOP)
        try:
            command = [sys.executable, "-m", "toolexec", "--config", str(config), "run", "echo", '{"text": "x"}']
            run = subprocess.Popen(command, stdout=write_end, stderr=write_end)
            os.close(write_end)
            write_end = -1
            assert run.wait(timeout=60) == 0
            holders = _holders(read_end)
            still = alive(child)
        finally:
            os.kill(guard, signal.SIGCONT)
        output = os.read(read_end, 100)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
        stopped = served.stop()[:2]
    assert stopped == (0, 1)
    assert (output, holders, still) == (b"x", [], True)


# --- the recipes: plain data, checked on the way in -----------------------------------------------------------------


def _recipe(**changes: object) -> Recipe:
    confinement = Confinement(baseline=True, cpu=31, processes=256, file_size=1 << 20, **changes)  # type: ignore[arg-type]
    return Recipe(confinement=confinement, places=("/tmp/x",), cwd="/work")


def test_a_recipe_reads_back_as_it_was_written() -> None:
    key = ("baseline", "probe", "/p/config.yaml")
    found = read_recipe(write_recipe(key, _recipe()) or b"")
    assert found is not None
    assert (found[0], found[1].confinement, found[1].places, found[1].cwd, found[1].files) == (
        key,
        _recipe().confinement,
        ("/tmp/x",),
        "/work",
        None,
    )


def test_a_declared_policy_s_recipe_makes_its_own_call_files() -> None:
    recipe = Recipe(confinement=Confinement(network="none", files=("/tmp/a.out",)), places=(), cwd="/")
    found = read_recipe(write_recipe(("confined", "probe", "/p/config.yaml", False), recipe) or b"")
    assert found is not None and found[1].files is not None
    assert found[1].confinement == Confinement(network="none")  # not the call's files: new ones, made for it
    made = found[1].files()
    try:
        assert [Path(path).name.startswith("toolexec-probe-") for path in made] == [True] * 3
    finally:
        for path in made:
            os.rmdir(path) if os.path.isdir(path) else os.unlink(path)


FIELDS = {"baseline": True, "network": "none", "allowed": (), "visible": (), "writable": (), "files": (), "protected": ()}
FIELDS |= {"hidden": (), "revealed": (), "memory": None, "cpu": 31, "processes": None, "file_size": None}


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\xff\x00 not marshal",
        marshal.dumps("a string"),
        marshal.dumps((("baseline", "t", "/c"), FIELDS, ())),  # a field missing
        marshal.dumps((["baseline", "t", "/c"], FIELDS, (), "/", 0o022)),  # a key that is no tuple
        marshal.dumps((("baseline", 3, "/c"), FIELDS, (), "/", 0o022)),  # a key's part of another type
        marshal.dumps((("other", "t", "/c"), FIELDS, (), "/", 0o022)),  # a kind nobody makes
        marshal.dumps((("baseline", "t", "/c"), {**FIELDS, "baseline": False}, (), "/", 0o022)),  # a baseline key, confined
        marshal.dumps((("confined", "t", "/c", "no"), {**FIELDS, "baseline": False}, (), "/", 0o022)),  # asking must be a bool
        marshal.dumps((("baseline", "t", "/c"), {**FIELDS, "surprise": 1}, (), "/", 0o022)),  # a field Confinement lacks
        marshal.dumps((("baseline", "t", "/c"), {**FIELDS, "hidden": ("/a", 1)}, (), "/", 0o022)),  # a path that is no text
        marshal.dumps((("baseline", "t", "/c"), {**FIELDS, "cpu": [1]}, (), "/", 0o022)),  # a list
        marshal.dumps((("baseline", "t", "/c"), FIELDS, ("/a", b"/b"), "/", 0o022)),  # bytes among the places
        marshal.dumps((("baseline", "t", "/c"), FIELDS, (), None, 0o022)),  # no working directory
        marshal.dumps((("baseline", "t", "/c"), FIELDS, (), "/")),  # no umask
        marshal.dumps((("baseline", "t", "/c"), FIELDS, (), "/", "022")),  # a umask that is no number
        marshal.dumps((("baseline", "t", "/c"), FIELDS, (), "/", True)),
        marshal.dumps((("baseline", "t", "/c"), FIELDS, (), "/", -1)),
        marshal.dumps((("baseline", "t", "/c"), FIELDS, (), "/", 0o1000)),
    ],
)
def test_a_recipe_that_does_not_read_back_whole_and_well_typed_makes_no_spare(message: bytes) -> None:
    assert read_recipe(message) is None


def test_the_fields_above_are_confinement_s_own() -> None:
    """(So that each bad message above differs from a good one by the one thing it names.)"""
    assert read_recipe(marshal.dumps((("baseline", "t", "/c"), FIELDS, (), "/", 0o022))) is not None


@needs_baseline
def test_an_ordinary_users_served_calls_start_in_sandboxes_set_up_ahead_and_leave_nothing(ordinary: Ordinary) -> None:
    """``toolexec serve`` run by an ordinary user (its bwrap making a user namespace for each sandbox, no cgroup of its
    own): the third served run of a baseline Bash tool starts in the sandbox set up ahead, and after the server stops
    nothing of it is left (no process, no socket, no file in its TMPDIR)."""
    import yaml

    root = ordinary.root
    (root / "functions" / "tools" / "probe.sh").write_text(PROBE_SH)
    ordinary.config.write_text(yaml.safe_dump({"visible_tools": ["probe.sh"]}))
    ordinary.own()
    command = [*ordinary.prefix, ordinary.python, "-m", "toolexec", "serve", "--config", str(ordinary.config), "-v"]
    pipe, nothing = subprocess.PIPE, subprocess.DEVNULL
    server = subprocess.Popen(command, stdin=nothing, stdout=nothing, stderr=pipe, text=True, env=ordinary.env)
    run = ("python", "-m", "toolexec", "--config", str(ordinary.config), "run", "probe", "{}")
    try:
        assert server.stderr is not None
        banner = server.stderr.readline()
        assert banner.startswith("toolexec: serving "), banner
        runs = [ordinary.run(*run) for _ in range(2)]
        wait_until(lambda: _waiting_sandbox(server.pid) is not None, "the sandbox set up ahead")
        spare = _waiting_sandbox(server.pid)
        owner = os.stat(f"/proc/{spare}").st_uid if spare is not None else None
        runs.append(ordinary.run(*run))
    finally:
        server.terminate()
        _, said = server.communicate(timeout=60)
    assert server.returncode == 0 and "served 3 call(s)" in said, said
    assert [(done.returncode, done.stderr) for done in runs] == [(0, "")] * 3
    assert ["_spare_launcher.py" in done.stdout for done in runs] == [False, False, True]
    assert owner == ordinary.uid  # (the sandbox set up ahead is the user's)
    assert _processes_under(root) == [] and not alive(spare)
    socket_path = banner.split(" on ", 1)[1].split()[0]
    assert (os.path.lexists(socket_path), list((root / "tmp").iterdir())) == (False, [])


def _processes_under(root: Path) -> list[int]:
    """The live processes whose command line names a path under ``root`` (the server, its children, a sandbox's)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and str(root).encode() in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def test_a_waiting_child_stops_copying_its_pages_once_a_client_waits(tmp_path: Path) -> None:
    """What a waiting child asks between two steps of its page copy (toolexec.runtimes.process_linux.own_pages): no
    client yet, copy on; a client connected (not yet accepted), stop (its call would wait for the rest)."""
    from toolexec.serve import _pending

    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(1)
        listener.setblocking(False)
        before = _pending(listener)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)
            waiting = _pending(listener)
            conn, _ = listener.accept()
            conn.close()
            after = _pending(listener)
    assert (before, waiting, after) == (False, True, False)


CONFINED_UMASK = {
    "mask_py": (
        "mask_py.py",
        'import os\n\ndef run(text: str) -> str:\n    """Say the umask.\n\n    Network: none\n    """\n'
        '    mask = os.umask(0)\n    os.umask(mask)\n    return f"{text}|{mask:04o}"\n',
    ),
    "mask_sh": (
        "mask_sh.sh",
        "#!/usr/bin/env bash\n# @describe Say the umask.\n# @option --text! The text.\n# @meta network none\n"
        'main() {\n    printf "%s|%s" "$argc_text" "$(umask)" >>"$LLM_OUTPUT"\n}\n',
    ),
}


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
@pytest.mark.parametrize("tool", sorted(CONFINED_UMASK))
def test_a_sandbox_set_up_ahead_never_runs_a_call_with_another_umask_than_its_caller_s(project: Project, tool: str) -> None:
    """The waiting child sets the sandbox up with the server's umask (022), which its tool would keep: a caller whose
    umask is 077 (its files private) runs its confined tool with 077, as it does cold, never with the server's."""
    project.tool(*CONFINED_UMASK[tool])
    config = project.configure(sandbox="declared")
    mask = os.umask(0o022)
    try:
        served = Served(config)
    finally:
        os.umask(mask)

    def run(text: str) -> tuple[int, str, bytes]:
        command = [sys.executable, "-m", "toolexec", "--config", str(config), "run", tool, f'{{"text": "{text}"}}']
        done = subprocess.run(["sh", "-c", 'umask 077 && exec "$@"', "sh", *command], capture_output=True, timeout=120)
        return done.returncode, done.stdout.decode(), done.stderr

    try:
        runs = [run(text) for text in "abc"]
    finally:
        status, count, _ = served.stop()
    assert runs == [(0, "a|0077", b""), (0, "b|0077", b""), (0, "c|0077", b"")]
    assert (status, count) == (0, 3)
