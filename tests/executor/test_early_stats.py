"""A ``list`` or ``build`` takes its no-change stats in a child forked at its start (toolexec.early_stats): what it
compares is always the stats of the files its own config names, whatever the memo says.

The real command as a user runs it (``python -m toolexec``, the installed entry point), then the module's parts in
this process, where the child's pid can be watched.
"""

from __future__ import annotations

import os
import select
import signal
import stat
from pathlib import Path

import pytest

from tests.conftest import Project, toolexec
from toolexec import early_stats
from toolexec.filestats import stat_bytes

TOOL = """#!/usr/bin/env bash
# @describe Say {word}.
# @option --text The text.
main() {{ echo {word} >> "$LLM_OUTPUT"; }}
"""


def memo_folder() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "toolexec" / "fresh"


def memo_of(project: Project) -> tuple[Path, bytes]:
    """The one memo the commands run so far wrote, and what it should say of ``project``."""
    (memo,) = memo_folder().iterdir()
    names = b"\0".join(sorted(p.name.encode() for p in project.tools.iterdir()))
    return memo, str(project.tools).encode() + b"\0\0" + names


def edit_in_place(path: Path, old: str, new: str) -> None:
    """Write over ``path`` where it is, the same size: only the file's own stat changes (no directory's)."""
    assert len(old) == len(new)
    with open(path, "r+") as handle:
        text = handle.read()
        handle.seek(0)
        handle.write(text.replace(old, new))


def listed(project: Project) -> list[str]:
    done = toolexec("--config", str(project.config), "list", "--all")
    assert done.returncode == 0, done.stderr
    return [" ".join(line.split()) for line in done.stdout.splitlines()]


@pytest.fixture
def three(project: Project) -> Project:
    for word in ("one", "two", "six"):
        project.tool(f"{word}.sh", TOOL.format(word=word))
    project.configure()
    assert toolexec("--config", str(project.config), "build").returncode == 0
    return project


def test_a_list_remembers_its_files_and_still_sees_a_file_edited_in_place(three: Project) -> None:
    first = listed(three)
    memo, expected = memo_of(three)
    assert memo.read_bytes() == expected
    assert memo.stat().st_mode & 0o777 == 0o600 and memo_folder().stat().st_mode & 0o777 == 0o700
    edit_in_place(three.tools / "two.sh", "Say two.", "Say TWO.")
    assert listed(three) == [line.replace("Say two.", "Say TWO.") for line in first]
    done = toolexec("--config", str(three.config), "build")
    assert (done.returncode, done.stdout) == (
        0,
        f"built 3 tool(s), 0 failed (0 compiled); wrote {three.root}/functions/functions.json\n",
    )
    edit_in_place(three.tools / "six.sh", "Say six.", "Say SIX.")
    done = toolexec("--config", str(three.config), "build")
    assert (done.returncode, done.stdout) == (
        0,
        f"built 3 tool(s), 0 failed (1 compiled); wrote {three.root}/functions/functions.json\n",
    )


@pytest.mark.parametrize("forged", ["fewer names", "another folder", "garbage"])
def test_a_forged_memo_changes_nothing_but_is_written_over(three: Project, tmp_path: Path, forged: str) -> None:
    listed(three)
    memo, expected = memo_of(three)
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    for name in ("one.sh", "two.sh", "six.sh"):  # the same names, never edited: their stats would say "no change"
        (decoy / name).write_bytes((three.tools / name).read_bytes())
    memo.write_bytes(
        {
            "fewer names": str(three.tools).encode() + b"\0\0one.sh",
            "another folder": expected.replace(str(three.tools).encode(), str(decoy).encode(), 1),
            "garbage": b"\0\0\0\xff" * 100,
        }[forged]
    )
    edit_in_place(three.tools / "two.sh", "Say two.", "Say TWO.")
    assert "two bash Say TWO. (unconfined: declares no sandbox policy)" in listed(three)
    assert memo.read_bytes() == expected


def test_a_memo_others_could_write_is_never_read(three: Project) -> None:
    listed(three)
    memo, _ = memo_of(three)
    memo.chmod(0o622)
    assert early_stats.read_own(str(memo), early_stats.MAX_MEMO) == b""
    memo.chmod(0o600)
    memo_folder().chmod(0o755)
    assert early_stats.memo_path(["--config", str(three.config), "list"]) is None
    assert "two bash Say two. (unconfined: declares no sandbox policy)" in listed(three)  # and nothing forked


@pytest.mark.parametrize(
    ("argv", "forks"),
    [
        (["list"], True),
        (["--config", "list", "build", "--force"], True),
        (["--agent", "build", "-v", "list", "--json"], True),
        (["--var", "A=list", "describe", "list"], False),
        (["run", "list", "{}"], False),
        (["mcp"], False),
        (["-v"], False),
    ],
)
def test_only_a_list_or_build_forks(argv: list[str], forks: bool) -> None:
    assert (early_stats.memo_path(argv) is not None) == forks


@pytest.fixture
def fresh_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(early_stats, "_child", None)


def child_of(three: Project) -> early_stats._Child:
    early_stats._child = None
    early_stats.begin(["--config", str(three.config), "list"])
    child = early_stats._child
    assert child is not None
    return child


def gone(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.mark.usefixtures("fresh_module")
def test_the_childs_stats_are_the_checks_own_and_the_child_is_reaped(three: Project) -> None:
    files = sorted(p.name for p in three.tools.iterdir())
    folder = str(three.tools)
    assert child_of(three).pid == -1  # no memo yet: nothing forked
    early_stats.remember(folder, files)
    child = child_of(three)
    pid = child.pid
    assert pid > 0
    assert early_stats.stats_for(folder, files) == stat_bytes(folder, files)
    assert gone(pid) and child.pid == -1 and child.fd == -1
    assert early_stats.stats_for(folder, files) is None  # once


@pytest.mark.usefixtures("fresh_module")
def test_the_child_stats_names_beyond_ascii_as_the_check_names_them(three: Project) -> None:
    # the child stats the memo's bytes undecoded and the memo is one encoding of the joined names: a name in another
    # script, one whose bytes decode to no text (a surrogate escape) and a missing one are each the file the check means
    odd = ["été.sh", os.fsdecode(b"raw\xff.sh"), "missing é.sh"]
    for name in odd[:2]:
        (three.tools / name).write_text("x")
    files = [*sorted(p.name for p in three.tools.iterdir() if p.name.isascii()), *odd]
    folder = str(three.tools)
    assert child_of(three).pid == -1  # no memo yet: nothing forked
    early_stats.remember(folder, files)
    assert early_stats._memo(folder, files) == os.fsencode(folder) + b"\0\0" + b"\0".join(map(os.fsencode, files))
    child = child_of(three)
    assert child.pid > 0
    assert early_stats.stats_for(folder, files) == stat_bytes(folder, files)
    assert stat_bytes(folder, files) != stat_bytes(folder, [*files[:-3], "gone", "gone", "gone"])  # each one counted


@pytest.mark.usefixtures("fresh_module")
@pytest.mark.parametrize("child", ["stopped at once", "stopped after its first stats", "killed at once"])
def test_a_child_not_done_leaves_the_rest_to_the_check_and_the_stats_are_the_same(three: Project, child: str) -> None:
    # the check stats from the last file back while the child is not done, and takes the child's as far as they go:
    # whatever the child managed (nothing, some chunks, part of one), the stats are the check's own, each file once
    for n in range(3 * early_stats.CHUNK + 7):  # several of the child's chunks and of the check's shares
        (three.tools / f"f{n}.sh").write_text("x" * (n % 5))
    files = [*sorted(p.name for p in three.tools.iterdir()), "missing.sh"]
    folder = str(three.tools)
    assert child_of(three).pid == -1
    early_stats.remember(folder, files)
    started = child_of(three)
    pid = started.pid
    assert pid > 0
    if child == "stopped after its first stats":
        select.select([started.fd], [], [])  # (the child has sent something: the check takes what it sent)
    os.kill(pid, signal.SIGKILL if child == "killed at once" else signal.SIGSTOP)
    assert early_stats.stats_for(folder, files) == stat_bytes(folder, files)
    assert gone(pid) and started.pid == -1 and started.fd == -1


@pytest.mark.usefixtures("fresh_module")
@pytest.mark.parametrize("asked", ["other names", "another order", "another folder"])
def test_a_child_that_took_other_stats_is_ended_unused(three: Project, tmp_path: Path, asked: str) -> None:
    files = sorted(p.name for p in three.tools.iterdir())
    assert child_of(three).pid == -1
    early_stats.remember(str(three.tools), files)
    child = child_of(three)
    assert child.pid > 0
    pid = child.pid
    folder, names = {
        "other names": (str(three.tools), files[:2]),
        "another order": (str(three.tools), files[::-1]),
        "another folder": (str(tmp_path), files),
    }[asked]
    assert early_stats.stats_for(folder, names) is None
    assert gone(pid) and child.fd == -1


@pytest.mark.usefixtures("fresh_module")
def test_the_child_never_holds_the_commands_streams(three: Project) -> None:
    """A forged memo of many names keeps the child statting (and writing) long after its command: were the command
    killed (-9, as a harness's timeout does), a child holding its stdout or stderr would keep its caller's pipe open
    (``$(toolexec list)`` waiting) until the last stat. It holds none of the command's streams, only its pipe."""
    assert child_of(three).pid == -1  # no memo yet
    early_stats.remember(str(three.tools), [f"missing-{n}.sh" for n in range(10_000)])  # stats > a pipe's buffer
    child = child_of(three)
    assert child.pid > 0
    try:
        select.select([child.fd], [], [])  # the child has written: past its start, now held in its write
        held = {int(fd) for fd in os.listdir(f"/proc/{child.pid}/fd")}
        pipes = [os.stat(f"/proc/{child.pid}/fd/{fd}") for fd in held]  # (and what this test process leaves open)
        streams = {(s.st_dev, s.st_ino) for s in map(os.fstat, (0, 1, 2)) if not stat.S_ISCHR(s.st_mode)}
        numbers = [os.stat(f"/proc/{child.pid}/fd/{fd}") for fd in held & {0, 1, 2}]  # (one it opened may be 0-2)
        assert [n for n in numbers if (n.st_dev, n.st_ino) in streams] == []  # not the command's (pytest's captures)
        assert [p.st_ino for p in pipes if stat.S_ISFIFO(p.st_mode)].count(os.fstat(child.fd).st_ino) == 1
    finally:
        pid = child.pid
        child.end(kill=True)
    assert gone(pid)


def test_stats_of_a_missing_folder_are_every_file_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "one.sh").write_text("x")  # a name in the working directory is never what a missing folder holds
    assert stat_bytes(str(tmp_path / "gone"), ["one.sh"]) == stat_bytes(str(tmp_path), ["missing.sh"])


@pytest.mark.parametrize("argv", [["list", "--all"], ["build"]])
def test_a_list_or_build_whose_working_directory_was_removed_runs_as_elsewhere(
    three: Project, tmp_path: Path, argv: list[str]
) -> None:
    """A memo is keyed by the working directory: where it was removed (a shell left in a deleted folder), the command
    remembers nothing and says what it says elsewhere (it failed with a traceback from ``os.getcwd``)."""
    import subprocess
    import sys

    elsewhere = toolexec("--config", str(three.config), *argv)
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'
    command = [sys.executable, "-m", "toolexec", "--config", str(three.config), *argv]
    done = subprocess.run(["sh", "-c", script, "sh", str(gone), *command], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, elsewhere.stdout, "")
    assert elsewhere.returncode == 0 and elsewhere.stdout
