"""A memory cgroup per confined call that declares ``memory``, where this host lets toolexec make one: the limit holds
for the call's processes together (``RLIMIT_AS`` is per process), an OOM kill there is a ``memory_limit``, and no
cgroup is left behind, under bubblewrap and under the fallback (Landlock)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import wait_until
from toolexec.runtimes import cgroup, fallback

needs_cgroup = pytest.mark.skipif(cgroup.memory_parent() is None, reason="no memory cgroup can be made here")

SPREAD = '''
import os, time

def run(count: int, each: int) -> str:
    """Touch memory in several processes at once.

    Args:
        count: how many processes
        each: bytes each one touches

    Memory: 512 MiB
    """
    children = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            block = b"\\1" * each
            time.sleep(1)
            os._exit(len(block) and 0)
        children.append(pid)
    for pid in children:
        if os.WIFSIGNALED(os.waitpid(pid, 0)[1]):
            raise SystemExit("a process of mine was killed")
    return "done"
'''


@pytest.fixture(params=["bwrap", "landlock"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    from toolexec.runtimes import sandbox

    if request.param == "landlock":
        if not fallback.abi():
            pytest.skip("no Landlock here")
        monkeypatch.setenv("TOOLEXEC_BWRAP", "/nonexistent/bwrap")
    assert sandbox.mechanism()[0] == request.param
    return str(request.param)


def _ours() -> list[str]:
    """This process's calls' cgroups still there once their removals are done (off the calls' path): memory ones, and
    pids ones (made for a tool run by root)."""
    from toolexec.runtimes.sandbox import _pids_root

    cgroup.drain()

    parent = cgroup.memory_parent()
    assert parent is not None
    places = [parent[0], *([_pids_root()] if _pids_root() else [])]
    return [name for place in places for name in os.listdir(place) if name.startswith(f"toolexec-{os.getpid()}-")]


@needs_cgroup
def test_the_memory_limit_holds_for_the_calls_processes_together(project: Project, mechanism: str) -> None:
    project.tool("spread.py", SPREAD)
    with project.executor(["spread.py"], timeout=30) as executor:
        # four processes of 200 MiB: each within its 512 MiB of address space, together past the call's 512 MiB
        result = executor.call("spread", {"count": 4, "each": 200 << 20})
        assert (result.status, result.reason) == ("error", "memory_limit"), result
        assert result.error.startswith("the tool needed more than its sandbox memory limit (536870912 bytes)")
        assert not _ours()
        fits = executor.call("spread", {"count": 2, "each": 100 << 20})
        assert (fits.status, fits.output) == ("ok", "done"), fits
    assert not _ours()  # (after close: the sandbox set up ahead of a third call has cgroups of its own)


@needs_cgroup
def test_a_launch_that_fails_leaves_nothing_behind(mechanism: str, tmp_path: Path) -> None:
    from toolexec.runtimes.process import Launch, run_process
    from toolexec.runtimes.sandbox import Confinement

    confinement = Confinement(memory=64 << 20, processes=8)
    launch = Launch(argv=["/bin/true"], env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path / "gone"), confinement=confinement)
    with pytest.raises(FileNotFoundError):  # the cgroups (and the fallback's TMPDIR) were made; the start fails
        run_process(launch)
    assert not _ours()
    assert not list(Path(os.environ["TMPDIR"]).iterdir())


@needs_cgroup
def test_a_cgroup_is_made_with_its_limit_and_removed() -> None:
    path = cgroup.make_memory(64 << 20)
    assert path is not None
    try:
        parent = cgroup.memory_parent()
        assert parent is not None
        name = "memory.max" if parent[1] == 2 else "memory.limit_in_bytes"
        assert Path(path, name).read_text().strip() == str(64 << 20)
        assert not cgroup.oom_killed(path)
    finally:
        cgroup.remove(path)
    assert not os.path.exists(path)


V2_MOUNT = "30 25 0:26 / {root} rw,nosuid shared:9 - cgroup2 cgroup2 rw\n"
V1_MOUNT = "31 25 0:27 / {root} rw,nosuid shared:10 - cgroup cgroup rw,memory\n"


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_cgroup_v2_uses_the_nearest_cgroup_that_hands_memory_down(tmp_path: Path) -> None:
    root = tmp_path / "unified"
    # toolexec runs in /user/app (processes: it cannot hand controllers down); /user does, and may be written
    _tree(root, {"user/cgroup.subtree_control": "cpu memory pids\n", "user/app/cgroup.subtree_control": ""})
    assert cgroup.look("0::/user/app\n", V2_MOUNT.format(root=root)) == (str(root / "user"), 2)
    _tree(root, {"user/app/cgroup.subtree_control": "memory\n"})  # its own, when it hands memory down
    assert cgroup.look("0::/user/app\n", V2_MOUNT.format(root=root)) == (str(root / "user" / "app"), 2)
    _tree(root, {"user/app/cgroup.subtree_control": "", "user/cgroup.subtree_control": "cpu pids\n"})
    assert cgroup.look("0::/user/app\n", V2_MOUNT.format(root=root)) is None  # memory not delegated: none


def test_cgroup_v1_uses_toolexecs_own_memory_cgroup(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _tree(root, {"jobs/mine/memory.limit_in_bytes": "9223372036854771712\n"})
    own = "4:memory:/jobs/mine\n8:pids:/\n0::/\n"
    assert cgroup.look(own, V1_MOUNT.format(root=root)) == (str(root / "jobs" / "mine"), 1)
    assert cgroup.look(own, "") is None  # no memory hierarchy mounted


def test_a_calls_cgroup_is_removed_off_its_path_and_drained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel takes a grace period to remove a cgroup (~10 ms, more under load): a call's result does not wait for
    it, an executor's close (and the process's exit) does."""
    import threading

    made = [tmp_path / f"toolexec-{os.getpid()}-{n}" for n in range(3)]
    for path in made:
        path.mkdir()
    go = threading.Event()
    real = cgroup.remove

    def slow_remove(path: str) -> None:
        go.wait(10)
        real(path)

    monkeypatch.setattr(cgroup, "remove", slow_remove)
    for path in made:
        cgroup.remove_soon(str(path))  # returns at once
    assert all(path.exists() for path in made)
    go.set()
    cgroup.drain()
    assert [path for path in made if path.exists()] == []
    assert cgroup._removals._thread is None  # no thread is left waiting for more


def test_an_executor_closes_only_once_its_calls_cgroups_are_removed(project: Project) -> None:
    from toolexec.runtimes import sandbox

    root = sandbox._pids_root()
    if root is None or os.geteuid() != 0:
        pytest.skip("a root toolexec with a writable pids cgroup makes one per call")
    project.tool("noop.sh", "# @describe Nothing.\nmain() { :; }\n")
    mine = f"toolexec-{os.getpid()}-"
    with project.executor(sandbox="declared") as executor:
        for _ in range(3):
            assert executor.call("noop", {}).status == "ok"
    assert [name for name in os.listdir(root) if name.startswith(mine)] == []


def _pids_cgroup() -> str:
    from toolexec.runtimes import sandbox

    made = sandbox._cgroup(16) if os.geteuid() == 0 else None
    if made is None:
        pytest.skip("no pids cgroup can be made here (root and a writable pids hierarchy)")
    return made


def test_a_process_moves_itself_and_everything_it_starts_is_born_in_the_cgroup() -> None:
    """The joining shell writes ``0`` to the cgroup's :func:`~toolexec.runtimes.cgroup.join_file` (cgroup v1's
    ``tasks``: a single thread moves without the grace period moving a whole process waits), then becomes the command:
    the command and its children are in the cgroup, and the cgroup counts them."""
    import subprocess

    path = _pids_cgroup()
    try:
        if os.path.isdir("/sys/fs/cgroup/pids"):
            assert cgroup.join_file(path) == os.path.join(path, "tasks")
        script = 'cat /proc/self/cgroup; sleep 0.3 & cat "$1/pids.current"; wait'
        argv = [*cgroup.join_prefix([path], strict=True), "sh", "-c", script, "sh", path]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True)
        lines = done.stdout.splitlines()
        assert any(line.endswith("/" + os.path.basename(path)) for line in lines[:-1]), done.stdout
        assert lines[-1] == "3", done.stdout  # the shell (now sh -c), cat, and the background sleep
    finally:
        cgroup.remove(path)
    assert not os.path.exists(path)


def test_a_cgroup_that_cannot_be_joined_ends_a_strict_join_before_anything_runs(tmp_path: Path) -> None:
    """Strict (a declared policy's cgroups, outside bwrap's gate): the command never starts; best effort (the
    baseline's): it runs."""
    import subprocess

    missing = str(tmp_path / "no-such-cgroup")
    strict = subprocess.run([*cgroup.join_prefix([missing], strict=True), "echo", "ran"], capture_output=True, text=True)
    assert (strict.returncode, strict.stdout) == (1, ""), strict
    assert "no-such-cgroup" in strict.stderr
    lenient = subprocess.run([*cgroup.join_prefix([missing], strict=False), "echo", "ran"], capture_output=True, text=True)
    assert (lenient.returncode, lenient.stdout, lenient.stderr) == (0, "ran\n", ""), lenient


def test_holds_tells_a_member_from_a_process_elsewhere() -> None:
    import subprocess

    path = _pids_cgroup()
    try:
        inside = subprocess.Popen([*cgroup.join_prefix([path], strict=True), "sleep", "5"])
        outside = subprocess.Popen(["sleep", "5"])
        try:
            wait_until(lambda: cgroup.holds(path, inside.pid), "the shell to join its cgroup", timeout=5)
            assert not cgroup.holds(path, outside.pid)
        finally:
            for proc in (inside, outside):
                proc.kill()
                proc.wait()
    finally:
        cgroup.remove(path)
