"""``toolexec build``: compile every visible tool into the catalog and functions.json.

A file whose stat (mtime, size, inode, ctime) is unchanged is not even read; one whose
content hash is unchanged keeps its previous declaration; one broken tool never stops the others, and a tool whose edit broke it keeps serving
its last good version while the build reports the error.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat as stat_module
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from toolexec.catalog import Catalog, DamagedCatalog, Entry, catalog_fingerprint, file_stat
from toolexec.catalog_store import load_catalog, save_catalog
from toolexec.compilers import compile_source, file_kind
from toolexec.compilers.agent import compile_functions
from toolexec.compilers.common import stem_name
from toolexec.config import Config
from toolexec.errors import CompileError, did_you_mean
from toolexec.records import ToolDeclaration
from toolexec.state import digest

LAST_GOOD_GRACE = 600.0  # seconds a copy of a last good source no entry serves is kept (calls in flight)


@dataclass(frozen=True)
class BuildReport:
    """What a build did: the catalog it wrote, how many files it compiled, and the config it used."""

    catalog: Catalog
    compiled: int  # how many files were compiled (the rest were unchanged)
    config: Config

    @property
    def problems(self) -> list[str]:
        """Every error: config-level ones first, then each file's."""
        files = (p for e in self.catalog.entries for p in e.problems) if self._noted else ()
        found = [*self.catalog.problems(self.config), *files]
        return list(dict.fromkeys(found))  # an agent's broken tools file is the problem of each of its functions: once

    @property
    def warnings(self) -> list[str]:
        """Every warning, file by file."""
        return [w for e in self.catalog.entries for w in e.warnings] if self._noted else []

    @property
    def built(self) -> int:
        """How many tools the catalog serves."""
        stored = self.catalog.stored
        return stored.tally.served if stored is not None else len(self.catalog.tools)

    @property
    def failed(self) -> int:
        """How many visible files do not build (a broken edit may still serve its last good version)."""
        stored = self.catalog.stored
        return stored.tally.failed if stored is not None else sum(1 for e in self.catalog.entries if e.problems)

    @property
    def _noted(self) -> bool:
        """Whether any entry has a problem or a warning (known from the index without reading a row once saved)."""
        stored = self.catalog.stored
        return stored is None or stored.tally.noted > 0

    @property
    def ok(self) -> bool:
        """Whether nothing failed."""
        return not self.problems


def build(
    config: Config, *, force: bool = False, on_file: Callable[[str], None] | None = None, trust_index: bool = True
) -> BuildReport:
    """Compile what changed since the stored catalog (everything with ``force``) and write the catalog.

    ``on_file`` is told each visible file's name once it is done (a progress display). When nothing changed, the
    stored catalog is returned as it is, known from its index's first line; ``trust_index=False`` (after a damaged
    row was met) reads every row instead, so that a damaged index is rebuilt.
    """
    previous = load_catalog(config)
    if trust_index and not force and previous is not None and _unchanged(config, previous):
        _prune_last_good(config, previous)
        return BuildReport(previous, 0, config)
    same_config = previous is not None and previous.fingerprint == catalog_fingerprint(config)
    known: dict[str, list[Entry]] = {}
    try:
        # After a config change nothing is reused, but a file that no longer builds keeps its last good
        # declaration all the same: it is served while it stays visible.
        for e in previous.entries if previous is not None else ():
            known.setdefault(e.file, []).append(e)
    except DamagedCatalog:  # a damaged index: built as if there were none
        previous, same_config, known = None, False, {}
    records = previous is not None and previous.records_present()
    entries: list[Entry] = []
    compiled = 0
    agent_file = _agent_file(config)
    for file in config.visible_tools:
        before = known.get(file, [])
        if file == agent_file:
            found, fresh = _agent_entries(config, file, before, reuse=same_config and not force, records=records)
            entries.extend(found)
        else:
            entry, fresh = _entry(config, file, before[-1] if before else None, reuse=same_config and not force, records=records)
            entries.append(entry)
        compiled += fresh
        if on_file is not None:
            on_file(file)
    catalog = Catalog(fingerprint=catalog_fingerprint(config), entries=tuple(_check_duplicates(entries)))
    save_catalog(config, catalog, previous if same_config else None)
    _prune_last_good(config, catalog)
    return BuildReport(catalog, compiled, config)


def _unchanged(config: Config, stored: Catalog) -> bool:
    """Whether the stored catalog is what a build would write, known from its index's first line alone: the same
    config, every visible file's stat as built (one digest), its records and functions.json as written."""
    index = stored.stored
    if index is None or index.functions is None or not stored.is_fresh(config):
        return False
    if index.tally.served and not stored.records_present():
        return False
    try:
        st = os.stat(config.state.functions_file)
    except OSError:
        return False
    return (st.st_mtime_ns, st.st_size, st.st_ino) == index.functions


def _prune_last_good(config: Config, catalog: Catalog) -> None:
    """Remove the copies of last good sources (``State.last_good_copy``) no entry serves any more and nothing has
    written for ``LAST_GOOD_GRACE`` seconds (a call that took its snapshot before this build may still run one)."""
    folder = config.state.private_dir / "last-good"
    try:
        found = list(os.scandir(folder))
    except OSError:  # none yet (the common case: one failed call, nothing read)
        return
    if not found:
        return
    failing = catalog.stored is None or catalog.stored.tally.failed > 0  # (none: no entry's row needs reading)
    serving = (
        {digest(e.last_good_code) for e in catalog.entries if e.problems and e.last_good_code is not None} if failing else set()
    )
    cutoff = time.time() - LAST_GOOD_GRACE
    for copy in found:
        with contextlib.suppress(OSError):
            if copy.name not in serving and copy.stat(follow_symlinks=False).st_mtime < cutoff:
                shutil.rmtree(copy.path) if copy.is_dir(follow_symlinks=False) else os.unlink(copy.path)


def _entry(config: Config, file: str, previous: Entry | None, *, reuse: bool, records: bool) -> tuple[Entry, bool]:
    """The entry of one visible file: reused when its content is unchanged, else compiled."""
    stat = file_stat(os.path.join(config.tools_dir, file))  # strings, not Paths: this runs per file per build
    if reuse and previous is not None and stat is not None and stat == previous.stat and _readable(previous, records):
        return previous, False  # the same file as last time: not even read
    path = config.tools_dir / file
    last_good, last_good_code = _serving(previous)
    if stat is None or not path.is_file():
        return Entry(
            file=file, name=stem_name(file), stat=None, sha256=None, declaration=None, problems=(_missing(config, file),)
        ), False
    try:
        data = _read_regular(path)
    except OSError as exc:  # replaced between the stat and the read
        problem = f"{path}:1:1: cannot read the file: {exc.strerror or exc}"
        return Entry(file=file, name=stem_name(file), stat=None, sha256=None, declaration=None, problems=(problem,)), False
    sha = hashlib.sha256(data).hexdigest()
    if reuse and previous is not None and previous.sha256 == sha and _readable(previous, records):
        return previous.replace(stat=stat), False
    try:
        declaration = compile_source(data.decode("utf-8"), str(path))
    except UnicodeDecodeError as exc:
        problem = f"{path}:1:1: the file is not UTF-8 text ({exc.reason} at byte {exc.start})"
        broken = Entry(
            file=file, name=_name(previous, stem_name(file)), stat=stat, sha256=sha, declaration=None, problems=(problem,)
        )
        return broken.replace(last_good=last_good, last_good_code=last_good_code), True
    except CompileError as exc:
        name = exc.name or _name(previous, stem_name(file))
        broken = Entry(file=file, name=name, stat=stat, sha256=sha, declaration=None, problems=(str(exc),))
        if last_good is None or last_good.name != name:
            return broken, True
        return broken.replace(last_good=last_good, last_good_code=last_good_code), True
    entry = Entry(
        file=file,
        name=declaration.name,
        stat=stat,
        sha256=sha,
        declaration=declaration,
        warnings=declaration.warnings,
        code=data.decode("utf-8"),  # the very bytes compiled: what every call of this declaration runs
    )
    return entry, True


def _agent_file(config: Config) -> str | None:
    """The visible file that is the agent's tools file (several functions), when the config serves an agent."""
    agent = config.agent
    if agent is None or agent.tools_file is None:
        return None
    return os.path.relpath(agent.tools_file, config.tools_dir)


def _agent_entries(config: Config, file: str, previous: list[Entry], *, reuse: bool, records: bool) -> tuple[list[Entry], bool]:
    """The entries of an agent's tools file: one per function, reused while the file is unchanged."""
    assert config.agent is not None
    path = config.agent.tools_file  # as named in messages (tools_dir / file holds a '..')
    assert path is not None
    stat = file_stat(path)
    if reuse and previous and stat is not None and all(e.stat == stat and _readable(e, records) for e in previous):
        return previous, False
    name = config.agent.name
    try:
        data = _read_regular(path)
        sha = hashlib.sha256(data).hexdigest()
        if reuse and previous and all(e.sha256 == sha and _readable(e, records) for e in previous):
            return [e.replace(stat=stat) for e in previous], False
        declarations = compile_functions(data.decode("utf-8"), str(path), config.agent.dialect)
    except OSError as exc:
        problem = f"{path}:1:1: cannot read the agent's tools file: {exc.strerror or exc}"
        return [Entry(file=file, name=name, stat=None, sha256=None, problems=(problem,))], False
    except UnicodeDecodeError as exc:
        problem = f"{path}:1:1: the file is not UTF-8 text ({exc.reason} at byte {exc.start})"
        return _broken_agent(file, name, stat, sha, problem, previous), True
    except CompileError as exc:
        return _broken_agent(file, name, stat, sha, str(exc), previous), True
    code = data.decode("utf-8")  # the very text compiled: what every call of these declarations runs
    entries = [
        Entry(file=file, name=d.name, stat=stat, sha256=sha, declaration=d, warnings=d.warnings, code=code) for d in declarations
    ]
    return entries, True


def _broken_agent(
    file: str, name: str, stat: tuple[int, int, int, int] | None, sha: str, problem: str, previous: list[Entry]
) -> list[Entry]:
    """The entries of an agent's tools file that no longer builds: each function of the last version that built, still
    served as it was (as a broken tool keeps its last good version) and carrying the problem; with none, the problem
    filed under the agent's name."""
    kept = [(e.name, *_serving(e)) for e in previous if e.name != name]
    last_good = [
        Entry(file=file, name=n, stat=stat, sha256=sha, problems=(problem,), last_good=d, last_good_code=c)
        for n, d, c in kept
        if d is not None
    ]
    return last_good or [Entry(file=file, name=name, stat=stat, sha256=sha, problems=(problem,))]


def _readable(entry: Entry, records: bool) -> bool:
    """Whether an entry can be kept without compiling: its declarations are in memory, or the pack
    holding its record is there (a cleared cache means recompiling)."""
    return entry.loaded or entry.record is None or records


def _serving(entry: Entry | None) -> tuple[ToolDeclaration | None, str | None]:
    """The previous entry's served declaration and its source text, or Nones when there is none or its record is lost."""
    try:
        return (entry.serving, entry.serving_code) if entry is not None else (None, None)
    except DamagedCatalog:
        return None, None


def _missing(config: Config, file: str) -> str:
    """Why a visible file cannot be compiled: a link loop, a FIFO or other non-file, or really not there."""
    path = config.tools_dir / file
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (
                f"{config.path}: visible tool {file!r} in {config.tools_dir} is a symbolic link loop; point it at a tool script"
            )
        if os.path.islink(path):
            return f"{config.path}: visible tool {file!r} in {config.tools_dir} is a link to {os.readlink(path)!r}, which does not exist"
        existing = sorted(os.listdir(config.tools_dir)) if config.tools_dir.is_dir() else []
        return f"{config.path}: visible tool {file!r} not found in {config.tools_dir}{did_you_mean(file, existing)}"
    return f"{config.path}: visible tool {file!r} in {config.tools_dir} is {file_kind(mode)}, not a tool script; replace it with a regular file"


def _read_regular(path: Path) -> bytes:
    """The bytes of a regular file, never waiting on a FIFO put there after the stat."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat_module.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(descriptor)


def _name(previous: Entry | None, fallback: str) -> str:
    """A broken file keeps the name it had while it built (a module tool's declared name)."""
    return previous.name if previous is not None else fallback


def _check_duplicates(entries: list[Entry]) -> Iterator[Entry]:
    """Every file whose tool name an earlier file already took is an error; the first keeps the name."""
    owners: dict[str, Entry] = {}
    for entry in entries:
        first = owners.get(entry.name)
        if entry.serves and first is not None:
            problem = (
                f"{entry.serving.source}:1:1: tool name {entry.name!r} is already used by {first.file}; rename one of the files"  # type: ignore[union-attr]
            )
            yield entry.replace(declaration=None, last_good=None, problems=(problem,))
            continue
        if entry.serves:
            owners[entry.name] = entry
        yield entry
