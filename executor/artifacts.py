"""Files as results: what a tool writes into ``LLM_ARTIFACTS_DIR`` comes back as :class:`~toolexec.records.Artifact` records.

Every call gets a fresh private (0700) directory, named in its environment and removed after the call. When the
tool has ended, :func:`collect` reads the files at its top level, in name order, treating the directory as hostile:

* a symbolic link is never followed, a hard link (a second name of a file elsewhere), a FIFO, a socket or a device
  is refused, a sub-directory is skipped; each of these is said in a note;
* names are sanitised (no path separator or control character, no leading dot, at most :data:`NAME_LIMIT`
  characters, made unique);
* at most ``artifacts.max_files`` files and ``artifacts.max_bytes`` bytes are returned; what is past either is
  dropped with a note (each file is also bounded while the tool runs, by ``max_kept_bytes``);
* files are carried in the result itself (``data``) up to ``artifacts.inline_bytes`` in total; the others are kept
  in the state directory (``<state>/cache/.artifacts/<id>/<name>``, the id unguessable) for ``artifacts.ttl``
  seconds (``path``), which MCP offers as ``resource_link`` content read back with ``resources/read``
  (:func:`bind` ties a kept file to the client it was returned to; :func:`read` serves it to that client only).

MIME types are :func:`toolexec.mediatype.sniff`'s: from the bytes for the image and audio types (a file named
``.png`` that is not a PNG is never sent as an image), else from the name.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import hmac
import os
import shutil
import stat
import time
import unicodedata
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from toolexec.config import ArtifactSettings
from toolexec.errors import StateUnavailable
from toolexec.mediatype import sniff
from toolexec.records import Artifact
from toolexec.state import State

__all__ = ["ARTIFACTS_VARIABLE", "URI_PREFIX", "ArtifactNotFound", "bind", "collect", "read", "uri_of"]

ARTIFACTS_VARIABLE = "LLM_ARTIFACTS_DIR"
URI_PREFIX = "toolexec://artifacts/"
NAME_LIMIT = 128
ENTRY_LIMIT = 10_000  # directory entries looked at; a tool that makes more gets a note
OWNER_FILE = ".owner"
CHUNK = 1 << 20


class ArtifactNotFound(LookupError):
    """No kept file answers to that URI for this client: never made, expired, or another client's."""


def clean_name(raw: str, taken: set[str]) -> str:
    """``raw`` (a directory entry's name) as a safe, unique file name."""
    text = unicodedata.normalize("NFC", raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    text = "".join("_" if (unicodedata.category(c)[0] in "CZ" and c != " ") or c in "/\\" else c for c in text)
    text = text.strip().lstrip(".").strip() or "file"
    stem, dot, suffix = text.rpartition(".")
    if not dot or len(suffix) > 16:
        stem, dot, suffix = text, "", ""
    stem = stem[: NAME_LIMIT - len(dot + suffix)]
    name, number = f"{stem}{dot}{suffix}", 1
    while name in taken:
        number += 1
        name = f"{stem[: NAME_LIMIT - len(dot + suffix) - 8]}-{number}{dot}{suffix}"
    taken.add(name)
    return name


def collect(directory: str, settings: ArtifactSettings, state: State) -> tuple[tuple[Artifact, ...], tuple[str, ...]]:
    """The files the tool left at the top of ``directory`` as artifacts (in name order), and notes on what was not
    returned. Images and audio, then smaller files, are carried inline first; the others are kept and linked."""
    notes: list[str] = []
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        what = "a symbolic link (not followed)" if os.path.islink(directory) else f"unreadable ({exc.strerror})"
        return (), (f"the tool replaced {ARTIFACTS_VARIABLE} with {what}: no file was returned",)
    opened: list[_Candidate] = []
    try:
        taken: set[str] = set()
        total = 0
        too_many: list[str] = []
        too_big: list[str] = []
        for raw in sorted(_names(fd, notes)):
            shown = clean_name(raw, taken)
            if len(opened) >= settings.max_files:
                too_many.append(shown)
                continue
            problem, candidate = _open(fd, raw, shown)
            if problem is not None:
                notes.append(problem)
            elif candidate is not None and total + candidate.size > settings.max_bytes:
                too_big.append(f"{shown}, {candidate.size} bytes")
                candidate.handle.close()
            elif candidate is not None:
                opened.append(candidate)
                total += candidate.size
        if too_big:
            notes.append(f"{_listed(too_big)}: the files of one call may total artifacts.max_bytes ({settings.max_bytes} bytes)")
        if too_many:
            notes.append(f"{_listed(too_many)}: at most artifacts.max_files ({settings.max_files}) per call")
        inline, budget = set(), settings.inline_bytes
        for candidate in sorted(opened, key=lambda c: (not c.mime.startswith(("image/", "audio/")), c.size, c.name)):
            if candidate.size <= budget:
                inline.add(candidate.name)
                budget -= candidate.size
        found = []
        for candidate in opened:
            if candidate.name in inline:
                data = _read(candidate.handle, candidate.size)
                found.append(Artifact(name=candidate.name, mime_type=candidate.mime, size=len(data), data=data))
            else:
                try:
                    path, kept = _keep(candidate.handle, candidate.size, candidate.name, state, settings.ttl)
                except (OSError, StateUnavailable) as exc:  # the output and the other files are still the result
                    why = exc.strerror if isinstance(exc, OSError) else str(exc)
                    notes.append(f"{candidate.name} ({candidate.size} bytes) was not returned: it cannot be kept ({why})")
                    continue
                found.append(Artifact(name=candidate.name, mime_type=candidate.mime, size=kept, path=path))
        return tuple(found), tuple(notes)
    finally:
        for candidate in opened:
            candidate.handle.close()
        os.close(fd)


class _Candidate:
    """A file to return, open, with its name, size and type."""

    def __init__(self, handle: BinaryIO, name: str, size: int, mime: str) -> None:
        self.handle, self.name, self.size, self.mime = handle, name, size, mime


def _names(fd: int, notes: list[str]) -> Iterator[str]:
    with os.scandir(fd) as entries:
        for count, entry in enumerate(entries):
            if count >= ENTRY_LIMIT:
                notes.append(f"{ARTIFACTS_VARIABLE} holds more than {ENTRY_LIMIT} entries; only the first were looked at")
                return
            yield entry.name


def _listed(names: list[str]) -> str:
    """The start of a note on files left out: how many, and the first few."""
    shown = "; ".join(names[:5]) + ("; …" if len(names) > 5 else "")
    return f"{len(names)} file(s) of {ARTIFACTS_VARIABLE} were not returned ({shown})"


def _open(directory: int, raw: str, shown: str) -> tuple[str | None, _Candidate | None]:
    """One entry: (a note, None) when it is not returned, else (None, the open file)."""
    try:
        fd = os.open(raw, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{shown} in {ARTIFACTS_VARIABLE} is a symbolic link: links are not followed, write the file itself", None
        if exc.errno == errno.ENXIO:  # a socket
            return f"{shown} in {ARTIFACTS_VARIABLE} is a socket, not a regular file: not returned", None
        return f"{shown} in {ARTIFACTS_VARIABLE} cannot be read ({exc.strerror}): not returned", None
    st = os.fstat(fd)
    problem = None
    if stat.S_ISDIR(st.st_mode):
        problem = f"{shown} in {ARTIFACTS_VARIABLE} is a directory: only files at its top level are returned"
    elif not stat.S_ISREG(st.st_mode):
        problem = f"{shown} in {ARTIFACTS_VARIABLE} is not a regular file (a FIFO or a device): not returned"
    elif st.st_nlink > 1:
        problem = f"{shown} in {ARTIFACTS_VARIABLE} is a hard link to another file: write a copy instead"
    if problem is not None:
        os.close(fd)
        return problem, None
    return None, _Candidate(open(fd, "rb", buffering=0), shown, st.st_size, sniff(os.pread(fd, 1024, 0), shown))


def _read(handle: BinaryIO, size: int) -> bytes:
    """At most ``size`` bytes (what the file held when looked at: one that grows meanwhile adds nothing)."""
    parts, left = [], size
    while left > 0:
        chunk = handle.read(min(left, CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


# --- the store of kept files ------------------------------------------------------------------------------


def store_dir(state: State) -> Path:
    """Where kept artifacts live (a toolexec folder under ``cache/``: its name starts with '.', which no tool's may)."""
    return state.root / "cache" / ".artifacts"


def _keep(handle: BinaryIO, size: int, name: str, state: State, ttl: float) -> tuple[str, int]:
    """Copy ``size`` bytes of ``handle`` into a new entry of the store; the file's path and the bytes copied."""
    store = state.ensure(store_dir(state))
    _prune(store, ttl)
    key = base64.urlsafe_b64encode(os.urandom(18)).decode("ascii")
    entry = store / key
    entry.mkdir(mode=0o700)
    path = entry / name
    copied = 0
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "wb") as out:
        while copied < size:
            chunk = handle.read(min(size - copied, CHUNK))
            if not chunk:
                break
            out.write(chunk)
            copied += len(chunk)
    return str(path), copied


def _prune(store: Path, ttl: float) -> None:
    """Remove the entries older than ``ttl`` seconds."""
    cutoff = time.time() - ttl
    with contextlib.suppress(FileNotFoundError), os.scandir(store) as entries:
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    shutil.rmtree(entry.path, ignore_errors=True)


def uri_of(artifact: Artifact) -> str:
    """The ``resources/read`` URI of a kept artifact."""
    assert artifact.path is not None, "only a kept artifact has a URI"
    path = Path(artifact.path)
    return f"{URI_PREFIX}{path.parent.name}/{urllib.parse.quote(path.name, safe='')}"


def _owner_digest(owner: str) -> str:
    return hashlib.sha256(owner.encode("utf-8", "surrogateescape")).hexdigest()


def bind(artifact: Artifact, owner: str) -> None:
    """Tie a kept artifact to ``owner`` (the client it is returned to: see ``toolexec.mcp``): only it may read it."""
    assert artifact.path is not None
    path = Path(artifact.path).parent / OWNER_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(fd, "w", encoding="ascii") as handle:
        handle.write(_owner_digest(owner))


def read(uri: str, owner: str, state: State, ttl: float) -> tuple[str, str, bytes]:
    """The kept file ``uri`` names, for ``owner``: (name, MIME type, bytes); :class:`ArtifactNotFound` when there is
    none, its time has passed, or it was returned to another client (one answer for all three)."""
    missing = ArtifactNotFound(
        f"no resource {uri[:200]!r}: links of tool results are readable by the client they were returned to, for {ttl:g} seconds"
    )
    if not uri.startswith(URI_PREFIX):
        raise missing
    key, _, quoted = uri[len(URI_PREFIX) :].partition("/")
    name = urllib.parse.unquote(quoted)
    if len(key) != 24 or not key.replace("-", "").replace("_", "").isalnum() or not key.isascii():
        raise missing
    if not name or "/" in name or name != clean_name(name, set()):
        raise missing
    entry = store_dir(state) / key
    try:
        found = entry.lstat()
        if not stat.S_ISDIR(found.st_mode) or time.time() - found.st_mtime > ttl:  # a link in its place: never followed
            raise missing
        with open(os.open(entry / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), encoding="ascii") as handle:
            bound = handle.read(128)
        if not hmac.compare_digest(bound, _owner_digest(owner)):
            raise missing
        with open(os.open(entry / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise missing
            data = handle.read()
    except (OSError, UnicodeDecodeError):
        raise missing from None
    return name, sniff(data[:1024], name), data
