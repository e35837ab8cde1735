"""A small shared store: JSON records under keys, each with an expiry, shared by every process (or replica) that
opens the same place. MCP tasks keep their state here, so ``tasks/get`` and ``tasks/cancel`` work from any replica;
per-tool caps (concurrency counts, rate windows) can keep theirs here too.

Two backends, one interface (:class:`Store`):

* ``dir:PATH`` (:class:`~toolexec.store.dirstore.DirStore`): one JSON file per key in a directory, on a local disk
  or a volume the replicas share; writes are atomic (a new file renamed over the old), read-modify-writes hold an
  ``flock`` lock that excludes other processes and threads alike.
* ``redis://HOST:PORT/DB`` (:class:`~toolexec.store.redisstore.RedisStore`): one Redis string per key, expired by
  Redis itself; read-modify-writes are optimistic transactions (``WATCH``/``MULTI``), retried on a conflict.

The operations, all atomic with respect to every other process using the store:

``get(key)``
    The record, or None when there is none or it has expired.
``add(key, value, ttl)``
    Create the record only if the key is free; True when created (a lock, a unique id).
``put(key, value, ttl)``
    Create or replace the record.
``update(key, change, ttl=None)``
    Read the record (None when absent), call ``change`` on it, write what it returns (None deletes) with a new
    expiry when ``ttl`` is given, else the old one. ``change`` may run more than once (a Redis retry): it must
    depend only on its argument. A counting semaphore is an update that adds a holder while there are fewer than
    N (and drops holders whose own expiry passed); a rate window is an update that appends a timestamp and drops
    those older than the window: both are the way issue 24's per-tool caps are meant to use it.
``delete(key)``
    Remove the record (absent is fine).
``keys(prefix)``
    The keys starting with ``prefix`` (expired ones may still be listed; ``get`` says None for them).
``prune()``
    Remove expired records (Redis does this itself); how many went.

Keys are short words of letters, digits and ``_ . : -`` (never a path); values are JSON objects; ``ttl`` is in
seconds, after which the record is gone.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolexec.errors import BadRequest

__all__ = ["Change", "Store", "check_key", "open_store"]

Change = Callable[[dict[str, Any] | None], dict[str, Any] | None]
_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}")


def check_key(key: str) -> str:
    """``key`` when it is a store key (see the module's rule), else ValueError: keys are made by toolexec."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError(f"not a store key: {key!r:.80}")
    return key


class Store(ABC):
    """A shared key-value store of JSON records with expiry and atomic read-modify-write (see the module's list)."""

    #: How the store was named (``dir:/srv/tasks``, ``redis://host:6379/0`` without a password), for messages.
    where: str

    @abstractmethod
    def get(self, key: str) -> dict[str, Any] | None:
        """The record under ``key``, or None (absent or expired)."""

    @abstractmethod
    def add(self, key: str, value: dict[str, Any], ttl: float) -> bool:
        """Create the record if ``key`` is free; whether it was created."""

    @abstractmethod
    def put(self, key: str, value: dict[str, Any], ttl: float) -> None:
        """Create or replace the record, expiring ``ttl`` seconds from now."""

    @abstractmethod
    def update(self, key: str, change: Change, ttl: float | None = None) -> dict[str, Any] | None:
        """Atomically replace the record by ``change(record)`` (None deletes it); what was written."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the record (absent is fine)."""

    @abstractmethod
    def keys(self, prefix: str) -> list[str]:
        """The keys that start with ``prefix``."""

    def prune(self) -> int:
        """Remove expired records; how many went (0 where the backend expires them itself)."""
        return 0

    def close(self) -> None:  # noqa: B027 - a backend without connections has nothing to release
        """Release connections (the records stay)."""


def open_store(spec: str, *, relative_to: Path) -> Store:
    """The store ``spec`` names: ``dir:PATH`` (relative to ``relative_to``) or ``redis://…`` / ``rediss://…``.

    BadRequest saying what is wrong (an unknown scheme, redis-py missing, a directory that cannot be made).
    """
    if spec.startswith("dir:"):
        from toolexec.store.dirstore import DirStore  # noqa: PLC0415 - a cycle: the backends subclass Store

        path = Path(spec[4:]).expanduser()
        if not spec[4:]:
            raise BadRequest("mcp.task_store 'dir:' names no directory; write dir:/srv/shared/tasks")
        return DirStore(path if path.is_absolute() else relative_to / path)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from toolexec.store.redisstore import RedisStore  # noqa: PLC0415 - a cycle: the backends subclass Store

        return RedisStore(spec)
    raise BadRequest(f"mcp.task_store must be dir:PATH or redis://HOST:PORT/DB, got {spec!r:.80}")
