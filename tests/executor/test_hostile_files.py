"""Hostile files (issue 10): messages that name the real cause, and a catalog that cannot be fooled.

A link loop, a FIFO, a directory or a dangling link in ``functions/tools/`` is named as what
it is (never "not found; did you mean '<its own name>'"); ``toolexec compile`` refuses a FIFO
without waiting on it; a damaged ``catalog.json`` is rebuilt (a directory there is a clean
refusal); a file replaced by another of the same size and mtime is recompiled.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project, cli, toolexec
from tests.helpers import close_warm, marked_processes
from toolexec.state import State

SIBLING = 'def run() -> str:\n    """Fine."""\n    return "fine"\n'

FILES: list[tuple[str, Callable[[Path], object], str]] = [
    ("symlink-loop", lambda p: os.symlink(p.name, p), "is a symbolic link loop; point it at a tool script"),
    ("fifo", os.mkfifo, "is a FIFO (named pipe), not a tool script; replace it with a regular file"),
    ("directory", Path.mkdir, "is a directory, not a tool script; replace it with a regular file"),
    ("dangling-link", lambda p: os.symlink("elsewhere.py", p), "is a link to 'elsewhere.py', which does not exist"),
]


@pytest.mark.parametrize("row", FILES, ids=lambda r: r[0])
def test_visible_file_named_as_what_it_is(
    row: tuple[str, Callable[[Path], object], str], project: Project, private_tmpdir: Path
) -> None:
    _, make, what = row
    make(project.tools / "odd.py")
    project.tool("sibling.py", SIBLING)
    executor = project.executor(["odd.py", "sibling.py"])
    problem = f"{project.config}: visible tool 'odd.py' in {project.tools} {what}"
    assert executor.build().problems == [problem]
    descriptors = sorted(os.listdir("/proc/self/fd"))
    result = executor.call("odd", "{}")
    assert (result.status, result.exit_code, result.error) == ("refused", 2, f"tool 'odd' failed to build:\n{problem}")
    assert executor.call("sibling", "{}").output == "fine"
    close_warm(executor)  # (a long-lived executor keeps its cold calls' file sets, in a directory of its own, until then)
    assert marked_processes(private_tmpdir) == []
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert os.listdir(private_tmpdir) == []


def test_a_missing_file_is_still_not_found(project: Project) -> None:
    project.tool("sibling.py", SIBLING)
    executor = project.executor(["sibling.py", "siblin.py"])
    assert executor.build().problems == [
        f"{project.config}: visible tool 'siblin.py' not found in {project.tools}; did you mean 'sibling.py'?"
    ]
    result = executor.call("siblin", "{}")
    assert result.error == (
        f"tool 'siblin' cannot run: its file {project.tools / 'siblin.py'} is gone; restore it or remove it from visible_tools"
    )


@pytest.mark.parametrize("row", FILES, ids=lambda r: r[0])
def test_compile_refuses_what_is_not_a_file(row: tuple[str, Callable[[Path], object], str], tmp_path: Path) -> None:
    """In a child process, as a user runs it: a FIFO would block a plain open() forever."""
    name, make, _ = row
    odd = tmp_path / "odd.py"
    make(odd)
    good = tmp_path / "good.py"
    good.write_text(SIBLING)
    done = toolexec("compile", str(odd), str(good))
    expected = {
        "symlink-loop": f"{odd}:1:1: cannot read the file: [Errno 40] Too many levels of symbolic links: '{odd}'",
        "fifo": f"{odd}:1:1: a FIFO (named pipe), not a tool script\n  hint: name a regular file",
        "directory": f"{odd}:1:1: a directory, not a tool script\n  hint: name a regular file",
        "dangling-link": f"{odd}:1:1: cannot read the file: [Errno 2] No such file or directory: '{odd}'",
    }[name]
    assert (done.returncode, done.stderr) == (1, expected + "\n")
    assert '"name": "good"' in done.stdout


def test_compile_keeps_crlf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``toolexec compile`` reads the bytes as they are, so it refuses CRLF as the build does."""
    path = tmp_path / "crlf.sh"
    path.write_bytes(b"# @describe CRLF.\r\nmain() { :; }\r\n")
    status, _, err = cli(capsys, "compile", str(path))
    assert (status, err.splitlines()[0]) == (1, f"{path}:1:1: the file has Windows (CRLF) line endings, which bash cannot run")


def test_missing_grammar_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolexec.compilers import compile_source
    from toolexec.compilers.common import parser
    from toolexec.errors import CompileError

    parser.cache_clear()
    monkeypatch.setitem(sys.modules, "tree_sitter_bash", None)  # import raises ModuleNotFoundError
    try:
        with pytest.raises(CompileError) as error:
            compile_source("# @describe X.\nmain() { :; }\n", "x.sh")
    finally:
        parser.cache_clear()
    assert str(error.value) == (
        "x.sh:1:1: bash tools need the parser package tree-sitter-bash, which is not installed\n  hint: pip install tree-sitter-bash"
    )


OVERLOADS = [
    ("jsdoc-on-first-overload", "/**\n * Overloaded.\n * @param x - X.\n */\nexport function run(x: string): string;\nexport function run(x: number): string;\nexport function run(x: any): string {\n  return `got ${x}`;\n}\n"),
    ("jsdoc-on-implementation", "export function run(x: string): string;\n/**\n * Overloaded.\n * @param x - X.\n */\nexport function run(x: any): string {\n  return `got ${x}`;\n}\n"),
]  # fmt: skip


@pytest.mark.parametrize("row", OVERLOADS, ids=lambda r: r[0])
def test_typescript_overloads(row: tuple[str, str], project: Project) -> None:
    project.tool("over.ts", row[1])
    executor = project.executor(["over.ts"])
    report = executor.build()
    assert report.problems == []
    assert executor.tools()[0].description == "Overloaded."
    result = executor.call("over", {"x": "a"})
    assert (result.status, result.output) == ("ok", "got a"), result.error


def test_typescript_overload_without_jsdoc_says_where_to_put_it(project: Project) -> None:
    project.tool("over.ts", "export function run(x: string): string;\nexport function run(x: any): string {\n  return x;\n}\n")
    problems = project.executor(["over.ts"]).build().problems
    assert problems == [
        f"{project.tools / 'over.ts'}:2:8: function 'run' has no JSDoc block\n"
        "  hint: put /** What the tool does. @param name - what it is */ right before it"
    ]


def _catalog_rows() -> list[tuple[str, Callable[[Path], None]]]:
    """Ways catalog.json (a header line, then one row per tool) and its record pack get damaged."""
    import json

    def whole(text: str | bytes) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            path.write_bytes(text if isinstance(text, bytes) else text.encode())

        return write

    def header(**change: object) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            head, rest = path.read_text().split("\n", 1)
            path.write_text(json.dumps({**json.loads(head), **change}) + "\n" + rest)

        return write

    def row(**change: object) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            head, first, *rest = path.read_text().split("\n")
            damaged = json.dumps({**json.loads(first), **change}) if change else "x"
            path.write_text("\n".join([head, damaged.ljust(len(first)), *rest]))

        return write

    def record(declaration: Callable[[dict[str, object]], object]) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            for pack in State(path.parent).records_dir.glob("*.pack"):
                data = json.loads(pack.read_text().splitlines()[0])
                pack.write_text(json.dumps({**data, "declaration": declaration(data["declaration"])}) + "\n")

        return write

    def no_pack(path: Path) -> None:
        for pack in State(path.parent).records_dir.glob("*.pack"):
            pack.unlink()

    return [
        ("array", whole("[]")),
        ("string", whole('"catalog"')),
        ("nested-100000-deep", whole("[" * 100_000)),
        ("not-utf8", whole(b"\xff\xfe{")),
        ("empty", whole("")),
        ("names-a-number", header(names=5)),
        ("offsets-a-string", header(offsets="x")),
        ("row-not-json", row()),
        ("row-file-a-number", row(file=3)),
        ("row-stat-a-string", row(stat="x")),
        ("record-junk", record(lambda d: {"name": 5})),
        ("record-parameters-a-number", record(lambda d: {**d, "parameters": 5})),
        ("record-properties-a-list", record(lambda d: {**d, "parameters": {"type": "object", "properties": []}})),
        ("record-pack-gone", no_pack),
    ]


@pytest.mark.parametrize("row", _catalog_rows(), ids=lambda r: r[0])
def test_damaged_catalog_is_rebuilt(row: tuple[str, Callable[[Path], None]], project: Project) -> None:
    import json

    project.tool("sibling.py", SIBLING)
    executor = project.executor(["sibling.py"])
    executor.build()
    path = executor.config.state.catalog_file
    row[1](path)
    from toolexec import Executor

    result = Executor(project.config).call("sibling", "{}")
    assert (result.status, result.exit_code, result.output) == ("ok", 0, "fine"), result.error
    rows = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(rows[1])["file"] == "sibling.py"


def test_directory_at_catalog_is_a_clean_refusal(project: Project) -> None:
    project.tool("sibling.py", SIBLING)
    executor = project.executor(["sibling.py"])
    path = executor.config.state.catalog_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir()
    result = executor.call("sibling", "{}")
    assert (result.status, result.exit_code, result.error) == (
        "unavailable",
        127,
        f"cannot write toolexec's state in {executor.config.state.root}: catalog.json there is a directory, not a file; "
        "make it writable, or remove it so that the user cache is used",
    )


@pytest.mark.parametrize("how", ["cp-p", "rsync-t", "tar-x"])
def test_file_replaced_with_same_size_and_mtime_is_recompiled(how: str, project: Project) -> None:
    """``cp -p``, ``rsync -t`` and ``tar x`` keep size and mtime; the inode (rename) or ctime (in place) changes."""
    from toolexec import Executor

    tool = project.tool("same.py", 'def run() -> str:\n    """Same."""\n    return "old"\n')
    executor = project.executor(["same.py"])
    assert executor.call("same", "{}").output == "old"
    before = os.stat(tool)
    replacement = tool.with_name("incoming")
    replacement.write_text('def run() -> str:\n    """Same."""\n    return "new"\n')
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    if how == "cp-p":  # cp -p writes into the existing file (same inode), then restores the mtime
        tool.write_bytes(replacement.read_bytes())
        replacement.unlink()
        os.utime(tool, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif how == "rsync-t":  # rsync -t writes a temporary file and renames it over the old one
        os.replace(replacement, tool)
    else:  # tar x removes the old file and creates a new one, then sets the mtime
        tool.unlink()
        tool.write_bytes(replacement.read_bytes())
        replacement.unlink()
        os.utime(tool, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(tool)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert Executor(project.config).call("same", "{}").output == "new"
    assert executor.call("same", "{}").output == "new"
