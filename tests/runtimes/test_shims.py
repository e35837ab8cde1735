"""A version manager's shim (pyenv, asdf) is asked once which interpreter it picks; calls start that interpreter
with the PATH the shim would give it, and ask again when anything that decides the pick changes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from toolexec.runtimes import shims

TOOL = '''import os, sys


def run() -> str:
    """Say which interpreter runs it."""
    return sys.executable + "|" + os.environ["PATH"].split(os.pathsep)[0]
'''


class Manager:
    """A pyenv-like manager: ``ROOT/shims/python3`` picks ``ROOT/versions/<v>/bin/python3`` from ``$PYENV_VERSION``,
    else ``.python-version`` in the working directory, else ``ROOT/version``; puts that ``bin`` first on PATH, and
    counts its starts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        real = os.path.realpath(sys.executable)
        for version in ("a", "b"):
            folder = root / "versions" / version / "bin"
            folder.mkdir(parents=True)
            (folder / "python3").symlink_to(real)  # a distinct path: sys.executable tells them apart
        (root / "version").write_text("a\n")
        (root / "shims").mkdir()
        self.shim = root / "shims" / "python3"
        self.shim.write_text(
            "#!/bin/sh\n"
            f'echo start >>"{root}/starts"\n'
            f'version=${{PYENV_VERSION:-$(cat .python-version 2>/dev/null || cat "{root}/version")}}\n'
            f'bin="{root}/versions/$version/bin"\n'
            'PATH="$bin:$PATH" exec "$bin/python3" "$@"\n'
        )
        self.shim.chmod(0o755)

    def starts(self) -> int:
        path = self.root / "starts"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def version(self, name: str) -> str:
        folder = self.root / "versions" / name / "bin"
        return f"{folder / 'python3'}|{folder}"


@pytest.fixture
def manager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Manager:
    found = Manager(tmp_path / "pyenv")
    monkeypatch.setenv("PATH", f"{found.root / 'shims'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYENV_VERSION", raising=False)
    monkeypatch.setattr(shims, "_known", {})
    return found


def test_the_shim_is_asked_once_and_its_pick_runs_with_its_path(project: Project, manager: Manager) -> None:
    project.tool("which.py", TOOL)
    with project.executor() as executor:
        outputs = [executor.call("which", {}).output for _ in range(3)]
    assert outputs == [manager.version("a")] * 3
    assert manager.starts() == 1  # the question; no call started the shim


def test_what_decides_the_pick_is_watched(project: Project, manager: Manager, monkeypatch: pytest.MonkeyPatch) -> None:
    project.tool("which.py", TOOL)
    with project.executor() as executor:
        assert executor.call("which", {}).output == manager.version("a")
        Path(".python-version").write_text("b\n")  # pyenv local b, in the working directory
        assert executor.call("which", {}).output == manager.version("b")
        Path(".python-version").unlink()
        (manager.root / "version").write_text("b\n")  # pyenv global b
        assert executor.call("which", {}).output == manager.version("b")
        monkeypatch.setenv("PYENV_VERSION", "a")
        assert executor.call("which", {}).output == manager.version("a")
    assert manager.starts() == 4


def test_another_process_reuses_the_answer_kept_on_disk(project: Project, manager: Manager) -> None:
    project.tool("which.py", TOOL)
    with project.executor() as executor:
        assert executor.call("which", {}).output == manager.version("a")
    shims._known.clear()  # as a new process starts
    with project.executor() as executor:
        assert executor.call("which", {}).output == manager.version("a")
    assert manager.starts() == 1


def test_a_shim_that_cannot_say_is_started_itself(project: Project, manager: Manager) -> None:
    project.tool("which.py", TOOL)
    refusing = manager.shim.read_text().replace('PATH="$bin', 'case "$1" in -c) exit 3;; esac\nPATH="$bin')
    manager.shim.write_text(refusing)  # it answers no question, and runs tools
    with project.executor() as executor:
        outputs = [executor.call("which", {}).output for _ in range(2)]
    assert outputs == [manager.version("a")] * 2
    assert manager.starts() == 3  # the failed question, then each call through the shim (asked once per process)


def test_an_answer_naming_an_uninstalled_interpreter_falls_back_to_the_shim(project: Project, manager: Manager) -> None:
    project.tool("which.py", TOOL)
    with project.executor() as executor:
        assert executor.call("which", {}).output == manager.version("a")
        pick = manager.root / "versions" / "a" / "bin" / "python3"
        pick.rename(pick.with_name("gone"))
        result = executor.call("which", {})
    assert result.status == "error" and manager.starts() == 2  # the shim ran, and says what is missing


def test_only_a_script_in_a_shims_folder_is_a_shim(tmp_path: Path) -> None:
    folder = tmp_path / "shims"
    folder.mkdir()
    (folder / "script").write_text("#!/bin/sh\n")
    (folder / "binary").write_bytes(b"\x7fELF")
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert [shims.is_shim(str(p)) for p in (folder / "script", folder / "binary", tmp_path / "script")] == [True, False, False]
    assert not shims.is_shim(str(folder / "missing"))


def test_a_shim_file_is_read_once_while_it_is_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a program is a shim is decided by its first bytes, read once per file: a call stats it, and reads it
    again only once it is another file (replaced, rewritten)."""
    folder = tmp_path / "shims"
    folder.mkdir()
    shim = folder / "python3"
    shim.write_text("#!/bin/sh\nexec true\n")
    opened: list[str] = []
    real_open = open

    def counting_open(file: object, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        opened.append(str(file))
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(shims, "open", counting_open, raising=False)
    assert [shims.is_shim(str(shim)) for _ in range(3)] == [True, True, True]
    assert opened == [str(shim)]
    replaced = folder / "python3.new"
    replaced.write_bytes(b"\x7fELF not a script")
    replaced.replace(shim)
    assert [shims.is_shim(str(shim)) for _ in range(2)] == [False, False]
    shim.write_text("#!/bin/sh\nexec true\n")  # rewritten in place: the same inode, another size and time
    assert shims.is_shim(str(shim)) is True
    assert opened == [str(shim)] * 3
