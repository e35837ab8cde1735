"""A hostile tool against the one-shot run's early start (toolexec.early): what the spare's program sees before the
process helper decides whether it is the call's.

The spare starts before toolexec has read its config, so before it knows which of its environment's variables no
tool may receive (``secret_env``): the tool's program (its shebang's interpreter, an interpreter's start-up code such
as a venv's ``.pth``) runs from that moment, whether the spare is adopted or ended.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import Project, toolexec
from tests.executor.test_early import BEHAVE_PY, BEHAVE_SH, _memos, _needs, _no_leftovers
from toolexec.runtimes import process_linux

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="the early spare needs pidfd and /proc (Linux)")

SECRET = "EARLY_TOP_SECRET"


def _spy(directory: Path, name: str, program: str, proof: Path) -> Path:
    """An interpreter that writes down the environment it started with, then runs ``program``: the tool author's
    code that runs at its program's start, before any line of the tool."""
    spy = directory / name  # (named for what it runs: toolexec reads a shebang's interpreter by its name)
    spy.write_text(f'#!/bin/sh\nenv >>{proof}\necho --- >>{proof}\nexec {program} "$@"\n')
    spy.chmod(0o755)
    return spy


@pytest.mark.parametrize("sandbox", ["off", "declared"])
@pytest.mark.parametrize("language", ["python", "bash"])
def test_the_early_spare_never_starts_with_a_secret_the_call_is_kept_from(
    project: Project, private_tmpdir: Path, tmp_path: Path, language: str, sandbox: str
) -> None:
    """The first run (no secret in the command's environment) remembers its start; the second has the secret
    (``secret_env``): its spare must not be started with it (the cold call never sees it), nor may the call."""
    _needs(sandbox)
    proof = tmp_path / "proof"
    if language == "python":
        spy = _spy(tmp_path, "python-spy", sys.executable, proof)
        project.tool("behave.py", BEHAVE_PY)
        config = str(project.configure(sandbox=sandbox, secret_env=[SECRET], runtimes={"python": str(spy)}))
    else:
        spy = _spy(tmp_path, "bash-spy", "/bin/bash", proof)
        project.tool("behave.sh", BEHAVE_SH.replace("#!/usr/bin/env bash", f"#!{spy}"))
        config = str(project.configure(sandbox=sandbox, secret_env=[SECRET]))
    env = {"EARLY_PROOF": str(tmp_path / "early"), "BIG": str(tmp_path / "big")}
    argv = ("--config", config, "run", "behave", json.dumps({"behave": "returns"}))
    first = toolexec(*argv, env=env)
    done = "done" if language == "python" else "done\n"  # (what each language's output file holds)
    assert (first.returncode, first.stdout) == (0, done), first.stderr
    assert len(_memos(project)) == 1
    second = toolexec(*argv, env={**env, SECRET: "hunter2"})
    assert (second.returncode, second.stdout) == (0, done), second.stderr
    starts = [block for block in proof.read_text().split("---\n") if block]
    assert len(starts) >= 2
    assert [line for line in proof.read_text().splitlines() if "hunter2" in line] == []
    _no_leftovers(project, private_tmpdir)
