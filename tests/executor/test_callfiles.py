"""A call's private files (LLM_OUTPUT, the failure channel, LLM_ARTIFACTS_DIR, the request file): made as
``tempfile.mkstemp`` makes them, where it would, without importing ``tempfile`` (and ``random``) on the call's path;
and a :class:`FilePool`'s, kept between sealed calls only while exactly as made."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import in_forked_child
from toolexec.callfiles import FilePool, call_files


@contextlib.contextmanager
def _call_files(tool: str, asking: bool = False) -> Iterator[tuple[str, str, str, str | None]]:
    with call_files(tool, asking) as files:
        yield files.output, files.failure, files.artifacts, files.request


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


def _sealed_call(pool: FilePool, tool: str = "echo", write: bytes = b"ok", asking: bool = False) -> tuple[str, ...]:
    """One call's use of a pooled set: the tool writes its output and failure report; the call ran sealed."""
    with call_files(tool, asking, pool) as files:
        Path(files.output).write_bytes(write)
        Path(files.failure).write_bytes(b'{"type": "X"}')
        if files.request is not None:
            Path(files.request).write_bytes(b"{}")
        files.sealed = True
        paths = files.paths
    assert pool.settle()  # given back off the call's path: kept (or removed) once settled
    return paths


def _pool_directory(private_tmpdir: Path) -> Path:
    (directory,) = private_tmpdir.iterdir()
    assert directory.name.startswith("toolexec-calls-") and stat.S_IMODE(directory.stat().st_mode) == 0o700
    return directory


def test_a_sealed_calls_files_are_kept_emptied_for_the_next_call_of_the_tool(private_tmpdir: Path) -> None:
    pool = FilePool()
    first = _sealed_call(pool)
    directory = _pool_directory(private_tmpdir)
    assert [Path(p).parent for p in first] == [directory] * 3
    with call_files("echo", pool=pool) as files:  # the same set, empty, as made
        assert files.paths == first
        made = [Path(p) for p in files.paths]
        assert [(p.stat().st_size, stat.S_IMODE(p.stat().st_mode)) for p in made[:2]] == [(0, 0o600), (0, 0o600)]
        assert (os.listdir(files.artifacts), stat.S_IMODE(made[2].stat().st_mode)) == ([], 0o700)
        assert files.artifacts_empty() and os.path.isdir(files.artifacts)  # looked at, not removed
        files.sealed = True
    asked = _sealed_call(pool, asking=True)  # a call that can ask has a set of its own, with its request file
    assert len(asked) == 4 and asked[:3] != first
    assert _sealed_call(pool, asking=True) == asked and Path(asked[3]).stat().st_size == 0
    assert _sealed_call(pool, "other")[0] != first[0]  # another tool's set is never this one
    pool.close()
    assert os.listdir(private_tmpdir) == []
    pool.close()  # twice: harmless


def _replace_output(files: Any) -> None:  # another file, 0600 and empty as made (made first: its inode differs)
    other = os.path.join(files.artifacts, "..", "other")
    os.close(os.open(other, os.O_CREAT | os.O_WRONLY, 0o600))
    os.replace(other, files.output)


def _link_output(files: Any) -> None:
    os.link(files.output, os.path.join(files.artifacts, "..", "kept-link"))


def _leave_artifact(files: Any) -> None:
    Path(files.artifacts, "report.txt").write_text("left")


def _chmod_failure(files: Any) -> None:
    os.chmod(files.failure, 0o644)


def _fifo_output(files: Any) -> None:
    os.unlink(files.output)
    os.mkfifo(files.output, 0o600)


def _link_in_place(files: Any) -> None:
    os.unlink(files.failure)
    os.symlink(files.output, files.failure)


def _directory_swapped(files: Any) -> None:
    other = os.path.join(files.artifacts, "..", "other")
    os.mkdir(other, 0o700)
    os.replace(other, files.artifacts)


@pytest.mark.parametrize(
    "tamper",
    [_replace_output, _link_output, _leave_artifact, _chmod_failure, _fifo_output, _link_in_place, _directory_swapped],
)
def test_a_set_not_exactly_as_made_is_removed_not_kept(private_tmpdir: Path, tamper: Any) -> None:
    pool = FilePool()
    first = _sealed_call(pool)
    directory = _pool_directory(private_tmpdir)
    with call_files("echo", pool=pool) as files:
        assert files.paths == first
        tamper(files)
        files.sealed = True
    assert pool.settle()
    names = {os.path.basename(p) for p in first}
    left = sorted(name for name in os.listdir(directory) if not name.startswith("toolexec-echo-"))
    assert left == (["kept-link"] if tamper is _link_output else [])  # what the tool made outside its set stays
    assert not names & set(os.listdir(directory))  # none of the tampered set's names is left
    with call_files("echo", pool=pool) as files:
        assert not set(files.paths) & set(first)  # a new set (made ahead, in the removed one's place)
        assert sorted(n for n in os.listdir(directory) if n.startswith("toolexec-echo-")) == sorted(
            os.path.basename(p) for p in files.paths
        )
    pool.close()
    assert os.listdir(private_tmpdir) == []


def test_a_call_not_sealed_gives_back_nothing_and_a_fresh_set_is_made_for_the_next(private_tmpdir: Path) -> None:
    pool = FilePool()
    with call_files("echo", pool=pool) as files:  # sealed is False: a process of the call may hold them
        first = files.paths
        Path(files.output).write_text("the call's output")
    assert pool.settle()
    directory = _pool_directory(private_tmpdir)
    ahead = sorted(os.listdir(directory))  # the call's set removed; a new one, made off the next call's path
    assert len(ahead) == 3 and not {os.path.join(directory, name) for name in ahead} & set(first)
    with call_files("echo", pool=pool) as files:
        assert not set(files.paths) & set(first)
        assert sorted(os.path.basename(p) for p in files.paths) == ahead  # the one made ahead, empty as made
        made = [Path(p) for p in files.paths]
        assert [(p.stat().st_size, stat.S_IMODE(p.stat().st_mode)) for p in made[:2]] == [(0, 0o600), (0, 0o600)]
        assert (os.listdir(files.artifacts), stat.S_IMODE(made[2].stat().st_mode)) == ([], 0o700)
    pool.close()
    assert os.listdir(private_tmpdir) == []


def test_sets_are_given_back_off_the_calls_path(private_tmpdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from toolexec import callfiles

    pool = FilePool()
    first = _sealed_call(pool)
    assert pool.settle()
    go = threading.Event()
    real = callfiles.CallFiles.reset

    def slow_reset(files: Any) -> bool:
        go.wait(10)
        return real(files)

    monkeypatch.setattr(callfiles.CallFiles, "reset", slow_reset)
    with call_files("echo", pool=pool) as files:
        assert files.paths == first
        Path(files.output).write_text("out")
        files.sealed = True
    assert Path(first[0]).read_text() == "out"  # the call returned before its set was emptied
    with call_files("echo", pool=pool) as files:  # meanwhile the next call gets a set of its own
        second = files.paths
        assert not set(second) & set(first)
        files.sealed = True
    go.set()
    assert pool.settle()
    with call_files("echo", pool=pool) as one, call_files("echo", pool=pool) as other:  # both kept, emptied
        assert {one.paths, other.paths} == {first, second}
        assert [Path(p).stat().st_size for p in (one.output, other.output)] == [0, 0]
    pool.close()
    assert os.listdir(private_tmpdir) == []


def test_a_pool_closed_while_a_call_holds_a_set_keeps_it_until_that_call_ends(private_tmpdir: Path) -> None:
    pool = FilePool()
    _sealed_call(pool)
    with call_files("echo", pool=pool) as files:
        pool.close()
        assert Path(files.output).exists()  # the running call's files stay
        directory = _pool_directory(private_tmpdir)
        assert sorted(os.listdir(directory)) == sorted(os.path.basename(p) for p in files.paths)
        files.sealed = True  # not kept: the pool is closed
    assert os.listdir(private_tmpdir) == []
    with call_files("echo", pool=pool) as files:  # a closed pool makes fresh sets, removed after the call
        assert Path(files.output).parent == private_tmpdir
    assert os.listdir(private_tmpdir) == []


def test_a_pool_keeps_a_bounded_number_of_sets_per_tool(private_tmpdir: Path) -> None:
    pool = FilePool(kept_per_tool=2)
    with contextlib.ExitStack() as stack:
        held = [stack.enter_context(call_files("echo", pool=pool)) for _ in range(3)]
        for files in held:
            files.sealed = True
    assert pool.settle()
    assert len(os.listdir(_pool_directory(private_tmpdir))) == 2 * 3
    pool.close()
    assert os.listdir(private_tmpdir) == []


def test_a_process_forked_from_a_pool_never_takes_its_parents_sets(private_tmpdir: Path) -> None:
    pool = FilePool()
    kept = _sealed_call(pool)

    def child() -> tuple[set[str], bool]:  # a set of its own, made fresh and removed; closing its copy removes nothing
        with call_files("echo", pool=pool) as files:
            files.sealed = True
            mine = files.paths
        pool.close()
        return set(mine) & set(kept), Path(mine[0]).parent == private_tmpdir

    said = in_forked_child(child)
    assert said == repr((set(), True))
    with call_files("echo", pool=pool) as files:  # the parent's set is still there, and its own
        assert files.paths == kept
    pool.close()
    assert os.listdir(private_tmpdir) == []
