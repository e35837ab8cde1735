"""The on-disk state toolexec owns, and the only module that knows its layout.

::

    <root>/functions.json            the declarations, a plain JSON array
    <root>/catalog.json              the index: one row per visible file (stat, hash, problems, record)
    <root>/cache/<tool>/             LLM_TOOL_CACHE_DIR of each tool (names never start with '.')
    <root>/cache/.outputs/           full outputs of capped calls, kept for a day
    <private>/catalog/<id>.pack      the records, one JSON line per declaration (the declaration, its
                                     last good version, the source text each was compiled from and the
                                     generated argument validator), each named by a digest of its
                                     content, checked when it is read; only appended to, rewritten
                                     under a new id when mostly dead
    <private>/typescript/            the TypeScript transpile cache (each output's digest checked before it runs)
    <private>/validators/            compiled validators and Python tools (marshal), per Python version (checked by digest)
    <private>/last-good/<digest>/    copies of last good sources a runtime runs as files (checked before each call)
    <user cache>/config/<digest>.json   parsed config snapshots

``<root>`` is the functions directory when toolexec may write there, else a folder of
the user cache named by the functions directory's digest. ``<private>`` is
``<user cache>/private/<digest of root>`` (0700): what toolexec executes or trusts (the code
it runs, the validators it executes in its own process, transpiled modules) is kept apart
from every tool's writable places (``LLM_TOOL_CACHE_DIR``, the functions directory), and
verified by its digest when loaded: a mismatch is rebuilt, never executed. toolexec's own
folders under ``cache/`` start with '.', which no tool name may, so a tool can never be
handed one of them. Call ids never become paths: a kept output is named by a sanitised,
length-bounded stem plus a random suffix.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from functools import cached_property
from pathlib import Path
from types import CodeType

from toolexec.errors import BadRequest, StateUnavailable
from toolexec.paths import user_cache_dir
from toolexec.records import name_problem
from toolexec.recordtype import record

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

CATALOG_FILE = "catalog.json"
FUNCTIONS_FILE = "functions.json"
MAX_CALL_ID = 256
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_CONTROL = re.compile("[\x00-\x1f\ud800-\udfff]")  # what a call id may not hold: control characters, lone surrogates


def digest(text: str) -> str:
    """A short stable digest of ``text`` (any string, surrogates included)."""
    return sha256_hex(text.encode("utf-8", "surrogateescape"))[:16]


_primed_digest: tuple[bytes, str] | None = None  # see prime_digest


def prime_digest(data: bytes) -> None:
    """Compute ahead the digest of ``data`` a call will likely ask for (the fingerprint of a config's 10,000 visible
    tools is ~0.4 ms): the next :func:`sha256_hex` of the same bytes takes it, once."""
    global _primed_digest
    _primed_digest = (data, sha256_hex(data))


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` in hex, from the interpreter's built-in module where it has one: ``hashlib`` loads
    OpenSSL (~4 ms), which a one-shot run that checks a record's digest should not pay for."""
    global _primed_digest
    primed = _primed_digest
    if primed is not None and len(primed[0]) == len(data) and primed[0] == data:
        _primed_digest = None
        return primed[1]
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found, no-redef]  # Python 3.12+
        except ImportError:
            from hashlib import sha256
    return str(sha256(data).hexdigest())


# Which Python made a code object: marshalled code is read back only by the same version and implementation.
CODE_TAG = f"{sys.hexversion:x} {sys.implementation.cache_tag}"


def write_json_atomic(path: Path, data: Any, *, indent: int | None = 1) -> None:
    """Write JSON so that a reader never sees half a file, and concurrent writers (threads or
    processes) never share a temporary file."""
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=indent) + "\n")


def write_text_atomic(path: Path, text: str) -> os.stat_result:
    """Write text as :func:`write_json_atomic` writes JSON; the file's stat as written."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> os.stat_result:
    """Write bytes as :func:`write_json_atomic` writes JSON (0600, whole or not at all); the stat of the file written
    (its inode, size and mtime are those of ``path`` until it is replaced, whatever another writer did since)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            written = os.fstat(fd)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return written


def path_key(path: str | os.PathLike[str], limit: int = 180) -> str:
    """A file name that stands for ``path``: the path itself with ``%`` and ``/`` escaped (unique, and no hashing
    library for a one-shot run to import), or its digest when that would be longer than ``limit`` bytes."""
    key = os.fspath(path).replace("%", "%25").replace("/", "%2F")
    return digest(os.fspath(path)) if len(key.encode("utf-8", "surrogateescape")) > limit else key


def config_snapshot(config_path: Path) -> Path:
    """Where the parsed copy of a config file is kept (named by :func:`path_key`)."""
    return user_cache_dir() / "config" / f"{path_key(config_path)}.json"


def check_call_id(call_id: str) -> str:
    """``call_id`` when it can be handed to a tool (an environment variable), else BadRequest."""
    if not isinstance(call_id, str) or not call_id:
        raise BadRequest(f"a call id must be a non-empty string, got {call_id!r:.80}")
    if len(call_id) > MAX_CALL_ID:
        raise BadRequest(f"a call id may have at most {MAX_CALL_ID} characters, got {len(call_id)}")
    if _CONTROL.search(call_id):
        raise BadRequest(f"a call id may not contain control characters or lone surrogates, got {call_id!r:.80}")
    return call_id


def new_call_id() -> str:
    """A fresh call id, as agents send them."""
    return f"call_{os.urandom(12).hex()}"


def call_id_for(given: object) -> str:
    """The id a call runs under: the one it came with, or a fresh one when it came with none."""
    return given if isinstance(given, str) and given else new_call_id()


def file_stem(call_id: str) -> str:
    """A file name for something of this call: never a path, bounded, unique."""
    safe = _UNSAFE.sub("_", call_id).strip("._")[:48] or "call"
    return f"{safe}-{os.urandom(4).hex()}"


@record(kw_only=False)
class State:
    """The state directory of one functions directory."""

    root: Path

    @classmethod
    def for_functions(cls, functions_dir: Path, *, embedded: bool) -> State:
        """The functions directory when toolexec may write there, else a folder in the user cache.

        A read-only mount, or a ``cache/`` left unwritable by another user, sends the state to the
        user cache; an embedded default never writes inside the installed package.
        """
        if not embedded and _writable(functions_dir) and _writable(functions_dir / "cache", missing_ok=True):
            return cls(functions_dir)
        return cls(user_cache_dir() / "state" / digest(str(functions_dir)))

    @property
    def catalog_file(self) -> Path:
        """``catalog.json``."""
        return self.root / CATALOG_FILE

    @property
    def functions_file(self) -> Path:
        """``functions.json``."""
        return self.root / FUNCTIONS_FILE

    @property
    def private_dir(self) -> Path:
        """What toolexec executes or trusts, apart from every tool's writable places (see the module's picture)."""
        return user_cache_dir() / "private" / digest(str(self.root))

    @property
    def records_dir(self) -> Path:
        """The catalog's per-declaration records."""
        return self.private_dir / "catalog"

    def pack_file(self, name: str) -> Path:
        """The pack of records named ``name`` (a hex id, never a path)."""
        if not name.isalnum():
            raise ValueError(f"not a pack name: {name!r}")
        return self.records_dir / f"{name}.pack"

    @cached_property
    def outputs_dir(self) -> Path:
        """Full outputs of capped calls (named once per state: every call passes it on)."""
        return self.root / "cache" / ".outputs"

    def last_good_copy(self, code: str, name: str) -> Path:
        """Where the source text ``code`` of a last good version is kept as a file named ``name`` (a file name), for
        runtimes that run a file: one per text, so a transpile cache keyed by path is reused call after call."""
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise ValueError(f"not a file name: {name!r}")
        return self.private_dir / "last-good" / digest(code) / name

    @property
    def validators_dir(self) -> Path:
        """Compiled code (marshal) of the catalog's argument validators and of Python tools (see :meth:`compiled`)."""
        return self.private_dir / "validators"

    def compiled(self, source: str, filename: str) -> CodeType:
        """The code object of the Python ``source`` (compiled as from ``filename``, inheriting no future flag), from the
        compiled copy kept in :attr:`validators_dir` (named by the digest of the Python version, the file name and the
        source; checked against its own digest when read), else compiled and kept there: Python's compiler costs a
        fresh process ~1.2 ms the first time it runs (a one-shot run, a Python tool's interpreter)."""
        import marshal

        key = sha256_hex(f"{CODE_TAG}\n{filename}\n{source}".encode("utf-8", "surrogateescape"))
        path = self.validators_dir / key[:32]
        try:
            with open(path, "rb") as handle:
                digest, _, payload = handle.read().partition(b"\n")
            if digest == sha256_hex(payload).encode("ascii"):
                code = marshal.loads(payload)
                if isinstance(code, CodeType):
                    return code
        except (OSError, ValueError, EOFError, TypeError):  # missing, damaged or of another Python: compiled again
            pass
        code = compile(source, filename, "exec", dont_inherit=True)
        payload = marshal.dumps(code)
        try:
            self.private_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_bytes_atomic(path, sha256_hex(payload).encode("ascii") + b"\n" + payload)
        except OSError:  # an optimisation: an unwritable state compiles each time
            pass
        return code

    @property
    def transpile_dir(self) -> Path:
        """The TypeScript transpile cache."""
        return self.private_dir / "typescript"

    def tool_cache(self, tool: str) -> Path:
        """``LLM_TOOL_CACHE_DIR`` of ``tool``, created on first use."""
        problem = name_problem(tool)
        if problem is not None:  # the catalog only holds valid names; this guards every other caller
            raise BadRequest(problem)
        return self.ensure(self.root / "cache" / tool)

    def output_file(self, call_id: str, stream: str) -> Path:
        """A new file name in :attr:`outputs_dir` for the full ``stream`` of a call."""
        return self.ensure(self.outputs_dir) / f"{file_stem(call_id)}.{stream}"

    def ensure(self, directory: Path) -> Path:
        """``directory``, created when missing; StateUnavailable naming it when it cannot be."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StateUnavailable(str(directory), exc.strerror or str(exc)) from None
        if not os.access(directory, os.W_OK | os.X_OK):
            raise StateUnavailable(str(directory), "permission denied")
        return directory


def _writable(path: Path, *, missing_ok: bool = False) -> bool:
    """Whether files can be created in ``path``: permissions and a read-write mount."""
    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except FileNotFoundError:
        return missing_ok
    except OSError:
        return False
    return not read_only and os.access(path, os.W_OK | os.X_OK)
