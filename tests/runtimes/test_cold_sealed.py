"""A cold call under the baseline is sealed once its PID namespace is seen gone (its init ended: the kernel ended and
reaped everything else of the namespace first), so a surface that keeps them (``toolexec mcp``: ``Calls(keep_files=True)``)
uses its private files again for the tool's next call (executor/callfiles.py), as it does a sealed warm call's. Hostile tools leave writers behind that try to
reach the next call's files; real bwrap, real bash.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")

# ``mode``: "plain" (say its LLM_OUTPUT), "leave" (also leave writers to it behind: one in a session of its own, one
# with a cleared environment too, each writing L to the file as fast as it can), "artifact" (also leave an artifact).
LEAVER = """#!/usr/bin/env bash
# @describe Say where the output goes, and maybe leave something behind.
# @option --mode! what to leave
main() {
    printf '%s\\n' "$LLM_OUTPUT" >>"$LLM_OUTPUT"
    case $argc_mode in
    leave)
        setsid bash -c 'while :; do printf L >>"$0"; done' "$LLM_OUTPUT" </dev/null >/dev/null 2>&1 &
        setsid env -i /bin/sh -c 'while :; do printf L >>"$0"; done' "$LLM_OUTPUT" </dev/null >/dev/null 2>&1 &
        ;;
    artifact) echo kept >"$LLM_ARTIFACTS_DIR/left.txt" ;;
    esac
}
"""


@pytest.fixture
def leaver(project: Project) -> Project:
    project.tool("leaver.sh", LEAVER)
    return project


def _keeping(executor: Any) -> Any:
    """``executor`` as ``toolexec mcp`` keeps its calls: a sealed cold call's files serve its tool's next call."""
    executor.calls.keep_files = True
    return executor


def _output_path(result: object) -> str:
    output = getattr(result, "output", "")
    return output.split("\n", 1)[0]


def test_a_cold_calls_files_serve_the_next_call_only_once_nothing_of_it_is_left(leaver: Project) -> None:
    with _keeping(leaver.executor(["leaver.sh"], sandbox="declared")) as executor:
        first = executor.call("leaver", {"mode": "plain"})
        executor.calls.settle()
        left = executor.call("leaver", {"mode": "leave"})
        executor.calls.settle()
        after = []
        for _ in range(3):
            after.append(executor.call("leaver", {"mode": "plain"}))
            executor.calls.settle()  # (a set is kept off the call's path: a call that comes first gets another)
    path = _output_path(first)
    assert first.ok and path.startswith("/") and first.output == path + "\n", first.error
    # the same set each time (the pool is used: else this test would prove nothing), and the writers left behind by
    # the second call, ended with its namespace before its status, reach none of the calls after it
    assert left.ok and _output_path(left) == path, left.error
    assert [(r.ok, r.output) for r in after] == [(True, path + "\n")] * 3
    assert not os.path.exists(path)  # the executor's close removes the kept sets


def test_a_set_left_otherwise_than_made_is_not_used_again(leaver: Project) -> None:
    with _keeping(leaver.executor(["leaver.sh"], sandbox="declared")) as executor:
        first = executor.call("leaver", {"mode": "artifact"})
        executor.calls.settle()
        second = executor.call("leaver", {"mode": "plain"})
    assert first.ok and second.ok, (first.error, second.error)
    assert [a.name for a in first.artifacts] == ["left.txt"]
    assert _output_path(second) != _output_path(first)
    assert second.output == _output_path(second) + "\n"


def test_an_init_not_seen_ended_leaves_the_set_unused_and_the_call_searched(
    leaver: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []

    def unsure(pid: int, start: int, timeout: float = 0.0) -> bool:
        asked.append(pid)
        return False

    monkeypatch.setattr(process_linux, "namespace_ended", unsure)
    with _keeping(leaver.executor(["leaver.sh"], sandbox="declared")) as executor:
        paths = []
        for _ in range(2):
            result = executor.call("leaver", {"mode": "plain"})
            executor.calls.settle()
            assert result.ok and result.output == _output_path(result) + "\n", result.error
            paths.append(_output_path(result))
    assert len(asked) == 2 and paths[0] != paths[1]


@pytest.mark.parametrize(("sandbox", "keep"), [("off", True), ("declared", False)])
def test_sandbox_off_and_the_python_api_make_each_cold_call_a_set_of_its_own(
    leaver: Project, private_tmpdir: Path, sandbox: str, keep: bool
) -> None:
    with leaver.executor(["leaver.sh"], sandbox=sandbox) as executor:
        executor.calls.keep_files = keep
        paths = []
        for _ in range(2):
            result = executor.call("leaver", {"mode": "plain"})
            executor.calls.settle()
            paths.append(_output_path(result))
            assert list(private_tmpdir.iterdir()) == []  # nothing of it left, and nothing kept
    assert paths[0] != paths[1]


def test_namespace_ended_says_true_only_once_the_process_has_ended(tmp_path: Path) -> None:
    child = subprocess.Popen(["sleep", "1000"])
    try:
        start = process_linux.start_of(child.pid)
        assert start is not None
        assert process_linux.namespace_ended(child.pid, start, timeout=0.0) is False  # alive
        assert process_linux.namespace_ended(child.pid, start + 1, timeout=0.0) is True  # its number is another's
    finally:
        child.kill()
    deadline = time.monotonic() + 10
    while process_linux.namespace_ended(child.pid, start, timeout=0.1) is False:  # a zombie now: it has ended
        assert time.monotonic() < deadline
    child.wait()
    assert process_linux.namespace_ended(child.pid, start, timeout=0.0) is True  # reaped: no process has the number
