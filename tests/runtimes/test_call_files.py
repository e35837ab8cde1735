"""A call's private files (LLM_OUTPUT and the failure channel): made as ``tempfile.mkstemp`` makes them, where it
would, without importing ``tempfile`` (and ``random``) on the call's path."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from toolexec.engine import _call_files


def test_the_files_are_new_private_and_removed_afterwards(private_tmpdir: Path) -> None:
    with _call_files("echo") as (output, failure, artifacts, request):
        made = [Path(output), Path(failure), Path(artifacts)]
        assert request is None  # a call that cannot ask has no request file
        assert [(p.parent, p.name.startswith("toolexec-echo-"), p.suffix) for p in made] == [
            (private_tmpdir, True, ".out"),
            (private_tmpdir, True, ".failure"),
            (private_tmpdir, True, ".artifacts"),
        ]
        modes = [(stat.S_ISDIR(p.stat().st_mode), stat.S_IMODE(p.stat().st_mode)) for p in made]
        assert modes == [(False, 0o600), (False, 0o600), (True, 0o700)]
        assert (Path(output).stat().st_size, Path(failure).stat().st_size, os.listdir(artifacts)) == (0, 0, [])
        (Path(artifacts) / "left.txt").write_text("a file the tool left")
    assert os.listdir(private_tmpdir) == []
    with _call_files("echo", asking=True) as (_, _, _, request):  # LLM_INPUT_REQUEST: made and removed the same way
        assert request is not None
        asked = Path(request)
        assert (asked.parent, asked.suffix, stat.S_IMODE(asked.stat().st_mode), asked.stat().st_size) == (
            private_tmpdir,
            ".ask",
            0o600,
            0,
        )
    assert os.listdir(private_tmpdir) == []


def test_whatever_a_tool_makes_of_its_files_they_are_removed_and_no_link_is_followed(
    private_tmpdir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("kept")
    with _call_files("echo") as (output, failure, artifacts, _):
        os.unlink(output)
        os.mkdir(output)  # a directory in the file's place
        (Path(output) / "x").write_text("x")
        os.unlink(failure)
        os.symlink(target, failure)  # a link in the file's place
        os.rmdir(artifacts)
        os.symlink(target, artifacts)  # a link in the directory's place
    assert os.listdir(private_tmpdir) == []
    assert (target / "keep.txt").read_text() == "kept"


def test_an_unusable_tmpdir_is_passed_over_as_tempfile_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    monkeypatch.setenv("TEMP", str(tmp_path / "also-missing"))
    monkeypatch.setenv("TMP", str(tmp_path))
    with _call_files("echo") as (output, _, _, _):
        assert os.path.dirname(output) == tempfile.gettempdir() == str(tmp_path)
    assert os.listdir(tmp_path) == []


def test_a_directory_a_program_set_in_tempfile_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", "/nonexistent")
    with _call_files("echo") as (output, _, _, _):
        assert os.path.dirname(output) == str(tmp_path)


def test_the_engine_imports_no_tempfile_or_random(tmp_path: Path) -> None:
    program = "import sys\nimport toolexec.engine\nprint(sorted(m for m in ('tempfile', 'random') if m in sys.modules))\n"
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "[]\n", "")
