"""The catalog: every visible tool's declaration and provenance, kept next to functions.json.

Loading it and checking that it is fresh costs one JSON read and a ``stat`` per
visible tool; no parser or compiler is imported unless something changed. An entry
whose file no longer builds keeps its ``last_good`` declaration: the tool stays
callable as it was, and the build reports the error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from toolexec.config import Config
from toolexec.errors import BuildError, NotEnabled, StateUnavailable, ToolBroken, UnknownTool, did_you_mean
from toolexec.records import ToolDeclaration
from toolexec.state import write_json_atomic
from toolexec.version import __version__

if TYPE_CHECKING:
    from toolexec.validation import Validator

Stat = tuple[int, int, int, int]  # (mtime_ns, size, inode, ctime_ns)


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One visible file: its stat and hash, and either a declaration or its problems."""

    file: str
    name: str
    stat: Stat | None  # None when the file is missing
    sha256: str | None
    declaration: ToolDeclaration | None
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    # The declaration of the last version that built, kept while the file is broken.
    last_good: ToolDeclaration | None = None

    @property
    def serving(self) -> ToolDeclaration | None:
        """What a call of this tool runs: the current declaration, else the last good one."""
        return self.declaration or self.last_good

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form stored in catalog.json."""
        return {
            "file": self.file,
            "name": self.name,
            "stat": list(self.stat) if self.stat else None,
            "sha256": self.sha256,
            "declaration": self.declaration.to_dict() if self.declaration else None,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "last_good": self.last_good.to_dict() if self.last_good else None,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        """The entry :meth:`to_dict` stored."""
        declaration, last_good = data.get("declaration"), data.get("last_good")
        return cls(
            file=data["file"],
            name=data["name"],
            stat=tuple(data["stat"]) if data.get("stat") else None,  # type: ignore[arg-type]
            sha256=data.get("sha256"),
            declaration=ToolDeclaration.from_dict(declaration) if declaration else None,
            problems=tuple(data.get("problems", ())),
            warnings=tuple(data.get("warnings", ())),
            last_good=ToolDeclaration.from_dict(last_good) if last_good else None,
        )


class Diff(NamedTuple):
    """How one catalog's tools differ from another's, by name, judged by what a model sees."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


@dataclass(frozen=True, kw_only=True)
class Catalog:
    """Every visible tool of one config, in ``visible_tools`` order."""

    fingerprint: dict[str, Any]
    entries: tuple[Entry, ...]
    tools: dict[str, ToolDeclaration] = field(init=False)
    _validators: dict[str, Validator] = field(init=False, default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        tools = {e.name: e.serving for e in self.entries if e.serving is not None and not _shadowed(e)}
        object.__setattr__(self, "tools", tools)

    def get(self, name: str, config: Config | None = None) -> ToolDeclaration:
        """The declaration a call of ``name`` runs; with ``config``, an unknown name is explained."""
        if name in self.tools:
            return self.tools[name]
        broken = next((e for e in self.entries if e.name == name and e.problems), None)
        if broken is not None:
            path = config.tools_dir / broken.file if config is not None and broken.stat is None else None
            missing = str(path) if path is not None and not os.path.lexists(path) else None  # not a loop, FIFO, …
            raise ToolBroken(name, broken.problems, missing=missing)
        if config is not None and (hidden := _hidden_file(config, name)):
            because = (
                f"{config.tools_dir / hidden} exists but is not listed under visible_tools in {config.path}; "
                f"add the line '  - {hidden}' there"
            )
            raise UnknownTool(name, (), because=because)
        raise UnknownTool(name, self.tools)

    def get_enabled(self, name: str, config: Config) -> ToolDeclaration:
        """As :meth:`get`, and refused unless the tool is enabled: only enabled tools may be called."""
        declaration = self.get(name, config)
        if config.enabled_tools is not None and name not in set(expand_enabled(config)):
            where = "the embedded default config enables only tools that modify nothing" if config.embedded else str(config.path)
            raise NotEnabled(
                f"tool {name!r} is visible but not enabled ({where}); add it to enabled_tools in your config.yaml"
                + (" (`toolexec init` writes one)" if config.embedded else "")
            )
        return declaration

    def validator(self, name: str) -> Validator:
        """The compiled argument validator of a tool, made once per catalog."""
        check = self._validators.get(name)
        if check is None:
            from toolexec.validation import compile_validator

            check = self._validators[name] = compile_validator(self.tools[name].parameters)
        return check

    def enabled(self, config: Config) -> list[ToolDeclaration]:
        """The tools offered to an agent, in visible_tools order."""
        if config.enabled_tools is None:
            return list(self.tools.values())
        wanted = set(expand_enabled(config))
        return [d for d in self.tools.values() if d.name in wanted]

    def problems(self, config: Config) -> list[str]:
        """Config-level problems (enabled_tools or mapping_tools naming no tool), computed from the config in use."""
        names = [e.name for e in self.entries]
        found = []
        for alias, tools in config.mapping_tools.items():
            for tool in tools:
                if tool not in names:
                    found.append(f"{config.path}: mapping_tools.{alias} names unknown tool {tool!r}{did_you_mean(tool, names)}")
        for name in config.enabled_tools or ():
            if name not in names and name not in config.mapping_tools:
                known = [*names, *config.mapping_tools]
                found.append(f"{config.path}: enabled_tools names unknown tool {name!r}{did_you_mean(name, known)}")
        return found

    def is_fresh(self, config: Config) -> bool:
        """Whether nothing the catalog was built from changed (config fingerprint, every file's stat)."""
        if self.fingerprint != catalog_fingerprint(config):
            return False
        return all(file_stat(config.tools_dir / e.file) == e.stat for e in self.entries)

    def diff(self, other: Catalog) -> Diff:
        """What changed from ``other`` (the older catalog) to this one."""
        old = {n: d.fingerprint() for n, d in other.tools.items()}
        new = {n: d.fingerprint() for n, d in self.tools.items()}
        return Diff(
            added=tuple(n for n in new if n not in old),
            removed=tuple(n for n in old if n not in new),
            changed=tuple(n for n in new if n in old and new[n] != old[n]),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form stored in catalog.json."""
        return {"fingerprint": self.fingerprint, "entries": [e.to_dict() for e in self.entries]}


def _shadowed(entry: Entry) -> bool:
    """A file whose name another file already took (reported by the build) is never served."""
    return entry.declaration is None and entry.last_good is None


def _hidden_file(config: Config, name: str) -> str | None:
    """A file in tools/ that would be the tool ``name`` if it were listed under visible_tools."""
    from toolexec.compilers.common import stem_name

    try:
        files = sorted(os.listdir(config.tools_dir))
    except OSError:
        return None
    return next((f for f in files if stem_name(f) == name and f not in config.visible_tools), None)


def expand_enabled(config: Config) -> list[str]:
    """enabled_tools with mapping aliases replaced by the tools they stand for."""
    names: list[str] = []
    for name in config.enabled_tools or ():
        names.extend(config.mapping_tools.get(name, (name,)))
    return names


def catalog_fingerprint(config: Config) -> dict[str, Any]:
    """What the whole catalog depends on besides the files: a change here means rebuild."""
    return {"version": __version__, "compilers": compilers_fingerprint(), **config.fingerprint()}


@functools.cache
def compilers_fingerprint() -> str:
    """A digest of the compilers' files (name, size, mtime): an upgraded or edited compiler means every
    declaration is rebuilt, even when the version number did not change. Stats only; nothing is read."""
    import importlib.util

    spec = importlib.util.find_spec("toolexec.compilers")
    folders = list(spec.submodule_search_locations or []) if spec else []
    seen = []
    for folder in folders:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    st = entry.stat()
                    seen.append(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(seen)).encode()).hexdigest()[:16]


def file_stat(path: Path) -> Stat | None:
    """What says a file changed without reading it: mtime, size, inode and ctime (so a file replaced by
    one of the same size and mtime, as ``cp -p`` or ``tar x`` do, is noticed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def load_catalog(config: Config) -> Catalog | None:
    """The stored catalog, or None when there is none or it cannot be read (then it is rebuilt)."""
    try:
        data = json.loads(config.state.catalog_file.read_text(encoding="utf-8"))
        catalog = Catalog(fingerprint=data["fingerprint"], entries=tuple(Entry.from_dict(e) for e in data["entries"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    # A damaged (hand-edited) file whose shape still loads: rebuilt rather than served.
    schemas = [e.declaration.parameters for e in catalog.entries if e.declaration is not None]
    schemas += [e.last_good.parameters for e in catalog.entries if e.last_good is not None]
    if not all(isinstance(s, dict) and isinstance(s.get("properties", {}), dict) for s in schemas):
        return None
    return catalog


def save_catalog(config: Config, catalog: Catalog) -> None:
    """Write functions.json (the declarations a model sees) and catalog.json."""
    functions = [d.to_function() for d in catalog.tools.values()]
    try:
        write_json_atomic(config.state.functions_file, functions)
        write_json_atomic(config.state.catalog_file, catalog.to_dict())
    except IsADirectoryError as exc:
        name = os.path.basename(exc.filename2 or exc.filename or "catalog.json")
        raise StateUnavailable(str(config.state.root), f"{name} there is a directory, not a file") from None
    except OSError as exc:
        raise StateUnavailable(str(config.state.root), exc.strerror or str(exc)) from None


__all__ = ["BuildError", "Catalog", "Diff", "Entry", "catalog_fingerprint", "file_stat", "load_catalog", "save_catalog"]
