"""The catalog on disk: an index (``catalog.json``) and a pack of records, apart from the catalog in memory.

``catalog.json`` is one small row per visible file (its stat, hash, problems and where its record
is), after a first line naming where each row is, so that a call parses one row however many tools
there are. Records (declaration, last good declaration, and the source text each was compiled from)
are JSON lines in a pack under the state's private ``catalog/`` (see :mod:`toolexec.state`), named by a digest of their content; the
pack is only appended to (concurrent builds take turns under ``flock``), so a rebuild writes only
what changed and a reader holding an older index still finds its records; once dead records make up
most of it, it is rewritten with the live ones. ``functions.json`` (what a model sees) is written
beside the index when it changed. Loading imports no parser or compiler.
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
import stat
import time

from toolexec.catalog import Catalog, DamagedCatalog, Entry, IndexReplaced, Loaded, Slice, Stat, Stored, Tally, stats_digest
from toolexec.config import Config
from toolexec.errors import StateUnavailable
from toolexec.records import ToolDeclaration
from toolexec.recordtype import record, replace
from toolexec.state import State, sha256_hex, write_text_atomic
from toolexec.version import __version__

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["FORMAT", "StoredRows", "load_catalog", "record_text", "save_catalog"]

FORMAT = 8  # of catalog.json; another value means rebuild (5: records keep the compiled source text; 6: and the validator;
# 7: the names and row offsets are two strings, searched rather than parsed; 8: the first line holds a digest of the
# files' stats and the entries' counts, so that a no-change check and build read no row)
# A pack or validator no index names is removed by a later build once it is this old (a
# concurrent build or reader may still use it).
STALE_RECORD_SECONDS = 600
# A pack is rewritten with only the live records once dead ones make up most of it.
COMPACT_SLACK_BYTES = 1 << 16


OFFSET_DIGITS = 8  # each row's start in the index's body, in hex: an index of up to 4 GiB


@record(kw_only=False)
class StoredRows:
    """An index as read from disk: a row is found without reading the others, and parsed only when its entry is wanted.

    ``names`` holds each row's tool name as a JSON string, one per line in row order; ``offsets`` where each row
    starts in the index's body (and where the last ends), :data:`OFFSET_DIGITS` hex digits each; ``read`` returns
    ``length`` bytes of the body from ``offset``. Finding a name is a search of one string and reading its row one
    ``pread``, so a call costs the same whatever the number of tools.
    """

    names: str
    offsets: str
    read: Callable[[int, int], bytes]
    loader: Callable[[str, Slice], Loaded]

    def __len__(self) -> int:
        return len(self.offsets) // OFFSET_DIGITS - 1

    def at(self, number: int) -> Slice:
        """Where row ``number`` is in the body (offset, length); IndexError past the last."""
        if not 0 <= number < len(self):
            raise IndexError(f"no row {number}")
        start, end = (int(self.offsets[i * OFFSET_DIGITS : (i + 1) * OFFSET_DIGITS], 16) for i in (number, number + 1))
        return start, end - start - 1

    def row(self, number: int) -> bytes:
        """The text of row ``number``."""
        return self.read(*self.at(number))

    def body(self) -> bytes:
        """Every row, one per line."""
        return self.read(0, int(self.offsets[-OFFSET_DIGITS:], 16)) if len(self) else b""

    def numbers(self, name: str) -> list[int]:
        """The rows holding tool ``name`` (more than one when files clash), in order."""
        needle, found, at = f"\n{json.dumps(name)}\n", [], 0
        while (at := self.names.find(needle, at)) >= 0:
            found.append(self.names.count("\n", 0, at))
            at += 1
        return found

    def all_names(self) -> list[str]:
        """Every row's tool name, in order, without reading a row."""
        return json.loads("[" + self.names.strip("\n").replace("\n", ",") + "]") if len(self) else []


def record_text(data: dict[str, Any]) -> tuple[str, str]:
    """A record's JSON and its name: a digest of that content (so an unchanged tool keeps its record)."""
    # not sort_keys: property order is declaration order, which models, messages and MCP clients see
    text = json.dumps(data, ensure_ascii=False)
    return text, record_key(text.encode("utf-8", "surrogateescape"))


def record_key(data: bytes) -> str:
    """The name of the record whose JSON is ``data``: what it is written under, and checked against when read."""
    return sha256_hex(f"{__version__}\n".encode() + data)[:32]


def load_catalog(config: Config) -> Catalog | None:
    """The stored catalog, or None when there is none or it cannot be read (then it is rebuilt).

    Only the index's first line (names and where each row is) is read and parsed here; a row is read
    and parsed when its entry is wanted, and a declaration read from the pack when it is first used.
    """
    state = config.state
    path = str(state.catalog_file)
    try:
        primed = _primed.pop(path, None)
        if primed is not None and primed[0] == _file_key(path):
            _, head, read, identity = primed
        else:
            head_text, read, identity = _read_head(path)
            head = json.loads(head_text)
        if head.get("format") != FORMAT:
            return None
        pack, tally, functions = head.get("pack"), head.get("tally"), head.get("functions")
        names, offsets, files = head["names"], head["offsets"], head["files"]
        if not isinstance(names, str) or not isinstance(offsets, str) or not isinstance(head["fingerprint"], dict):
            return None  # a damaged header: rebuilt
        if len(offsets) % OFFSET_DIGITS or names.count("\n") != len(offsets) // OFFSET_DIGITS:
            return None
        if not isinstance(files, str) or not isinstance(tally, list) or not all(isinstance(n, int) for n in tally):
            return None
        if functions is not None and not (isinstance(functions, list) and all(isinstance(n, int) for n in functions)):
            return None
        rows = StoredRows(names, offsets, read, _record_loader(state, pack))
        stored = Stored(identity=identity, files=files, tally=Tally(*tally), functions=tuple(functions or ()) or None)
        return Catalog(fingerprint=head["fingerprint"], state=state, pack=pack, rows=rows, stored=stored)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


# What a ``toolexec serve`` child waiting for its call read ahead (:func:`prime`): the index's first line, parsed,
# and its reader, taken by the call's :func:`load_catalog` once (and only while catalog.json is the file read).
_primed: dict[str, tuple[tuple[int, ...], Any, Callable[[int, int], bytes], tuple[int, int, int]]] = {}


def prime(config: Config) -> None:
    """Read ``config``'s index (its first line: ~0.4 ms of JSON with 10,000 tools) ahead of a call that will likely
    read it; the next :func:`load_catalog` of that unchanged file takes it, once. For a process that makes one call
    (``toolexec serve``'s child, while it waits): a long-lived one reads anew each time."""
    path = str(config.state.catalog_file)
    key = _file_key(path)  # (before the read: a file replaced meanwhile is another key than the call finds)
    head_text, read, identity = _read_head(path)
    _primed[path] = (key, json.loads(head_text), read, identity)


def _file_key(path: str) -> tuple[int, ...]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


HEAD_CHUNK = 1 << 16  # bytes read at a time until the first line ends: the whole index of a few dozen tools


def _read_head(path: str) -> tuple[bytes, Callable[[int, int], bytes], tuple[int, int, int]]:
    """The index's first line, a reader of its body (offset, length), and the file's identity (inode, size, mtime).

    Only the first line is read; the body is read a slice at a time from the same file (the reader refuses with
    :class:`DamagedCatalog` once catalog.json is another file, as after a concurrent build: the catalog is then
    read anew), unless the first read took it whole.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO put there is never waited on
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("catalog.json is not a regular file")
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        chunks, end, seen = [], -1, 0
        while end < 0:
            chunk = os.read(fd, HEAD_CHUNK)
            if not chunk:
                raise ValueError("catalog.json has no first line")
            end = chunk.find(b"\n")
            chunks.append(chunk)
            seen += len(chunk)
        text = b"".join(chunks)
        end += seen - len(chunks[-1])
    finally:
        os.close(fd)
    base = end + 1
    if seen >= identity[1]:  # read whole: the body is in memory
        body = text[base:]
        return text[:end], lambda offset, length: body[offset : offset + length], identity

    def read(offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or base + offset + length > identity[1]:  # offsets from a damaged first line
            raise DamagedCatalog(f"catalog.json has no bytes {offset}..{offset + length} past its first line")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                st = os.fstat(fd)
                same = (st.st_ino, st.st_size, st.st_mtime_ns) == identity
                data = os.pread(fd, length, base + offset) if same else b""
            finally:
                os.close(fd)
        except OSError as exc:
            raise DamagedCatalog(f"catalog.json: {exc.strerror or exc}") from None
        if not same:
            raise IndexReplaced("catalog.json was replaced while it was read")
        if len(data) != length:
            raise DamagedCatalog("catalog.json is shorter than its first line says")
        return data

    return text[:end], read, identity


def _index_text(catalog: Catalog, stored: Stored) -> str:
    """catalog.json: a first line naming where each row is and what a no-change check compares, then one row per
    line (ASCII, so a character offset is a byte offset)."""
    rows = [json.dumps(e.index_data()) for e in catalog.entries]
    names = "".join(f"\n{json.dumps(entry.name)}" for entry in catalog.entries) + "\n"
    starts, at = [], 0
    for row in rows:
        starts.append(at)
        at += len(row) + 1
    offsets = "".join(f"{start:0{OFFSET_DIGITS}x}" for start in [*starts, at])
    head = {
        **{"format": FORMAT, "fingerprint": catalog.fingerprint, "pack": catalog.pack, "names": names, "offsets": offsets},
        **{
            "files": stored.files,
            "tally": [stored.tally.served, stored.tally.failed, stored.tally.noted],
            "functions": stored.functions,
        },
    }
    return "\n".join([json.dumps(head), *rows]) + "\n"


def _stored(config: Config, catalog: Catalog, functions: tuple[int, ...] | None) -> Stored:
    """What the index of ``catalog`` says of itself (its identity is filled in once it is written)."""
    entries = catalog.entries
    by_file: dict[str, Stat | None] = {}
    for entry in entries:
        by_file.setdefault(entry.file, entry.stat)
    tally = Tally(
        served=len({e.name for e in entries if e.serves}),
        failed=sum(1 for e in entries if e.problems),
        noted=sum(1 for e in entries if e.problems or e.warnings),
    )
    files = stats_digest(by_file.get(file) for file in config.visible_tools)
    return Stored(identity=(0, 0, 0), files=files, tally=tally, functions=functions)


def _functions_stat(state: State) -> tuple[int, ...] | None:
    """functions.json's (mtime_ns, size, inode): a no-change build trusts it while these are what the index says."""
    try:
        st = os.stat(state.functions_file)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _record_loader(state: State, pack: str | None) -> Callable[[str, Slice], Loaded]:
    def read(at: Slice) -> bytes:
        # One slice per record, even for a listing of every tool: the pack (sources and validators) is never held
        # whole in memory, and a listing reads the index alone (Catalog.listing).
        assert pack is not None
        with open(state.pack_file(pack), "rb") as handle:
            return os.pread(handle.fileno(), at[1], at[0])

    def load(key: str, at: Slice) -> Loaded:
        try:
            if pack is None:
                raise ValueError("the index names no pack")
            raw = read(at)
            if record_key(raw) != key:  # changed since it was written: what it says (code to run) is not trusted
                raise ValueError("its content does not match its digest")
            data = json.loads(raw)
            declaration, last_good = data.get("declaration"), data.get("last_good")
            code, last_good_code, validator = data.get("code"), data.get("last_good_code"), data.get("validator")
            if not all(text is None or isinstance(text, str) for text in (code, last_good_code, validator)):
                raise TypeError("the stored source and validator must be text")
            return (
                _checked(ToolDeclaration.from_dict(declaration)) if declaration else None,
                _checked(ToolDeclaration.from_dict(last_good)) if last_good else None,
                code,
                last_good_code,
                validator,
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # The pack goes, so that the rebuild this causes compiles anew instead of trusting it.
            if pack is not None:
                with contextlib.suppress(OSError):
                    state.pack_file(pack).unlink()
            raise DamagedCatalog(f"catalog record {key}: {exc}") from None

    return load


def _checked(declaration: ToolDeclaration) -> ToolDeclaration:
    """A stored declaration whose schema has the shape the engine relies on; TypeError otherwise."""
    parameters = declaration.parameters
    if not isinstance(parameters, dict) or not isinstance(parameters.get("properties", {}), dict):
        raise TypeError("the stored parameters are not an object schema")
    if not isinstance(declaration.name, str) or not isinstance(declaration.source, str):
        raise TypeError("the stored name and source must be text")
    return declaration


def save_catalog(config: Config, catalog: Catalog, previous: Catalog | None = None) -> None:
    """Append the new records to the pack, then write catalog.json and functions.json (the declarations a
    model sees) when they changed. What an unchanged tool contributes is taken from ``previous`` without
    reading its record.
    """
    state = config.state
    fresh = []  # (entry, its record's JSON line)
    for entry in catalog.entries:
        if entry.loaded and entry.record is None and (data := entry.record_data()) is not None:
            text, entry.record = record_text(data)
            fresh.append((entry, text.encode("utf-8", "surrogateescape") + b"\n"))
    try:
        catalog.pack = _append_records(state, catalog, previous, fresh)
        functions = _functions(catalog, previous, state)
        if functions is not None:
            written = write_text_atomic(state.functions_file, _json_lines(functions))
            functions_stat: tuple[int, ...] | None = (written.st_mtime_ns, written.st_size, written.st_ino)
        else:
            functions_stat = _functions_stat(state)
        stored = _stored(config, catalog, functions_stat)
        unchanged = (
            previous is not None
            and previous.stored is not None
            and functions is None
            and catalog.pack == previous.pack
            and (stored.files, stored.tally, stored.functions)
            == (previous.stored.files, previous.stored.tally, previous.stored.functions)
            and _same_rows(catalog.entries, previous.entries)
        )
        if unchanged:
            catalog.stored = previous.stored  # type: ignore[union-attr]  # (not None: see above)
        else:
            written = write_text_atomic(state.catalog_file, _index_text(catalog, stored))
            catalog.stored = replace(stored, identity=(written.st_ino, written.st_size, written.st_mtime_ns))
        catalog.state = state
    except IsADirectoryError as exc:
        name = os.path.basename(exc.filename2 or exc.filename or "catalog.json")
        raise StateUnavailable(str(state.root), f"{name} there is a directory, not a file") from None
    except OSError as exc:
        raise StateUnavailable(str(state.root), exc.strerror or str(exc)) from None
    if not unchanged:
        _remove_stale(state, catalog)


def _same_rows(entries: tuple[Entry, ...], before: tuple[Entry, ...]) -> bool:
    """Whether the index rows of ``entries`` are those of ``before``: at once when a build reused every entry (a
    no-change build of 10,000 tools makes no row), else row by row."""
    if len(entries) == len(before) and all(map(operator.is_, entries, before)):
        return True
    return [e.index_data() for e in entries] == [e.index_data() for e in before]


def _append_records(state: State, catalog: Catalog, previous: Catalog | None, fresh: list[tuple[Entry, bytes]]) -> str | None:
    """The pack holding every record of ``catalog``: the previous one with ``fresh`` appended, or a new
    one (none yet, lost, or mostly dead records)."""
    import fcntl

    pack = previous.pack if previous is not None and previous.records_present() else None
    kept = [e for e in catalog.entries if e.record is not None and e.at is not None and not any(e is f for f, _ in fresh)]
    if not fresh and (pack is not None or not kept):
        return pack  # nothing to write (no tool built: no pack at all)
    if pack is not None:
        adding = sum(len(line) for _, line in fresh)
        live = sum(e.at[1] for e in kept if e.at) + adding
        if state.pack_file(pack).stat().st_size + adding > 2 * live + COMPACT_SLACK_BYTES:  # as it would be after
            old = state.pack_file(pack).read_bytes()
            for entry in kept:  # loaded first, so that no reader of these entries looks at moved slices
                entry.declaration  # noqa: B018
            fresh = [(e, old[e.at[0] : e.at[0] + e.at[1]] + b"\n") for e in kept if e.at] + fresh
            pack = None
    elif kept:  # the previous pack is gone: its records cannot be copied, so they must be fresh
        raise DamagedCatalog("the records of unchanged tools are lost")
    if pack is None:
        pack = os.urandom(8).hex()
    state.private_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    state.records_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state.pack_file(pack), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # concurrent builds append one after the other
        offset, chunks = os.fstat(fd).st_size, []
        for entry, line in fresh:
            entry.at = (offset, len(line) - 1)
            offset += len(line)
            chunks.append(line)
        data = memoryview(b"".join(chunks))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)  # releases the lock
    return pack


def _json_lines(items: list[Any]) -> str:
    """A JSON array with one item per line: readable, and written by the C encoder."""
    return "[\n" + ",\n".join(json.dumps(item, ensure_ascii=False) for item in items) + "\n]\n"


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
    for name, written in served:
        old = previous._serving.get(name) if previous is not None else None
        reuse = name in known and old is not None and old.record == written
        functions.append(known[name] if reuse else catalog.tools[name].to_function())
    return functions


def _remove_stale(state: State, catalog: Catalog) -> None:
    """Remove packs no index names any more, once they are old enough not to be in use."""
    cutoff = time.time() - STALE_RECORD_SECONDS
    live = {f"{catalog.pack}.pack"}
    with contextlib.suppress(OSError), os.scandir(state.records_dir) as found:
        for item in found:
            if item.name not in live:
                with contextlib.suppress(OSError):
                    if item.stat().st_mtime < cutoff:
                        os.unlink(item.path)
