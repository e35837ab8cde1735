"""The catalog's no-change check: one digest of the visible files' stats, kept in the index's first line.

``toolexec list``, a no-change ``toolexec build`` and a call read no index row when nothing changed, and every
kind of change is still seen by the next command: a file edited in place (even keeping its size and mtime), one
replaced by a rename, one removed, one added or renamed in the config. Tested at small scale; the 10,000-tool
figures are in ``benchmarks/scale_bench.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project, cli
from toolexec.build import build
from toolexec.catalog import DamagedCatalog, files_digest, stats_digest
from toolexec.catalog_store import load_catalog
from toolexec.config import load_config


def tool(version: str) -> str:
    return f'def run() -> str:\n    """Say {version}."""\n    return "{version}"\n'


def _in_place_same_size_and_mtime(project: Project) -> None:
    path = project.tools / "t1.py"
    before = path.stat()
    with open(path, "r+", encoding="utf-8") as handle:  # written over, as an editor that saves in place does
        handle.write(tool("v2"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as `cp -p` or `tar x` leave it
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _appended(project: Project) -> None:
    with open(project.tools / "t1.py", "a", encoding="utf-8") as handle:
        handle.write("\n\ndef unused() -> None:\n    pass\n")
    path = project.tools / "t1.py"
    path.write_text(path.read_text().replace("v1", "v2"))


def _replaced_by_rename(project: Project) -> None:
    (project.tools / ".t1.tmp").write_text(tool("v2"))
    os.replace(project.tools / ".t1.tmp", project.tools / "t1.py")


# (what changed, how, what `list --json` then says of t1 and t2 (description or error), what a call of t1 says)
CHANGES: list[tuple[str, Callable[[Project], None], dict[str, str], str]] = [
    ("edited-in-place-same-size-and-mtime", _in_place_same_size_and_mtime, {"t1": "Say v2.", "t2": "Say two."}, "v2"),
    ("appended", _appended, {"t1": "Say v2.", "t2": "Say two."}, "v2"),
    ("replaced-by-rename", _replaced_by_rename, {"t1": "Say v2.", "t2": "Say two."}, "v2"),
    ("removed", lambda p: (p.tools / "t2.py").unlink(), {"t1": "Say v1.", "t2": "error"}, "v1"),
    (
        "added",
        lambda p: (p.tool("t3.py", tool("three")), p.configure()),
        {"t1": "Say v1.", "t2": "Say two.", "t3": "Say three."},
        "v1",
    ),
    (
        "renamed",
        lambda p: (os.rename(p.tools / "t2.py", p.tools / "t4.py"), p.configure()),
        {"t1": "Say v1.", "t4": "Say two."},
        "v1",
    ),
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c[0])
def test_every_change_is_seen_by_the_next_command(
    change: tuple[str, Callable[[Project], None], dict[str, str], str], project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    _, make, listed, output = change
    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = str(project.configure())
    for _ in range(2):  # built, then listed from the kept listing
        status, out, _ = cli(capsys, "--config", config, "list", "--json")
        assert (status, {row["name"]: row["description"] for row in json.loads(out)}) == (
            0,
            {"t1": "Say v1.", "t2": "Say two."},
        )
    make(project)
    status, out, _ = cli(capsys, "--config", config, "list", "--json")
    assert {row["name"]: row["description"] or "error" for row in json.loads(out)} == listed
    assert cli(capsys, "--config", config, "run", "t1", "{}")[:2] == (0, output)
    assert cli(capsys, "--config", config, "build")[1].endswith(
        " compiled); wrote " + str(project.root / "functions" / "functions.json") + "\n"
    )
    report = build(load_config(config))
    assert (report.compiled, report.built) == (0, len([v for v in listed.values() if v != "error"]))


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c[0])
def test_a_no_change_build_is_told_apart_from_every_change(
    change: tuple[str, Callable[[Project], None], dict[str, str], str], project: Project
) -> None:
    """A build after the change compiles what changed (or reports the missing file); the one after it compiles
    nothing and reads no index row."""
    what, make, _, _ = change
    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = project.configure()
    assert build(load_config(config)).compiled == 2
    make(project)
    after = build(load_config(config))
    # (a changed config, as for an added or renamed file, compiles every file anew)
    expected = {"removed": (0, 1), "added": (3, 0), "renamed": (2, 0)}.get(what, (1, 0))
    assert (after.compiled, after.failed) == expected
    again = build(load_config(config))
    assert (again.compiled, again.failed, again.built, again.catalog._entries) == (0, after.failed, after.built, None)


def test_a_no_change_build_and_list_read_no_row(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Counted, not timed: neither a no-change build nor a second `list` parses an index row or compiles."""
    from toolexec import build as build_module
    from toolexec import catalog

    for n in range(30):
        project.tool(f"t{n}.py", tool(f"n{n}"))
    config = str(project.configure())
    assert cli(capsys, "--config", config, "build")[0] == 0
    first = cli(capsys, "--config", config, "list")
    counts = {"rows": 0, "compiled": 0}
    from_index, compile_source = catalog.Entry.from_index, build_module.compile_source

    def counted_row(row: dict[str, Any], loader: Any) -> catalog.Entry:
        counts["rows"] += 1
        return from_index(row, loader)

    def counted_compile(*args: Any) -> Any:
        counts["compiled"] += 1
        return compile_source(*args)

    monkeypatch.setattr(catalog.Entry, "from_index", staticmethod(counted_row))
    monkeypatch.setattr(build_module, "compile_source", counted_compile)
    assert cli(capsys, "--config", config, "build")[:2] == (
        0,
        f"built 30 tool(s), 0 failed (0 compiled); wrote {project.root / 'functions' / 'functions.json'}\n",
    )
    assert cli(capsys, "--config", config, "list") == first
    assert counts == {"rows": 0, "compiled": 0}


def test_the_digest_of_the_files_is_the_digest_of_their_stats(tmp_path: Path) -> None:
    from toolexec.catalog import file_stat

    for name in ("a.py", "b.sh"):
        (tmp_path / name).write_text(name)
    files = ["a.py", "missing.py", "b.sh"]
    assert files_digest(str(tmp_path), files) == stats_digest(file_stat(tmp_path / f) for f in files)
    assert files_digest(str(tmp_path), files) != files_digest(str(tmp_path), list(reversed(files)))
    assert files_digest(str(tmp_path / "gone"), files) == stats_digest([None, None, None])


def test_an_index_replaced_while_read_is_read_anew(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row read after a concurrent build replaced catalog.json is never taken from the new file at the old offset:
    the catalog is damaged for the reader (and a call rebuilds it)."""
    from toolexec import Executor, catalog_store

    monkeypatch.setattr(catalog_store, "HEAD_CHUNK", 16)  # the body is read from the file, not kept from the first read
    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = load_config(project.configure())
    build(config)
    stored = load_catalog(config)
    assert stored is not None
    project.tool("t2.py", tool("changed"))
    build(config)  # another process's build: a new catalog.json
    with pytest.raises(DamagedCatalog, match="replaced while it was read"):
        stored.entry("t2")
    assert Executor(project.config).call("t2").output == "changed"


def test_a_fifo_at_the_index_is_never_waited_on(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.tool("t1.py", tool("v1"))
    config = project.configure()
    assert cli(capsys, "--config", str(config), "build")[0] == 0
    index = load_config(config).state.catalog_file
    index.unlink()
    os.mkfifo(index)
    assert cli(capsys, "--config", str(config), "run", "t1", "{}")[:2] == (0, "v1")
    assert index.is_file()  # rebuilt in its place


def _head(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        head, rest = path.read_text().split("\n", 1)
        path.write_text(json.dumps(change(json.loads(head))) + "\n" + rest)

    return write


DAMAGED_HEADS = [
    ("offsets-past-the-end", _head(lambda h: {**h, "offsets": "f" * len(h["offsets"])})),
    ("offsets-backwards", _head(lambda h: {**h, "offsets": h["offsets"][8:] + h["offsets"][:8]})),
    ("names-not-json", _head(lambda h: {**h, "names": h["names"].replace('"', "'")})),
    ("tally-lies", _head(lambda h: {**h, "tally": [99, 0, 0]})),
    ("files-a-number", _head(lambda h: {**h, "files": 5})),
    ("functions-a-string", _head(lambda h: {**h, "functions": "x"})),
]


@pytest.mark.parametrize("damage", DAMAGED_HEADS, ids=lambda d: d[0])
@pytest.mark.parametrize("command", [["list"], ["build"], ["run", "t1", "{}"]], ids=lambda c: c[0])
def test_a_damaged_first_line_is_never_trusted_into_a_traceback(
    damage: tuple[str, Callable[[Path], None]], command: list[str], project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand-edited first line may make a no-change build report wrong counts (it is not read further when its
    digest matches), but every command still runs, and a call still runs the right tool."""
    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = str(project.configure(enabled_tools=["t1", "t2"]))
    assert cli(capsys, "--config", config, "build")[0] == 0
    damage[1](load_config(config).state.catalog_file)
    status, out, err = cli(capsys, "--config", config, *command)
    assert (status, err) == (0, "")
    if command[0] == "run":
        assert out == "v1"
    elif command[0] == "list":
        assert [line.split()[0] for line in out.splitlines()] == ["t1", "t2"]


def test_a_long_lived_source_reads_a_replaced_index_anew_without_rebuilding(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An executor that read the index before another process's build replaced it reads the new one (its first line
    and one row) for its next call: no rebuild, no error."""
    from toolexec import Executor, catalog_store
    from toolexec import build as build_module

    monkeypatch.setattr(catalog_store, "HEAD_CHUNK", 16)  # rows are read from the file, as for a large index
    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = project.configure()
    build(load_config(config))
    executor = Executor(config)
    assert executor.call("t1").output == "v1"
    project.tool("t2.py", tool("changed"))
    build(load_config(config))  # another process's build: a new catalog.json
    builds = []
    real = build_module.build
    monkeypatch.setattr(build_module, "build", lambda *a, **k: builds.append(k) or real(*a, **k))
    assert (executor.call("t2").output, executor.call("t1").output, builds) == ("changed", "v1", [])


def test_an_index_read_ahead_is_taken_once_and_only_while_the_index_is_unchanged(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``toolexec serve``'s waiting child reads the catalog's index ahead (``prime``): the call's load takes it while
    catalog.json is the file read, once; an index written meanwhile (a build) is the one the call loads."""
    import toolexec.catalog_store as store

    project.tool("a.sh", "#!/usr/bin/env bash\n# @describe A.\nmain() { :; }\n")
    config = load_config(project.configure())
    build(config)
    store.prime(config)
    assert set(store._primed) == {str(config.state.catalog_file)}
    with monkeypatch.context() as patched:
        patched.setattr(store, "_read_head", None)  # (the index is not read again)
        first = load_catalog(config)
    assert first is not None and list(first.tools) == ["a"]
    assert store._primed == {}
    assert load_catalog(config) is not None  # (read: nothing primed)
    store.prime(config)
    project.tool("b.sh", "#!/usr/bin/env bash\n# @describe B.\nmain() { :; }\n")
    config = load_config(project.configure())
    built = subprocess.run([sys.executable, "-m", "toolexec", "--config", str(project.config), "build"], capture_output=True)
    assert built.returncode == 0, built.stderr  # a new catalog.json, written by another process
    again = load_catalog(config)
    assert again is not None and list(again.tools) == ["a", "b"]
    assert store._primed == {}


def test_a_digest_computed_ahead_is_the_digest_and_is_taken_once() -> None:
    import hashlib

    from toolexec import state

    data = b"a\0b" * 1000
    state.prime_digest(data)
    assert state._primed_digest is not None
    assert state.sha256_hex(data) == hashlib.sha256(data).hexdigest()
    assert state._primed_digest is None
    state.prime_digest(data)
    assert state.sha256_hex(data + b"x") == hashlib.sha256(data + b"x").hexdigest()  # another: computed
    assert state.sha256_hex(data) == hashlib.sha256(data).hexdigest()
