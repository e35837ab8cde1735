"""The import layers: upper layers import lower ones, never the reverse.

::

    toolexec (the package), __main__, cli, api, toolkit, mcp(_http,_auth,_stdio), watch   the surfaces
    calls                                                             the one call path
    engine, sources, build, catalog, config, providers, results, …   what a call and a build use
    toolexec.compilers, toolexec.runtimes                             (neither imports the other)
    records, recordtype, errors, state, paths, version, strictjson, …    the leaf vocabulary

Every module is listed: a new one must be placed (the package's own name covers only its
``__init__``, not everything under it).

Every import statement counts, including one inside a function (a lazy import) or under
``TYPE_CHECKING``: an upward import is allowed only when listed in :data:`JUSTIFIED` with why.
The source folders are read, not the installed package: ``executor/`` is ``toolexec``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

FOLDERS = {"executor": "toolexec", "compilers": "toolexec.compilers", "runtimes": "toolexec.runtimes"}
LAYERS = [
    {
        "toolexec",
        "toolexec.__main__",
        "toolexec.cli",
        "toolexec.entry",
        "toolexec.serve",
        "toolexec.serve_spares",
        "toolexec.serve_pages",
        "toolexec.serve_early",
        "toolexec.api",
        "toolexec.toolkit",
        "toolexec.mcp",
        "toolexec.mcp_http",
        "toolexec.mcp_http_memo",
        "toolexec.mcp_http_call",
        "toolexec.mcp_auth",
        "toolexec.mcp_paths",
        "toolexec.mcp_stdio",
        "toolexec.mcp_stdio_call",
        "toolexec.mcp_direct",
        "toolexec.mcp_threads",
        "toolexec.mcp_asking",
        "toolexec.asking_terminal",
        "toolexec.mcp_results",
        "toolexec.mcp_tasks",
        "toolexec.tasks",
        "toolexec.watch",
        "toolexec.progress",
        "toolexec.listing",
        "toolexec.authoring",
        "toolexec.check",
        "toolexec.celery",
    },
    {"toolexec.calls"},
    {
        "toolexec.engine",
        "toolexec.callfiles",
        "toolexec.artifacts",
        "toolexec.agents",
        "toolexec.agent_folders",
        "toolexec.sources",
        "toolexec.approval",
        "toolexec.asking",
        "toolexec.build",
        "toolexec.catalog",
        "toolexec.catalog_store",
        "toolexec.vouch",
        "toolexec.config",
        "toolexec.providers",
        "toolexec.results",
        "toolexec.validation",
        "toolexec.confine",
        "toolexec.observe",
        "toolexec.caps",
        "toolexec.tracing",
        "toolexec.audit",
        "toolexec.store",
        "toolexec.store.dirstore",
        "toolexec.store.redisstore",
    },
    {"toolexec.compilers", "toolexec.runtimes"},
    {
        "toolexec.records",
        "toolexec.recordtype",
        "toolexec.errors",
        "toolexec.state",
        "toolexec.paths",
        "toolexec.version",
        "toolexec.schemarefs",
        "toolexec.foreign_config",
        "toolexec.policy",
        "toolexec.mcp_settings",
        "toolexec.mediatype",
        "toolexec.capspec",
        "toolexec.strictjson",
        "toolexec.early",
        "toolexec.early_stats",
        "toolexec.filestats",
        "toolexec.serve_client",
    },
]
# Inside the leaf vocabulary: what each may import of the project.
LEAVES = {
    "toolexec.recordtype": set(),
    "toolexec.records": {"toolexec.recordtype"},
    "toolexec.errors": {"toolexec.records", "toolexec.recordtype"},
    "toolexec.state": {"toolexec.errors", "toolexec.records", "toolexec.recordtype", "toolexec.paths"},
    "toolexec.paths": set(),
    "toolexec.version": set(),
    "toolexec.mediatype": set(),
    "toolexec.schemarefs": set(),
    "toolexec.foreign_config": set(),
    "toolexec.policy": {"toolexec.records", "toolexec.recordtype"},
    "toolexec.mcp_settings": {"toolexec.errors", "toolexec.recordtype"},  # mcp.auth's record and OAuth scope syntax
    "toolexec.strictjson": set(),
    # Imported by the installed command before anything else (toolexec.entry): the standard library's os and sys.
    "toolexec.serve_client": set(),
    "toolexec.early": {"toolexec.serve_client"},  # the config named on the command line, the names' digest
    # A list's or build's no-change stats, forked beside its imports: the memos' folder, the stats loop, the config's name.
    "toolexec.filestats": set(),
    "toolexec.early_stats": {"toolexec.early", "toolexec.filestats", "toolexec.serve_client"},
}
# (importer, imported) -> why an upward import is right there.
JUSTIFIED: dict[tuple[str, str], str] = {}


def modules() -> dict[str, Path]:
    """Every module of the project by its import name."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = [package, *path.relative_to(REPO / folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def unit(module: str) -> str:
    """The layer member a module belongs to: itself, or its longest listed package (never the top package)."""
    members = sorted((m for layer in LAYERS for m in layer), key=len, reverse=True)
    match = next((m for m in members if module == m or (m != "toolexec" and module.startswith(m + "."))), None)
    assert match is not None, f"{module} is in no layer; add it to LAYERS in {__file__}"
    return match


def layer(module: str) -> int:
    member = unit(module)
    return next(i for i, layer in enumerate(LAYERS) if member in layer)


def imports(module: str, path: Path) -> list[tuple[str, int]]:
    """The project modules ``module`` imports anywhere in its file, with line numbers."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    known = modules()
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            # `from toolexec.runtimes import process` names a module; `from toolexec import Executor` does not
            targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
        else:
            continue
        found += [(t, node.lineno) for t in targets if t == "toolexec" or t.startswith("toolexec.")]
    return found


def test_every_module_is_in_a_layer() -> None:
    members = {m for layer in LAYERS for m in layer}
    unplaced = [m for m in modules() if m not in members and not any(m.startswith(p + ".") for p in members - {"toolexec"})]
    assert unplaced == []
    assert {"toolexec.calls", "toolexec.sources", "toolexec.engine"} <= members


def test_an_unplaced_module_is_named() -> None:
    with pytest.raises(AssertionError, match=r"toolexec\.newcomer is in no layer"):
        unit("toolexec.newcomer")


@pytest.mark.parametrize("module", sorted(modules()))
def test_no_module_imports_a_layer_above_its_own(module: str) -> None:
    path = modules()[module]
    upward = [
        f"{path.relative_to(REPO)}:{line}: {module} imports {target}"
        for target, line in imports(module, path)
        if layer(target) < layer(module) and (module, target) not in JUSTIFIED
    ]
    assert upward == []


def test_compilers_and_runtimes_do_not_import_each_other() -> None:
    crossing = [
        f"{module} imports {target}"
        for module, path in modules().items()
        for target, _ in imports(module, path)
        if {unit(module), unit(target)} == {"toolexec.compilers", "toolexec.runtimes"}
    ]
    assert crossing == []


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_the_leaf_vocabulary_imports_only_what_it_may(leaf: str) -> None:
    imported = {target for target, _ in imports(leaf, modules()[leaf])} - {leaf}
    assert imported <= LEAVES[leaf], f"{leaf} may import only {sorted(LEAVES[leaf])}"


def test_the_walk_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """The checker itself: an import inside a function, a relative one and a submodule named in `from`."""
    path = tmp_path / "probe.py"
    path.write_text(
        "from . import errors\nfrom toolexec.runtimes import process\n\ndef f():\n    from toolexec.api import Executor\n"
    )
    assert imports("toolexec.probe", path) == [
        ("toolexec.errors", 1),
        ("toolexec.runtimes.process", 2),
        ("toolexec.api", 5),
    ]
