"""The catalog in memory: every visible tool's declaration and provenance (on disk: :mod:`toolexec.catalog_store`).

A catalog read from disk parses an entry's index row when the entry is first wanted and reads its
record (one slice of the pack) when its declaration is first used: a call of one tool costs the same
with a thousand tools. Checking freshness imports no parser or compiler. An entry whose file no
longer builds keeps its ``last_good`` declaration and the source text it was compiled from: the tool
stays callable as it was (byte for byte), and the build reports the error.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Mapping

from toolexec.config import Config
from toolexec.errors import BuildError, NotEnabled, ToolBroken, UnknownTool, did_you_mean
from toolexec.records import ToolDeclaration
from toolexec.recordtype import record
from toolexec.state import State, sha256_hex
from toolexec.version import __version__

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import Any

    from toolexec.catalog_store import StoredRows
    from toolexec.validation import Validator

Stat = tuple[int, int, int, int]  # (mtime_ns, size, inode, ctime_ns)


class DamagedCatalog(Exception):
    """A record the index names is missing or unreadable: the catalog is rebuilt."""


class IndexReplaced(DamagedCatalog):
    """catalog.json is another file than the one whose first line was read (another process's build): read it anew."""


# declaration, last_good, and the source text each was compiled from
# declaration, last_good, their source texts, and the generated validator of the one served
Loaded = tuple[ToolDeclaration | None, ToolDeclaration | None, str | None, str | None, str | None]
Slice = tuple[int, int]  # (offset, length) of a record in the pack


@record(kw_only=False)
class Tally:
    """Counts of a catalog's entries, kept in its index so that a no-change build reports without reading a row."""

    served: int  # entries a call of their name runs
    failed: int  # entries whose file does not build
    noted: int  # entries with problems or warnings (0: a build has nothing to print)


@record(kw_only=False)
class Stored:
    """What a catalog's index says about the index itself, read from its first line."""

    identity: tuple[int, int, int]  # catalog.json's (inode, size, mtime_ns) as read: a new index is a new catalog
    files: str  # files_digest of the visible files as they were built (see Catalog.is_fresh)
    tally: Tally
    functions: tuple[int, ...] | None  # functions.json's (mtime_ns, size, inode) as written, None when unknown


class Entry:
    """One visible file: its stat and hash, and either a declaration or its problems.

    An entry read from the index loads its declarations from their record on first use.
    """

    __slots__ = ("_listing", "_loaded", "_loader", "at", "file", "name", "problems", "record", "sha256", "stat", "warnings")

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
        # The source text each declaration was compiled from: what a call runs, byte for byte.
        code: str | None = None,
        last_good_code: str | None = None,
        # The generated argument validator (Python source) of the served declaration; made when the record is written.
        validator: str | None = None,
        record: str | None = None,
        at: Slice | None = None,
        loader: Callable[[str, Slice], Loaded] | None = None,
        # What `toolexec list` shows of the served declaration (its index row keeps it: a listing reads no record).
        listing: dict[str, Any] | None = None,
    ) -> None:
        self.file, self.name, self.stat, self.sha256 = file, name, stat, sha256
        self._listing = listing
        self.problems, self.warnings = tuple(problems), tuple(warnings)
        self.record, self.at = record, at
        self._loader = loader
        lazy = loader is not None and record is not None and at is not None
        self._loaded: Loaded | None = None if lazy else (declaration, last_good, code, last_good_code, validator)

    def _load(self) -> Loaded:
        if self._loaded is None:
            assert self._loader is not None and self.record is not None and self.at is not None
            self._loaded = self._loader(self.record, self.at)
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
    def code(self) -> str | None:
        """The source text :attr:`declaration` was compiled from (None when not kept, as for a registered tool)."""
        return self._load()[2]

    @property
    def last_good_code(self) -> str | None:
        """The source text :attr:`last_good` was compiled from."""
        return self._load()[3]

    @property
    def validator(self) -> str | None:
        """The generated validator code kept in the record (None before the record is written, or for a registered
        tool): executed only as read from a record whose digest matched."""
        return self._load()[4]

    @property
    def serving(self) -> ToolDeclaration | None:
        """What a call of this tool runs: the current declaration, else the last good one."""
        return self.declaration or self.last_good

    @property
    def serving_code(self) -> str | None:
        """The source text of :attr:`serving`: a call runs exactly these bytes, whatever the file holds now."""
        loaded = self._load()
        return loaded[2] if loaded[0] is not None else loaded[3]

    @property
    def listing(self) -> dict[str, Any] | None:
        """What ``toolexec list`` shows of the served declaration (:func:`listing_of`), None when nothing serves; from
        the index row when it holds it, so listing every tool reads no record."""
        if self._listing is None and self.serves:
            serving = self.serving
            self._listing = listing_of(serving) if serving is not None else None
        return self._listing

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
        loaded_fields = {"declaration", "last_good", "code", "last_good_code", "validator"}
        if not loaded_fields & changes.keys():
            fields.update(record=self.record, at=self.at, loader=self._loader, listing=self._listing)
            if self._loaded is not None:
                fields.update(zip(("declaration", "last_good", "code", "last_good_code", "validator"), self._loaded, strict=True))
        else:
            fields.update(
                declaration=self.declaration, last_good=self.last_good, code=self.code, last_good_code=self.last_good_code
            )
        entry = Entry(**{**fields, **changes})
        if self._loaded is not None and not loaded_fields & changes.keys():
            entry._loaded = self._loaded
        return entry

    def record_data(self) -> dict[str, Any] | None:
        """What the entry's record holds (None when there is nothing to serve)."""
        declaration, last_good = self.declaration, self.last_good
        if declaration is None and last_good is None:
            return None
        from toolexec.validation import validator_code  # only a build writes records

        served = declaration or last_good
        assert served is not None
        return {
            "declaration": declaration.to_dict() if declaration else None,
            "last_good": last_good.to_dict() if last_good else None,
            "code": self.code if declaration else None,
            "last_good_code": self.last_good_code if last_good else None,
            "validator": self.validator if self.validator is not None else validator_code(served.parameters),
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
            "at": list(self.at) if self.at else None,
            "list": self.listing,
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything about the entry, declarations included (for tools that inspect a catalog)."""
        return {
            **self.index_data(),
            "declaration": self.declaration.to_dict() if self.declaration else None,
            "last_good": self.last_good.to_dict() if self.last_good else None,
        }

    @classmethod
    def from_index(cls, row: dict[str, Any], loader: Callable[[str, Slice], Loaded]) -> Entry:
        """The entry of one catalog.json row; its declarations are read when first used.

        The file is untrusted (hand-edited, half-written by an old version): a row of the wrong shape
        raises TypeError, which the catalog turns into a rebuild.
        """
        stat, at = row.get("stat"), row.get("at")
        if not isinstance(row["file"], str) or not isinstance(row["name"], str):
            raise TypeError("file and name must be text")
        if stat is not None and not (isinstance(stat, list) and all(isinstance(n, int) for n in stat)):
            raise TypeError(f"stat must be a list of numbers, got {stat!r:.40}")
        if at is not None and not (isinstance(at, list) and len(at) == 2 and all(isinstance(n, int) for n in at)):
            raise TypeError(f"at must be [offset, length], got {at!r:.40}")
        listing = row.get("list")
        if listing is not None and not (isinstance(listing, dict) and listing.keys() >= _LISTED):
            raise TypeError(f"list must be the listing of the tool, got {listing!r:.40}")
        return cls(
            file=row["file"],
            name=row["name"],
            stat=tuple(row["stat"]) if row.get("stat") else None,  # type: ignore[arg-type]
            sha256=row.get("sha256"),
            problems=tuple(row.get("problems", ())),
            warnings=tuple(row.get("warnings", ())),
            record=row.get("record"),
            at=tuple(row["at"]) if row.get("at") else None,  # type: ignore[arg-type]
            loader=loader,
            listing=listing,
        )

    def __repr__(self) -> str:
        return f"Entry(file={self.file!r}, name={self.name!r}, record={self.record!r}, problems={self.problems!r})"

    def _key(self) -> tuple[Any, ...]:
        return (
            *(self.file, self.name, self.stat, self.sha256, self.problems, self.warnings),
            *(self.declaration, self.last_good, self.code, self.last_good_code),
        )

    def __eq__(self, other: object) -> bool:
        """Entries are equal when they say the same (where their records are is not compared)."""
        return isinstance(other, Entry) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]


_LISTED = frozenset({"language", "description", "title", "summary", "tags", "annotations", "source", "declares_sandbox"})


def listing_of(tool: ToolDeclaration) -> dict[str, Any]:
    """What ``toolexec list`` shows of ``tool`` (besides its name): kept in the tool's index row."""
    from toolexec.recordtype import asdict

    metadata = tool.metadata
    return {
        "language": tool.language,
        "description": tool.description,
        "title": metadata.title,
        "summary": metadata.summary,
        "tags": list(metadata.tags),
        "annotations": asdict(metadata.annotations),
        "source": tool.source,
        "declares_sandbox": metadata.sandbox is not None,  # whether `list` flags it as unconfined under sandbox: declared
    }


@record(kw_only=False)
class Diff:
    """How one catalog's tools differ from another's, by name, judged by what a model sees."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class Tools(Mapping[str, ToolDeclaration]):
    """The served declarations by name, in visible_tools order; each is read from its record when first used."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def __getitem__(self, name: str) -> ToolDeclaration:
        entry = self._catalog.entry(name)
        if entry is None:
            raise KeyError(name)
        serving = entry.serving
        assert serving is not None
        return serving

    def __iter__(self) -> Iterator[str]:
        return iter(self._catalog._serving)

    def __len__(self) -> int:
        return len(self._catalog._serving)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._catalog.entry(name) is not None


class Catalog:
    """Every visible tool of one config, in ``visible_tools`` order.

    A catalog read from disk parses the row of an entry when it is first wanted, so a call of one
    tool parses one row however many tools there are; listing or building parses them all.
    """

    def __init__(
        self,
        *,
        fingerprint: dict[str, Any],
        entries: tuple[Entry, ...] = (),
        state: State | None = None,
        pack: str | None = None,
        rows: StoredRows | None = None,
        stored: Stored | None = None,
    ) -> None:
        self.fingerprint = fingerprint
        self.stored = stored  # what its index says of itself (None: not saved yet)
        self.state = state  # where records live (None: an unsaved catalog)
        self.pack = pack  # the name of the pack holding the records
        self._rows = rows
        self._parsed: dict[int, Entry] = {}
        self._entries: tuple[Entry, ...] | None = None if rows is not None else tuple(entries)
        self._serving_map: dict[str, Entry] | None = None
        self._entry_of: dict[str, Entry | None] = {}
        self.tools: Mapping[str, ToolDeclaration] = Tools(self)
        self._validators: dict[str, Validator] = {}

    def __eq__(self, other: object) -> bool:
        """Catalogs are equal when they hold the same entries for the same fingerprint (loads every record)."""
        return isinstance(other, Catalog) and (self.fingerprint, self.entries) == (other.fingerprint, other.entries)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Catalog(pack={self.pack!r}, tools={list(self.tools)!r})"

    def _row(self, number: int) -> Entry:
        entry = self._parsed.get(number)
        if entry is None:
            assert self._rows is not None
            try:
                row = json.loads(self._rows.row(number))
                entry = self._parsed[number] = Entry.from_index(row, self._rows.loader)
            except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
                raise DamagedCatalog(f"catalog.json row {number}: {exc}") from None
        return entry

    @property
    def entries(self) -> tuple[Entry, ...]:
        """Every visible file's entry, in visible_tools order."""
        if self._entries is None:
            assert self._rows is not None
            rows = self._rows
            body = rows.body()  # one read of the index's body (a DamagedCatalog when it is another file by now)
            try:  # every row at once (one parse of a JSON array); a damaged one is found row by row
                data = json.loads(b"[" + body.rstrip(b"\n").replace(b"\n", b",") + b"]") if len(rows) else []
                if len(data) == len(rows):
                    for number, row in enumerate(data):
                        if number not in self._parsed:
                            self._parsed[number] = Entry.from_index(row, rows.loader)
            except (ValueError, KeyError, TypeError, AttributeError):
                pass
            self._entries = tuple(self._row(n) for n in range(len(rows)))
        return self._entries

    def listing(self, config: Config, *, enabled_only: bool = True) -> list[dict[str, Any]]:
        """What ``toolexec list`` shows of each served tool (the enabled ones, or every one), in visible_tools order,
        ``name`` first: from the index rows alone (no record is read)."""
        wanted = None if not enabled_only or config.enabled_tools is None else set(expand_enabled(config))
        return [
            {"name": name, **listing}
            for name, entry in self._serving.items()
            if (wanted is None or name in wanted) and (listing := entry.listing) is not None
        ]

    @property
    def _serving(self) -> dict[str, Entry]:
        """The served entries by name (a file whose name another file took is never served)."""
        if self._serving_map is None:
            self._serving_map = {entry.name: entry for entry in self.entries if entry.serves}
        return self._serving_map

    def named(self, name: str) -> list[Entry]:
        """Every entry with this tool name (more than one when files clash), without parsing the others."""
        if self._entries is None and self._rows is not None:
            return [entry for entry in map(self._row, self._rows.numbers(name)) if entry.name == name]  # (a row must hold it)
        return [e for e in self.entries if e.name == name]

    def entry(self, name: str) -> Entry | None:
        """The entry serving ``name``, if any."""
        if self._serving_map is not None:
            return self._serving_map.get(name)
        if name not in self._entry_of:  # once per name: a call looks its tool up at each step
            self._entry_of[name] = next((e for e in reversed(self.named(name)) if e.serves), None)
        return self._entry_of[name]

    def get(self, name: str, config: Config | None = None) -> ToolDeclaration:
        """The declaration a call of ``name`` runs; with ``config``, an unknown name is explained."""
        served = self.entry(name)
        if served is not None and served.serving is not None:
            return served.serving
        broken = next((e for e in self.named(name) if e.problems), None)
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
            if config.foreign and not config.enabled_given:
                where += ": " + config.enabling(name)[1].removeprefix("not enabled: ")
            raise NotEnabled(
                f"tool {name!r} is visible but not enabled ({where}); add it to enabled_tools in your config.yaml"
                + (" (`toolexec init` writes one)" if config.embedded else "")
            )
        return declaration

    def validator(self, name: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
        """The compiled argument validator of a tool, made once per catalog.

        Its code was generated when the tool's record was written and is kept in the record, so a later
        process only executes it (no schema compiler is imported); the record is read only when its digest
        matches (:mod:`toolexec.catalog_store`), and no other file's code is ever executed. A tool without a
        stored validator (a registered one, a record of an older format) gets one made in memory.
        """
        check = self._validators.get(name)
        if check is None:
            from toolexec.validation import validator_code, validator_from_code

            entry = self.entry(name)
            assert entry is not None and entry.serving is not None
            parameters = entry.serving.parameters
            stored = entry.validator
            code = stored if stored is not None else validator_code(parameters)
            check = validator_from_code(parameters, code, self.state if stored is not None else None)
            self._validators[name] = check
        return check

    def broken(self, config: Config, *, enabled_only: bool = True) -> list[dict[str, Any]]:
        """The visible files that failed to build (the enabled ones, or every one): ``name``, ``language``, ``source``
        and ``error`` (every problem)."""
        wanted = None if not enabled_only or config.enabled_tools is None else set(expand_enabled(config))
        found = [entry for entry in self.entries if entry.problems and (wanted is None or entry.name in wanted)]
        if not found:
            return []
        from toolexec.compilers import language_of  # only when something failed to build

        return [
            {
                "name": entry.name,
                "language": language_of(entry.file) or "unknown",
                "source": str(config.tools_dir / entry.file),
                "error": "\n".join(entry.problems),
            }
            for entry in found
        ]

    def records_present(self) -> bool:
        """Whether the pack the index points to is there (a cleared cache means recompiling)."""
        return self.state is not None and self.pack is not None and self.state.pack_file(self.pack).exists()

    def enabled(self, config: Config) -> list[ToolDeclaration]:
        """The tools offered to an agent, in visible_tools order."""
        if config.enabled_tools is None:
            return list(self.tools.values())
        wanted = set(expand_enabled(config))
        return [d for d in self.tools.values() if d.name in wanted]

    def problems(self, config: Config) -> list[str]:
        """Config-level problems (enabled_tools or mapping_tools naming no tool), computed from the config in use."""
        if not config.mapping_tools and not config.enabled_tools:
            return []
        names = None
        if self._entries is None and self._rows is not None:
            with contextlib.suppress(ValueError):  # a damaged first line: the rows say
                names = self._rows.all_names()
        if names is None:
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
        """Whether nothing the catalog was built from changed (config fingerprint, every visible file's stat).

        With ``tool``, only what a call of it depends on is checked: the config and the files
        holding that name (every file when no entry has it, since a new one may now). A whole check of a
        saved catalog compares one digest of the files' stats with its index's, reading no row.
        """
        fingerprint = catalog_fingerprint(config)
        if self.fingerprint != fingerprint:
            return False
        entries = self.named(tool) if tool is not None else []
        if not entries and self.stored is not None:
            from toolexec.vouch import vouched

            # a running server's word for these very files (no stat), else one stat per file
            digest = vouched(config, fingerprint.get("visible_tools"))
            return (digest or checked_digest(str(config.tools_dir), config.visible_tools)) == self.stored.files
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
    return {"version": __version__, "compilers": compilers_fingerprint(), **config.fingerprint()}


@functools.cache
def compilers_fingerprint() -> str:
    """The compilers' files (name, size, mtime): an upgraded or edited compiler means every declaration
    is rebuilt, even when the version number did not change. Stats only; nothing is read or hashed."""
    installed = os.path.join(os.path.dirname(__file__), "compilers")  # where a wheel puts them
    if os.path.isfile(os.path.join(installed, "__init__.py")):
        folders = [installed]
    else:  # a development install maps the package elsewhere
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
    return ";".join(sorted(seen))


def files_digest(tools_dir: str, files: Iterable[str], *, links: bool = True) -> str | None:
    """One digest of the :func:`file_stat` of each of ``files`` (relative to ``tools_dir``), in order: what a
    no-change check compares, so that it reads no index row. With ``links=False``, None when one of them is a
    symbolic link (whose target a watcher of the folder does not see; :mod:`toolexec.vouch`).

    This is a stat per file, not per directory: a file edited in place (an editor that writes over it, ``cp``,
    ``>>``) changes its own mtime and ctime but not its directory's, so no directory-level check can see it
    without a watcher (:func:`toolexec.filestats.stat_bytes`; a ``list`` or ``build`` takes them in a child forked at
    its start, :mod:`toolexec.early_stats`).
    """
    from toolexec.filestats import stat_bytes

    packed = stat_bytes(tools_dir, files, links=links)
    return None if packed is None else sha256_hex(packed)


def checked_digest(tools_dir: str, files: Sequence[str]) -> str | None:
    """:func:`files_digest` of ``files``, from the stats a ``list`` or ``build`` took at its start when they are of
    these very files (:mod:`toolexec.early_stats`), else taken now (and what was checked written down for the next)."""
    from toolexec import early_stats

    packed = early_stats.stats_for(tools_dir, files)
    if packed is not None:
        return sha256_hex(packed)
    early_stats.remember(tools_dir, files)
    return files_digest(tools_dir, files)


def stats_digest(stats: Iterable[Stat | None]) -> str:
    """:func:`files_digest` of files whose :func:`file_stat` were ``stats``."""
    from array import array

    times, sizes = array("q"), array("Q")
    for found in stats:
        mtime, size, inode, ctime = found if found is not None else (-1, 0, 0, -1)
        times.extend((mtime, ctime))
        sizes.extend((size, inode))
    return sha256_hex(times.tobytes() + b"\0" + sizes.tobytes())


def file_stat(path: str | os.PathLike[str]) -> Stat | None:
    """What says a file changed without reading it: mtime, size, inode and ctime (so a file replaced by
    one of the same size and mtime, as ``cp -p`` or ``tar x`` do, is noticed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


__all__ = [
    "BuildError",
    "Catalog",
    "DamagedCatalog",
    "Diff",
    "Entry",
    "IndexReplaced",
    "Stored",
    "Tally",
    "catalog_fingerprint",
    "file_stat",
    "files_digest",
    "stats_digest",
]
