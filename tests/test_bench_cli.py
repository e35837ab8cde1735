"""The benchmark suite's command line: a run that measures nothing never rewrites ``benchmarks/RESULTS.md``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SENTINEL = "# Benchmark results\n\n- a sentinel: the figures of a run at rest\n"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A copy of benchmarks/ whose RESULTS.md is a sentinel (the repository's own is never written by a test)."""
    copy = tmp_path / "benchmarks"
    shutil.copytree(REPO / "benchmarks", copy, ignore=shutil.ignore_patterns("__pycache__", "RESULTS.md"))
    (copy / "RESULTS.md").write_text(SENTINEL)
    return copy


def _run(suite: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "TOOLEXEC_BENCH_INSTALLED": "1", "HOME": str(suite.parent)}
    return subprocess.run(
        [sys.executable, str(suite / "run.py"), *argv], capture_output=True, text=True, env=env, cwd=suite.parent, timeout=120
    )


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_the_sections_and_measures_nothing(suite: Path, flag: str) -> None:
    done = _run(suite, flag)
    assert (done.returncode, done.stderr) == (0, "")
    usage, names = done.stdout.splitlines()
    assert usage == "usage: python benchmarks/run.py [SECTION...]"
    assert names.split()[:2] == ["sections:", "per_call"]
    assert {"warm", "mcp_load", "early", "breakdown"} <= set(names.split()[1:])
    assert (suite / "RESULTS.md").read_text() == SENTINEL


def test_an_unknown_section_is_refused_and_measures_nothing(suite: Path) -> None:
    done = _run(suite, "warm", "wram")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[0] == "benchmarks/run.py: no section wram"
    assert (suite / "RESULTS.md").read_text() == SENTINEL
