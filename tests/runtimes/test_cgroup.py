"""A memory cgroup per confined call that declares ``memory``, where this host lets toolexec make one: the limit holds
for the call's processes together (``RLIMIT_AS`` is per process), an OOM kill there is a ``memory_limit``, and no
cgroup is left behind, under bubblewrap and under the fallback (Landlock)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Project
from toolexec.runtimes import cgroup, fallback

pytestmark = pytest.mark.skipif(cgroup.memory_parent() is None, reason="no memory cgroup can be made here")

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
    parent = cgroup.memory_parent()
    assert parent is not None
    return [name for name in os.listdir(parent[0]) if name.startswith(f"toolexec-{os.getpid()}-")]


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
        assert not _ours()


def test_a_call_that_cannot_start_leaves_no_cgroup(project: Project, mechanism: str, tmp_path: Path) -> None:
    project.tool("spread.py", SPREAD)
    with project.executor(["spread.py"], runtimes={"python": str(tmp_path / "missing-python")}) as executor:
        result = executor.call("spread", {"count": 1, "each": 1})
        assert result.status != "ok"
        assert not _ours()


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
