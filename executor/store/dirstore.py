"""The directory backend of :class:`~toolexec.store.Store`: one JSON file per key.

``<root>/<key>.json`` holds ``{"expires": <epoch seconds>, "value": {…}}``. A write goes to a private temporary file
that is renamed over the record, so a reader sees the old record or the new one, never half of either, on a local
disk or a shared volume alike. A read-modify-write holds an exclusive ``flock`` on one of :data:`STRIPES` lock files
(chosen by the key), opened afresh for each hold: ``flock`` excludes every other open file description, so other
processes and other threads of this one wait alike. Lock files are never removed (removing one someone waits on
would let two holders in). The directory and its files are private to the user (0700/0600): task results are
tool output.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolexec.errors import BadRequest
from toolexec.store import Change, Store, check_key

STRIPES = 16
_SUFFIX = ".json"


class DirStore(Store):
    """Records as files under ``root`` (created 0700 when missing)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = f"dir:{root}"
        self._locks = root / ".locks"
        try:
            self._locks.mkdir(mode=0o700, parents=True, exist_ok=True)
            root.chmod(0o700)
        except OSError as exc:
            raise BadRequest(f"the task store {self.where} cannot be used: {exc.strerror or exc}") from None

    # --- the interface ---------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        return self._read(self._path(key))

    def add(self, key: str, value: dict[str, Any], ttl: float) -> bool:
        path = self._path(key)
        with self._lock(key):
            if self._read(path) is not None:
                return False
            self._write(path, value, time.time() + ttl)
            return True

    def put(self, key: str, value: dict[str, Any], ttl: float) -> None:
        self._write(self._path(key), value, time.time() + ttl)

    def update(self, key: str, change: Change, ttl: float | None = None) -> dict[str, Any] | None:
        path = self._path(key)
        with self._lock(key):
            found = self._read_raw(path)
            old, expires = found if found is not None else (None, None)
            new = change(old)
            if new is None:
                path.unlink(missing_ok=True)
                return None
            if ttl is None and expires is None:
                raise ValueError(f"a new record {key!r} needs a ttl")
            self._write(path, new, time.time() + ttl if ttl is not None else expires)  # type: ignore[arg-type]
            return new

    def delete(self, key: str) -> None:
        with self._lock(key):
            self._path(key).unlink(missing_ok=True)

    def keys(self, prefix: str) -> list[str]:
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        return sorted(n[: -len(_SUFFIX)] for n in names if n.endswith(_SUFFIX) and n.startswith(prefix) and n[0] != ".")

    def prune(self) -> int:
        gone = 0
        for key in self.keys(""):
            path = self._path(key)
            if self._read_raw(path, keep_expired=True) is not None and self._read(path) is None:
                with self._lock(key):
                    if self._read(path) is None:  # still expired (no one renewed it meanwhile)
                        path.unlink(missing_ok=True)
                        gone += 1
        return gone

    # --- files -----------------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        return self.root / f"{check_key(key)}{_SUFFIX}"

    @contextlib.contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        stripe = hashlib.blake2b(key.encode(), digest_size=2).digest()[0] % STRIPES
        fd = os.open(self._locks / f"{stripe:02x}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _read(self, path: Path) -> dict[str, Any] | None:
        found = self._read_raw(path)
        return found[0] if found is not None else None

    def _read_raw(self, path: Path, *, keep_expired: bool = False) -> tuple[dict[str, Any], float] | None:
        """(value, expiry) of the record file, None when it is absent, expired or unreadable."""
        try:
            data = json.loads(path.read_bytes())
            value, expires = data["value"], float(data["expires"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(value, dict) or (expires <= time.time() and not keep_expired):
            return None
        return value, expires

    def _write(self, path: Path, value: dict[str, Any], expires: float) -> None:
        data = json.dumps({"expires": expires, "value": value}, ensure_ascii=False, separators=(",", ":")).encode()
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
