"""The catalog: every visible tool's declaration and provenance, kept next to functions.json.

On disk it is an index (``catalog.json``: one small row per visible file, with its stat,
hash and problems) plus one record per declaration (see :mod:`toolexec.state`), so that a
call reads the index and the called tool's record only: a catalog of a thousand tools costs
a call what one of four does. Records are named by a digest of their content, so a rebuild
writes only what changed. Loading and checking freshness imports no parser or compiler. An
entry whose file no longer builds keeps its ``last_good`` declaration: the tool stays
callable as it was, and the build reports the error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from toolexec.config import Config
from toolexec.errors import BuildError, NotEnabled, StateUnavailable, ToolBroken, UnknownTool, did_you_mean
from toolexec.records import ToolDeclaration
from toolexec.state import State, write_json_atomic
from toolexec.version import __version__

if TYPE_CHECKING:
    from toolexec.validation import Validator

Stat = tuple[int, int, int, int]  # (mtime_ns, size, inode, ctime_ns)
FORMAT = 2  # of catalog.json; another value means rebuild
# A record no index names is removed by a later build once it is this old (a concurrent
# build may have just written it for its own index).
STALE_RECORD_SECONDS = 600


class DamagedCatalog(Exception):
    """A record the index names is missing or unreadable: the catalog is rebuilt."""


Loaded = tuple[ToolDeclaration | None, ToolDeclaration | None, str | None]  # declaration, last_good, validator code


class Entry:
    """One visible file: its stat and hash, and either a declaration or its problems.

    An entry read from the index loads its declarations from their record on first use.
    """

    __slots__ = ("_loaded", "_loader", "file", "name", "problems", "record", "sha256", "stat", "warnings")

    def __init__(
        self,
        *,
        file: str,
        name: str,
        stat: Stat | None,  # None when the file is missing
        sha256: str | None,
        declaration: ToolDeclaration | None = None,
        problems: tuple[str, ...] = (),
        warnings: tuple[str, ...] = (),
        # The declaration of the last version that built, kept while the file is broken.
        last_good: ToolDeclaration | None = None,
        record: str | None = None,
        loader: Callable[[str], Loaded] | None = None,
    ) -> None:
        self.file, self.name, self.stat, self.sha256 = file, name, stat, sha256
        self.problems, self.warnings = tuple(problems), tuple(warnings)
        self.record = record
        self._loader = loader
        self._loaded: Loaded | None = None if loader is not None and record is not None else (declaration, last_good, None)

    def _load(self) -> Loaded:
        if self._loaded is None:
            assert self._loader is not None and self.record is not None
            self._loaded = self._loader(self.record)
        return self._loaded

    @property
    def declaration(self) -> ToolDeclaration | None:
        """The declaration of the file as it is, or None when it does not build."""
        return self._load()[0]

    @property
    def last_good(self) -> ToolDeclaration | None:
        """The declaration of the last version that built, kept while the file is broken."""
        return self._load()[1]

    @property
    def validator_code(self) -> str | None:
        """The generated code of the serving declaration's argument validator, when the record holds it."""
        return self._load()[2]

    @property
    def serving(self) -> ToolDeclaration | None:
        """What a call of this tool runs: the current declaration, else the last good one."""
        return self.declaration or self.last_good

    @property
    def serves(self) -> bool:
        """Whether a call of this name runs this entry (known without loading its record)."""
        if self._loaded is None:
            return self.record is not None
        return self.serving is not None

    @property
    def loaded(self) -> bool:
        """Whether the declarations are in memory (a fresh compile, or a record already read)."""
        return self._loaded is not None

    def replace(self, **changes: Any) -> Entry:
        """A copy with ``changes``; declarations are carried over without being loaded."""
        fields = {k: getattr(self, k) for k in ("file", "name", "stat", "sha256", "problems", "warnings")}
        if not {"declaration", "last_good"} & changes.keys():
            fields.update(record=self.record, loader=self._loader)
            if self._loaded is not None:
                fields.update(declaration=self._loaded[0], last_good=self._loaded[1])
        else:
            fields.update(declaration=self.declaration, last_good=self.last_good)
        entry = Entry(**{**fields, **changes})
        if self._loaded is not None and "declaration" not in changes and "last_good" not in changes:
            entry._loaded = self._loaded
        return entry

    def record_data(self) -> dict[str, Any] | None:
        """What the entry's record holds (None when there is nothing to serve)."""
        declaration, last_good = self.declaration, self.last_good
        if declaration is None and last_good is None:
            return None
        return {
            "declaration": declaration.to_dict() if declaration else None,
            "last_good": last_good.to_dict() if last_good else None,
        }

    def index_data(self) -> dict[str, Any]:
        """The entry's row in catalog.json."""
        return {
            "file": self.file,
            "name": self.name,
            "stat": list(self.stat) if self.stat else None,
            "sha256": self.sha256,
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "record": self.record,
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything about the entry, declarations included (for tools that inspect a catalog)."""
        return {
            **self.index_data(),
            "declaration": self.declaration.to_dict() if self.declaration else None,
            "last_good": self.last_good.to_dict() if self.last_good else None,
        }

    @classmethod
    def from_index(cls, row: dict[str, Any], loader: Callable[[str], Loaded]) -> Entry:
        """The entry of one catalog.json row; its declarations are read when first used."""
        return cls(
            file=row["file"],
            name=row["name"],
            stat=tuple(row["stat"]) if row.get("stat") else None,  # type: ignore[arg-type]
            sha256=row.get("sha256"),
            problems=tuple(row.get("problems", ())),
            warnings=tuple(row.get("warnings", ())),
            record=row.get("record"),
            loader=loader,
        )

    def __repr__(self) -> str:
        return f"Entry(file={self.file!r}, name={self.name!r}, record={self.record!r}, problems={self.problems!r})"


def record_key(data: dict[str, Any]) -> str:
    """The name of a record: a digest of its content (so an unchanged tool keeps its record)."""
    text = json.dumps([__version__, data], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


class Diff(NamedTuple):
    """How one catalog's tools differ from another's, by name, judged by what a model sees."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class Tools(Mapping[str, ToolDeclaration]):
    """The served declarations by name, in visible_tools order; each is read from its record when first used."""

    def __init__(self, entries: dict[str, Entry]) -> None:
        self._entries = entries

    def __getitem__(self, name: str) -> ToolDeclaration:
        serving = self._entries[name].serving
        assert serving is not None
        return serving

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


class Catalog:
    """Every visible tool of one config, in ``visible_tools`` order."""

    def __init__(self, *, fingerprint: dict[str, Any], entries: tuple[Entry, ...], state: State | None = None) -> None:
        self.fingerprint = fingerprint
        self.entries = tuple(entries)
        self.state = state  # where records live (None: an unsaved catalog)
        serving: dict[str, Entry] = {}
        for entry in self.entries:  # a file whose name another file took (reported by the build) is never served
            if entry.serves:
                serving[entry.name] = entry
        self._serving = serving
        self.tools: Mapping[str, ToolDeclaration] = Tools(serving)
        self._validators: dict[str, Validator] = {}

    def entry(self, name: str) -> Entry | None:
        """The entry serving ``name``, if any."""
        return self._serving.get(name)

    def get(self, name: str, config: Config | None = None) -> ToolDeclaration:
        """The declaration a call of ``name`` runs; with ``config``, an unknown name is explained."""
        if name in self.tools:
            return self.tools[name]
        broken = next((e for e in self.entries if e.name == name and e.problems), None)
        if broken is not None:
            missing = str(config.tools_dir / broken.file) if config is not None and broken.stat is None else None
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
        """The compiled argument validator of a tool, made once per catalog.

        Its code is generated once per declaration and kept in the tool's record, so a later
        process only executes it (no schema compiler is imported).
        """
        check = self._validators.get(name)
        if check is None:
            from toolexec.validation import validator_code, validator_from_code

            entry, parameters = self._serving[name], self.tools[name].parameters
            code = entry.validator_code
            if code is None:
                code = validator_code(parameters)
                self._keep_validator(entry, code)
            check = self._validators[name] = validator_from_code(parameters, code)
        return check

    def _keep_validator(self, entry: Entry, code: str) -> None:
        """Add the validator's code to the entry's record (an optimisation: failing to write is fine)."""
        data = entry.record_data()
        if self.state is None or entry.record is None or data is None:
            return
        with contextlib.suppress(OSError):
            write_json_atomic(self.state.record_file(entry.record), {**data, "validator": code})

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

    def is_fresh(self, config: Config, *, tool: str | None = None) -> bool:
        """Whether nothing the catalog was built from changed (config fingerprint, every file's stat).

        With ``tool``, only what a call of it depends on is checked: the config and the files
        holding that name (every file when no entry has it, since a new one may now).
        """
        if self.fingerprint != catalog_fingerprint(config):
            return False
        entries = [e for e in self.entries if e.name == tool] if tool is not None else []
        tools_dir = str(config.tools_dir)
        return all(file_stat(os.path.join(tools_dir, e.file)) == e.stat for e in entries or self.entries)

    def diff(self, other: Catalog) -> Diff:
        """What changed from ``other`` (the older catalog) to this one."""
        old, new = other._serving, self._serving

        def changed(name: str) -> bool:
            before, after = old[name], new[name]
            if before.record is not None and before.record == after.record:
                return False  # same record, same declarations: nothing to load
            return before.serving.fingerprint() != after.serving.fingerprint()  # type: ignore[union-attr]

        return Diff(
            added=tuple(n for n in new if n not in old),
            removed=tuple(n for n in old if n not in new),
            changed=tuple(n for n in new if n in old and changed(n)),
        )

    def to_dict(self) -> dict[str, Any]:
        """Everything in the catalog, declarations included (loads every record)."""
        return {"fingerprint": self.fingerprint, "entries": [e.to_dict() for e in self.entries]}


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
    return {"version": __version__, **config.fingerprint()}


def file_stat(path: str | os.PathLike[str]) -> Stat | None:
    """What says a file changed without reading it: mtime, size, inode and ctime (so a file replaced by
    one of the same size and mtime, as ``cp -p`` or ``tar x`` do, is noticed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def load_catalog(config: Config) -> Catalog | None:
    """The stored catalog, or None when there is none or it cannot be read (then it is rebuilt).

    Only the index is read here; each declaration is read from its record when first used.
    """
    state = config.state
    try:
        with open(state.catalog_file, encoding="utf-8") as handle:
            data = json.load(handle)
        if data.get("format") != FORMAT:
            return None
        loader = _record_loader(state)
        entries = tuple(Entry.from_index(row, loader) for row in data["entries"])
        return Catalog(fingerprint=data["fingerprint"], entries=entries, state=state)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _record_loader(state: State) -> Callable[[str], Loaded]:
    def load(key: str) -> Loaded:
        try:
            with open(state.record_file(key), encoding="utf-8") as handle:
                data = json.load(handle)
            declaration, last_good = data.get("declaration"), data.get("last_good")
            return (
                ToolDeclaration.from_dict(declaration) if declaration else None,
                ToolDeclaration.from_dict(last_good) if last_good else None,
                data.get("validator"),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # Removed, so that the rebuild this causes writes it anew instead of trusting its name.
            with contextlib.suppress(OSError):
                state.record_file(key).unlink()
            raise DamagedCatalog(f"catalog record {key}: {exc}") from None

    return load


def save_catalog(config: Config, catalog: Catalog, previous: Catalog | None = None) -> None:
    """Write the records that are new, catalog.json, and functions.json (the declarations a model sees).

    What an unchanged tool contributes is taken from ``previous`` without reading its record.
    """
    state = config.state
    try:
        written: set[str] = set()
        for entry in catalog.entries:
            if entry.loaded and entry.record is None and (data := entry.record_data()) is not None:
                entry.record = record_key(data)
                path = state.record_file(entry.record)
                if not path.exists():
                    write_json_atomic(path, data, indent=None)
                written.add(entry.record)
        functions = _functions(catalog, previous, state)
        if functions is not None:
            write_json_atomic(state.functions_file, functions)
        rows = [e.index_data() for e in catalog.entries]
        unchanged = previous is not None and functions is None and rows == [e.index_data() for e in previous.entries]
        if not unchanged:  # one compact line: it is read on every call
            write_json_atomic(
                state.catalog_file, {"format": FORMAT, "fingerprint": catalog.fingerprint, "entries": rows}, indent=None
            )
        catalog.state = state
    except OSError as exc:
        raise StateUnavailable(str(state.root), exc.strerror or str(exc)) from None
    if not unchanged:
        _remove_stale_records(state, {e.record for e in catalog.entries if e.record} | written)


def _functions(catalog: Catalog, previous: Catalog | None, state: State) -> list[dict[str, Any]] | None:
    """functions.json's new content, or None when the stored file already says it.

    Each unchanged tool's function is taken from the previous functions.json, so a rebuild
    after one edit reads one file instead of every record.
    """
    served = [(name, entry.record) for name, entry in catalog._serving.items()]
    known: dict[str, dict[str, Any]] = {}
    if previous is not None:
        before = [(name, entry.record) for name, entry in previous._serving.items()]
        try:
            with open(state.functions_file, encoding="utf-8") as handle:
                stored = json.load(handle)
            if isinstance(stored, list) and [f.get("name") for f in stored] == [n for n, _ in before]:
                if before == served:
                    return None
                records = dict(before)
                known = {f["name"]: f for f in stored if records.get(f["name"]) is not None}
        except (OSError, ValueError, AttributeError):
            known = {}
    functions = []
    for name, record in served:
        old = previous._serving.get(name) if previous is not None else None
        reuse = name in known and old is not None and old.record == record
        functions.append(known[name] if reuse else catalog.tools[name].to_function())
    return functions


def _remove_stale_records(state: State, keep: set[str]) -> None:
    """Remove records no index names any more, once they are old enough not to be a concurrent build's."""
    cutoff = time.time() - STALE_RECORD_SECONDS
    try:
        with os.scandir(state.records_dir) as found:
            for item in found:
                key = item.name.removesuffix(".json")
                if key not in keep and item.name.endswith(".json"):
                    try:
                        if item.stat().st_mtime < cutoff:
                            os.unlink(item.path)
                    except OSError:
                        pass
    except OSError:
        pass


__all__ = [
    "BuildError",
    "Catalog",
    "DamagedCatalog",
    "Diff",
    "Entry",
    "catalog_fingerprint",
    "file_stat",
    "load_catalog",
    "save_catalog",
]
