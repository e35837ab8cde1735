"""The catalog: every visible tool's declaration and provenance, kept next to functions.json.

Loading it and checking that it is fresh costs one JSON read and a ``stat`` per
visible tool; no parser or compiler is imported unless something changed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolexec.config import Config
from toolexec.errors import CallRefused, UnknownTool
from toolexec.paths import write_json_atomic
from toolexec.records import ToolDeclaration
from toolexec.version import __version__

CATALOG_FILE = "catalog.json"
FUNCTIONS_FILE = "functions.json"


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One visible file: its stat and hash, and either a declaration or its problems."""

    file: str
    name: str
    stat: tuple[int, int] | None  # (mtime_ns, size); None when the file is missing
    sha256: str | None
    declaration: ToolDeclaration | None
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "name": self.name,
            "stat": list(self.stat) if self.stat else None,
            "sha256": self.sha256,
            "declaration": self.declaration.to_dict() if self.declaration else None,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        declaration = data.get("declaration")
        return cls(
            file=data["file"],
            name=data["name"],
            stat=tuple(data["stat"]) if data.get("stat") else None,  # type: ignore[arg-type]
            sha256=data.get("sha256"),
            declaration=ToolDeclaration.from_dict(declaration) if declaration else None,
            problems=tuple(data.get("problems", ())),
            warnings=tuple(data.get("warnings", ())),
        )


@dataclass(frozen=True, kw_only=True)
class Catalog:
    fingerprint: dict[str, Any]
    entries: tuple[Entry, ...]
    problems: tuple[str, ...] = ()  # config-level problems (unknown enabled_tools …)
    tools: dict[str, ToolDeclaration] = field(init=False)

    def __post_init__(self) -> None:
        tools = {e.declaration.name: e.declaration for e in self.entries if e.declaration and not e.problems}
        object.__setattr__(self, "tools", tools)

    def get(self, name: str, config: Config | None = None) -> ToolDeclaration:
        """The declaration of a visible tool that built; with ``config``, unknown names are explained."""
        if name in self.tools:
            return self.tools[name]
        broken = next((e for e in self.entries if e.name == name and e.problems), None)
        if broken is not None:
            raise CallRefused(f"tool {name!r} failed to build:\n" + "\n".join(broken.problems))
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
            raise CallRefused(
                f"tool {name!r} is visible but not enabled ({where}); add it to enabled_tools in your config.yaml"
                + (" (`toolexec init` writes one)" if config.embedded else "")
            )
        return declaration

    def enabled(self, config: Config) -> list[ToolDeclaration]:
        """The tools offered to an agent, in visible_tools order."""
        if config.enabled_tools is None:
            return list(self.tools.values())
        wanted = set(expand_enabled(config))
        return [d for d in self.tools.values() if d.name in wanted]

    def is_fresh(self, config: Config) -> bool:
        if self.fingerprint != catalog_fingerprint(config):
            return False
        return all(file_stat(config.tools_dir / e.file) == e.stat for e in self.entries)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "problems": list(self.problems),
            "entries": [e.to_dict() for e in self.entries],
        }


def _hidden_file(config: Config, name: str) -> str | None:
    """A file in tools/ that would be the tool ``name`` if it were listed under visible_tools."""
    try:
        files = sorted(os.listdir(config.tools_dir))
    except OSError:
        return None
    return next((f for f in files if f.split(".")[0].replace("-", "_") == name and f not in config.visible_tools), None)


def expand_enabled(config: Config) -> list[str]:
    """enabled_tools with mapping aliases replaced by the tools they stand for."""
    names: list[str] = []
    for name in config.enabled_tools or ():
        names.extend(config.mapping_tools.get(name, (name,)))
    return names


def catalog_fingerprint(config: Config) -> dict[str, Any]:
    return {"version": __version__, **config.fingerprint()}


def file_stat(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def load_catalog(config: Config) -> Catalog | None:
    try:
        data = json.loads((config.state_dir / CATALOG_FILE).read_text(encoding="utf-8"))
        return Catalog(
            fingerprint=data["fingerprint"],
            entries=tuple(Entry.from_dict(e) for e in data["entries"]),
            problems=tuple(data.get("problems", ())),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_catalog(config: Config, catalog: Catalog) -> None:
    functions = [d.to_function() for d in catalog.tools.values()]
    write_json_atomic(config.state_dir / FUNCTIONS_FILE, functions)
    write_json_atomic(config.state_dir / CATALOG_FILE, catalog.to_dict())
