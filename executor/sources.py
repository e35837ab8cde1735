"""What a call runs: one :class:`Snapshot` of a tool, taken once per call from a :class:`Source`.

A snapshot is the declaration a call is validated, approved and shown against AND the source
text that declaration was compiled from (kept in the tool's catalog record): the runtime runs
those bytes, never whatever the file holds by then. After an edit that no longer builds, the
entry keeps its last good declaration and text, so every surface runs the previous good
version byte for byte, and the snapshot carries the compile error for the caller to report.

Two sources, one rule:

* :class:`PolledSource` (the CLI and the Python API): each snapshot checks freshness once,
  by stat of the called tool's file (and the config fingerprint), and rebuilds what changed.
* :class:`WatchedSource` (the MCP server): the catalog is swapped by the file watcher
  (:mod:`toolexec.watch`); a snapshot checks nothing on disk.
"""

from __future__ import annotations

import threading

from toolexec.catalog import Catalog, DamagedCatalog, Entry, IndexReplaced
from toolexec.config import Config
from toolexec.errors import BadRequest, UnknownTool, did_you_mean
from toolexec.records import ToolDeclaration
from toolexec.recordtype import record

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    from toolexec.build import BuildReport
    from toolexec.providers import Names
    from toolexec.validation import Validator

__all__ = ["PolledSource", "Snapshot", "Source", "WatchedSource"]


@record
class Snapshot:
    """One tool as one call sees it, taken once: what is validated, approved, shown and run."""

    declaration: ToolDeclaration
    # The source text the declaration was compiled from (None for a tool registered at run time,
    # whose file the runtime reads itself).
    code: str | None
    # The current file's compile errors when the declaration is the last good version's.
    problems: tuple[str, ...]
    validator: Validator
    config: Config

    @property
    def last_good(self) -> bool:
        """Whether the file no longer builds and this is the previous good version."""
        return bool(self.problems)


class Source:
    """Where calls get their snapshots and listings their catalog."""

    config: Config

    def serving(self) -> tuple[Config, Catalog, Names]:
        """The config, the catalog (registered tools included) and the provider-safe names, fresh for a listing."""
        raise NotImplementedError

    def current(self, name: str) -> tuple[Config, Catalog]:
        """The config and catalog a call of ``name`` runs against: the one freshness check of the call."""
        raise NotImplementedError

    def snapshot(self, name: str) -> Snapshot:
        """The snapshot a call of ``name`` (its own name or a provider-safe one) runs; raises ToolexecError when it
        cannot run (unknown, not enabled, broken without a good version, no writable state directory)."""
        config, catalog = self.current(name)
        entry = catalog.entry(name)
        if entry is None:  # a provider-safe name: the catalog was checked whole, so the map is fresh
            from toolexec.providers import Names

            original = Names(catalog.tools).original(name)
            entry = catalog.entry(original) if original != name else None
        try:
            tool = catalog.get_enabled(entry.name if entry is not None else name, config)
        except UnknownTool:
            routed = self.agent_snapshot(name) if ":" in name and self.config.agent is None else None
            if routed is None:
                raise
            return routed
        assert entry is not None  # get_enabled raised otherwise
        return _snapshot(entry, tool, catalog, config)

    def agent_snapshot(self, name: str) -> Snapshot | None:
        """``AGENT:FUNCTION`` (the name ``toolexec list`` shows) when no tool has that name: that function of that
        agent, as ``--agent AGENT`` runs it; None where this source serves no agents or there is no such agent."""
        return None


def _snapshot(entry: Entry, tool: ToolDeclaration, catalog: Catalog, config: Config) -> Snapshot:
    problems = entry.problems if entry.declaration is None else ()
    return Snapshot(
        declaration=tool, code=entry.serving_code, problems=problems, validator=catalog.validator(tool.name), config=config
    )


class PolledSource(Source):
    """The catalog as the files are now: each call stats its tool's file; what changed is rebuilt.

    Tools registered at run time (:meth:`register`) are served beside the built ones.
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self._catalog: Catalog | None = None
        self._registered: dict[str, ToolDeclaration] = {}
        self._generation = 0
        self._merged: tuple[Catalog, int, Config, Catalog, Names] | None = None
        self._agents: dict[str, PolledSource] = {}  # the sources of agents whose functions were called as AGENT:FUNCTION
        self._lock = threading.RLock()

    def catalog(self, tool: str | None = None) -> Catalog:
        """The built catalog, fresh for everything (or, with ``tool``, for a call of that tool: only its file is
        checked and only its record read, so a call costs the same with a thousand tools)."""
        with self._lock:
            try:
                try:
                    self._check(tool)
                except IndexReplaced:  # another process wrote a new index since this one was read: read that one
                    self._catalog = None
                    self._check(tool)
            except DamagedCatalog:  # a damaged index or a lost record (a cleared cache): rebuilt
                self._catalog = self.build(trust_index=False).catalog
            assert self._catalog is not None
            return self._catalog

    def _check(self, tool: str | None) -> None:
        """Make ``_catalog`` fresh for ``tool`` (or everything), reading what a call of it needs; DamagedCatalog when
        the index or a record cannot be read."""
        from toolexec.catalog_store import load_catalog

        if self._catalog is None or not self._catalog.is_fresh(self.config, tool=tool):
            catalog = load_catalog(self.config)
            if catalog is None or not catalog.is_fresh(self.config, tool=tool):
                catalog = self.build().catalog
            self._catalog = catalog
        if tool is not None and (entry := self._catalog.entry(tool)) is not None:
            entry.serving  # noqa: B018 - read the one record the call needs, here where a lost one is rebuilt
        elif tool is not None:  # an unknown or provider-safe name is looked up among every row: read them here
            len(self._catalog.tools)

    def build(
        self, *, force: bool = False, on_file: Callable[[str], None] | None = None, trust_index: bool = True
    ) -> BuildReport:
        """Compile the visible tools (see :func:`toolexec.build.build`) and serve the result."""
        from toolexec.build import build  # compiling is only needed when something changed

        report = build(self.config, force=force, on_file=on_file, trust_index=trust_index)
        with self._lock:
            self._catalog = report.catalog
        return report

    def agent_snapshot(self, name: str) -> Snapshot | None:
        """The function of an agent of this config, from that agent's own source (kept for the next call)."""
        from toolexec.agents import agent_config, agent_names

        agent, _, function = name.partition(":")
        if agent not in agent_names(self.config):
            return None
        with self._lock:
            source = self._agents.get(agent)
            if source is None:
                source = self._agents[agent] = PolledSource(agent_config(self.config, agent))
        try:
            return source.snapshot(function)
        except UnknownTool:
            functions = source.catalog().tools
            raise UnknownTool(
                name,
                (),
                because=f"agent {agent!r} has no function {function!r}{did_you_mean(function, functions)}; "
                f"it has {', '.join(functions) or 'none that builds'}",
            ) from None

    def current(self, name: str) -> tuple[Config, Catalog]:
        """Without registered tools, the catalog checked for ``name`` only; else with the registered ones merged."""
        base = self.catalog(name)
        if not self._registered:
            return self.config, base
        config, catalog, _ = self._merge(base)
        return config, catalog

    def serving(self) -> tuple[Config, Catalog, Names]:
        try:
            return self._merge(self.catalog())
        except DamagedCatalog:  # a damaged index row or a lost record, met while listing: rebuilt once
            self.build(trust_index=False)
            return self._merge(self.catalog())

    def _merge(self, base: Catalog) -> tuple[Config, Catalog, Names]:
        from toolexec.providers import Names

        with self._lock:
            cached = self._merged
            if cached is not None and cached[0] is base and cached[1] == self._generation:
                return cached[2], cached[3], cached[4]
            config, catalog = self.config, base
            if self._registered:
                from toolexec.recordtype import replace

                registered = self._registered.values()
                extra = tuple(Entry(file=t.source, name=t.name, stat=None, sha256=None, declaration=t) for t in registered)
                catalog = Catalog(fingerprint=base.fingerprint, entries=base.entries + extra)
                if config.enabled_tools is not None:
                    config = replace(config, enabled_tools=(*config.enabled_tools, *self._registered))
            names = Names(catalog.tools)
            self._merged = (base, self._generation, config, catalog, names)
            return config, catalog, names

    @property
    def registered(self) -> dict[str, ToolDeclaration]:
        """The tools registered at run time, by name (a copy)."""
        with self._lock:
            return dict(self._registered)

    def register(self, path: str | os.PathLike[str]) -> ToolDeclaration:
        """Compile the tool file at ``path`` and serve it; a name another tool has is refused."""
        from pathlib import Path

        from toolexec.compilers import compile_file

        source = Path(path).resolve()
        tool = compile_file(source)
        catalog = self.catalog()
        with self._lock:
            taken = {entry.name: str(self.config.tools_dir / entry.file) for entry in catalog.entries}
            taken.update({name: t.source for name, t in self._registered.items()})
            if tool.name in taken:
                raise BadRequest(f"cannot register {source}: tool name {tool.name!r} is already used by {taken[tool.name]}")
            self._registered[tool.name] = tool
            self._generation += 1
        return tool

    def unregister(self, name: str) -> None:
        """Stop serving a registered tool."""
        with self._lock:
            if name not in self._registered:
                registered = ", ".join(sorted(self._registered)) or "none"
                raise BadRequest(f"tool {name!r} was not registered with register() (registered: {registered})")
            del self._registered[name]
            self._generation += 1


class WatchedSource(Source):
    """A catalog swapped by the file watcher (:meth:`swap`); snapshots read it without touching the disk."""

    def __init__(self, config: Config, catalog: Catalog) -> None:
        self._served = (config, catalog)  # swapped as one: a call never sees one's config with another's catalog

    @property
    def config(self) -> Config:  # type: ignore[override]
        """The config being served."""
        return self._served[0]

    @property
    def catalog(self) -> Catalog:
        """The catalog being served."""
        return self._served[1]

    def swap(self, config: Config, catalog: Catalog) -> None:
        """Serve ``catalog`` under ``config`` from the next call on (calls already running keep their snapshot)."""
        self._served = (config, catalog)

    def current(self, name: str) -> tuple[Config, Catalog]:
        return self._served

    def serving(self) -> tuple[Config, Catalog, Names]:
        from toolexec.providers import Names

        config, catalog = self._served
        return config, catalog, Names(catalog.tools)
