"""A root toolexec's pids cgroups are kept between calls (runtimes/cgroup.py, ``take_pids``/``give_back``): a call's
cgroup serves a later call only when nothing is in it or counted by it, checked at the take; its ``pids.max`` is the
new call's. Hostile: a process left in a kept cgroup (moved there from outside, as only root could) is neither seen
nor counted by the next call, which gets another cgroup. Real cgroups, real bwrap."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Project
from toolexec.runtimes import baseline, cgroup, sandbox

ROOT = sandbox._pids_root() if os.geteuid() == 0 else None
pytestmark = pytest.mark.skipif(ROOT is None, reason="a root toolexec with a writable pids cgroup hierarchy")


@pytest.fixture(autouse=True)
def pids_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Root's baseline caps a call with a pids cgroup (as on a kernel older than 6.14, which keeps no pid_max per PID
    namespace): these tests are that path's, in this process and in the toolexec it starts."""
    monkeypatch.setenv("TOOLEXEC_PIDS_CGROUP", "1")


# Says the pids cgroup it runs in, that cgroup's pids.max and pids.current, and the processes there it can see.
COUNTER = """#!/usr/bin/env bash
# @describe Say my pids cgroup.
main() {
    local mine
    mine=$(awk -F: '$2 == "pids" || ($1 == "0" && $2 == "") { print $3; exit }' /proc/self/cgroup)
    printf '%s %s %s\\n' "$mine" "$(cat "/sys/fs/cgroup/pids$mine/pids.max")" "$(cat "/sys/fs/cgroup/pids$mine/pids.current")" >>"$LLM_OUTPUT"
}
"""


@pytest.fixture
def pool() -> object:
    cgroup.drain()  # none kept from an earlier test
    yield
    cgroup.drain()


def _move(pid: int, path: str) -> None:
    with open(cgroup.join_file(path), "w") as handle:
        handle.write(str(pid))


def test_a_given_back_cgroup_serves_the_next_take_with_its_own_limit(pool: object) -> None:
    assert ROOT is not None
    first = cgroup.take_pids(ROOT, 7)
    cgroup.give_back(first)
    second = cgroup.take_pids(ROOT, 9)
    try:
        assert second == first
        assert Path(second, "pids.max").read_text().strip() == "9"
        assert Path(second, "pids.current").read_text().strip() == "0"
    finally:
        cgroup.give_back(second)


def test_a_cgroup_given_back_with_a_process_in_it_is_not_kept(pool: object) -> None:
    assert ROOT is not None
    path = cgroup.take_pids(ROOT, 5)
    sleeper = subprocess.Popen(["sleep", "1000"])
    try:
        _move(sleeper.pid, path)
        cgroup.give_back(path)
        other = cgroup.take_pids(ROOT, 5)
        assert other != path
        assert Path(other, "pids.current").read_text().strip() == "0"
        cgroup.give_back(other)
    finally:
        sleeper.kill()
        sleeper.wait()
    cgroup.drain()
    assert not os.path.exists(path)  # removed once its process was gone


def test_a_process_moved_into_a_kept_cgroup_is_not_the_next_calls(pool: object) -> None:
    """Emptiness is checked at the take, not trusted from the give back."""
    assert ROOT is not None
    path = cgroup.take_pids(ROOT, 5)
    cgroup.give_back(path)  # kept: empty now
    sleeper = subprocess.Popen(["sleep", "1000"])
    try:
        _move(sleeper.pid, path)  # something moves in while it is kept
        taken = cgroup.take_pids(ROOT, 5)
        assert taken != path
        assert Path(taken, "pids.current").read_text().strip() == "0"
        assert Path(taken, "cgroup.procs").read_text() == ""
        cgroup.give_back(taken)
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
def test_calls_share_a_kept_cgroup_only_when_nothing_of_another_is_in_it(project: Project, pool: object) -> None:
    project.tool("counter.sh", COUNTER)
    with project.executor(["counter.sh"], sandbox="declared") as executor:
        first = executor.call("counter", {}).output.split()
        second = executor.call("counter", {}).output.split()
        assert first[0] == second[0], (first, second)  # the first call's cgroup, kept, served the second
        assert first[1:] == second[1:] == [str(baseline.PROCESSES), second[2]]
        assert int(second[2]) < 10  # what the call itself runs (bash, its command substitutions), nothing more
        sleeper = subprocess.Popen(["sleep", "1000"])
        try:
            _move(sleeper.pid, f"{ROOT}{second[0]}")  # a process left behind in it
            third = executor.call("counter", {}).output.split()
        finally:
            sleeper.kill()
            sleeper.wait()
    assert third[0] != second[0]
    assert int(third[2]) < 10
    mine = f"toolexec-{os.getpid()}-"
    assert [name for name in os.listdir(ROOT) if name.startswith(mine)] == []  # the close removes every kept one
