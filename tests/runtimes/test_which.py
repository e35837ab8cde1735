"""The PATH search toolexec uses instead of importing shutil answers exactly as ``shutil.which`` does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from toolexec.runtimes.interpreter import which


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    made = {name: tmp_path / name for name in ("first", "second", "empty")}
    for folder in made.values():
        folder.mkdir()
    for folder, name, mode in [
        ("first", "tool", 0o755),
        ("second", "tool", 0o755),  # shadowed by first
        ("first", "plain", 0o644),  # not executable
        ("second", "plain", 0o755),  # so this one is found
        ("second", "only-here", 0o700),
    ]:
        (made[folder] / name).write_text("#!/bin/sh\n")
        (made[folder] / name).chmod(mode)
    (made["first"] / "adir").mkdir()  # a directory is never a program
    (made["second"] / "link").symlink_to(made["second"] / "only-here")
    (made["second"] / "dangling").symlink_to(made["second"] / "missing")
    return made


def test_which_finds_what_shutil_which_finds(folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, empty = (str(folders[n]) for n in ("first", "second", "empty"))
    paths = [
        os.pathsep.join([first, second]),
        os.pathsep.join([second, first]),
        os.pathsep.join(["", empty, first, first, second]),
        empty,
        "",
    ]
    programs = ["tool", "plain", "only-here", "adir", "link", "dangling", "missing", f"{second}/tool", f"{first}/plain", "./x"]
    for path in paths:
        for program in programs:
            assert which(program, path=path) == shutil.which(program, path=path), (program, path)
        monkeypatch.setenv("PATH", path)
        for program in programs:
            assert which(program) == shutil.which(program), (program, "$PATH", path)
    monkeypatch.delenv("PATH")
    assert which("sh") == shutil.which("sh") is not None  # no PATH at all: the system's default search path
