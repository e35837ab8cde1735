"""``toolexec build``: compile every visible tool into the catalog and functions.json.

Unchanged files (same content hash) keep their previous declaration; one
broken tool never stops the others.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from toolexec.catalog import Catalog, Entry, catalog_fingerprint, file_stat, load_catalog, save_catalog
from toolexec.config import Config
from toolexec.errors import CompileError, did_you_mean


@dataclass(frozen=True)
class BuildReport:
    catalog: Catalog
    compiled: int  # how many files were compiled (the rest were unchanged)

    @property
    def problems(self) -> list[str]:
        return [*self.catalog.problems, *(p for e in self.catalog.entries for p in e.problems)]

    @property
    def warnings(self) -> list[str]:
        return [w for e in self.catalog.entries for w in e.warnings]

    @property
    def ok(self) -> bool:
        return not self.problems


def build(config: Config, *, force: bool = False) -> BuildReport:
    previous = None if force else load_catalog(config)
    reusable = {e.file: e for e in previous.entries} if previous and previous.fingerprint == catalog_fingerprint(config) else {}
    entries: list[Entry] = []
    compiled = 0
    for file in config.visible_tools:
        entry, fresh = _entry(config, file, reusable.get(file))
        entries.append(entry)
        compiled += fresh
    entries = list(_check_duplicates(entries))
    catalog = Catalog(
        fingerprint=catalog_fingerprint(config), entries=tuple(entries), problems=tuple(_config_problems(config, entries))
    )
    save_catalog(config, catalog)
    return BuildReport(catalog, compiled)


def _entry(config: Config, file: str, previous: Entry | None) -> tuple[Entry, bool]:
    path = config.tools_dir / file
    stem_name = file.split(".")[0].replace("-", "_")
    stat = file_stat(path)
    if stat is None or not path.is_file():
        existing = sorted(os.listdir(config.tools_dir)) if config.tools_dir.is_dir() else []
        problem = f"{config.path}: visible tool {file!r} not found in {config.tools_dir}{did_you_mean(file, existing)}"
        return Entry(file=file, name=stem_name, stat=None, sha256=None, declaration=None, problems=(problem,)), False
    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    if previous is not None and previous.sha256 == sha:
        return Entry(**{**previous.__dict__, "stat": stat}), False
    from toolexec.compilers import compile_source  # only here: a fresh catalog never loads tree-sitter

    try:
        declaration = compile_source(data.decode("utf-8"), str(path))
    except UnicodeDecodeError as exc:
        problem = f"{path}:1:1: the file is not UTF-8 text ({exc.reason} at byte {exc.start})"
        return Entry(file=file, name=stem_name, stat=stat, sha256=sha, declaration=None, problems=(problem,)), True
    except CompileError as exc:
        return Entry(file=file, name=stem_name, stat=stat, sha256=sha, declaration=None, problems=(str(exc),)), True
    entry = Entry(file=file, name=declaration.name, stat=stat, sha256=sha, declaration=declaration, warnings=declaration.warnings)
    return entry, True


def _check_duplicates(entries: list[Entry]) -> Iterator[Entry]:
    owners: dict[str, Entry] = {}
    for entry in entries:
        first = owners.get(entry.name)
        if entry.declaration is not None and first is not None:
            problem = f"{entry.declaration.source}:1:1: tool name {entry.name!r} is already used by {first.file}; rename one of the files"
            yield Entry(**{**entry.__dict__, "declaration": None, "problems": (problem,)})
            continue
        if entry.declaration is not None:
            owners[entry.name] = entry
        yield entry


def _config_problems(config: Config, entries: list[Entry]) -> Iterator[str]:
    names = [e.name for e in entries]
    for alias, tools in config.mapping_tools.items():
        for tool in tools:
            if tool not in names:
                yield f"{config.path}: mapping_tools.{alias} names unknown tool {tool!r}{did_you_mean(tool, names)}"
    for name in config.enabled_tools or ():
        if name not in names and name not in config.mapping_tools:
            yield f"{config.path}: enabled_tools names unknown tool {name!r}{did_you_mean(name, [*names, *config.mapping_tools])}"
