"""The Redis backend of :class:`~toolexec.store.Store` (redis-py, the ``redis`` extra).

Each record is a Redis string holding its JSON under ``toolexec:<key>``, set with ``PX`` so Redis expires it. A
read-modify-write is an optimistic transaction: ``WATCH`` the key, read it, ``MULTI`` / ``SET`` / ``EXEC``; a
concurrent write makes ``EXEC`` fail and redis-py runs it again (so ``change`` may run more than once).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from toolexec.errors import BadRequest
from toolexec.store import Change, Store, check_key

NAMESPACE = "toolexec:"
_GLOB = re.compile(r"([*?\[\]\\])")


class RedisStore(Store):
    """Records in the Redis database ``url`` names (``redis://[:password@]host:port/db``)."""

    def __init__(self, url: str) -> None:
        try:
            import redis  # noqa: PLC0415 - optional: only a redis:// store needs redis-py
        except ImportError:
            raise BadRequest("mcp.task_store names Redis but redis-py is not installed: pip install 'toolexec[redis]'") from None
        parts = urlsplit(url)
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2])  # never a password in a message
        self.where = urlunsplit(shown)
        try:
            self.client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10, socket_connect_timeout=10)
        except ValueError as exc:
            raise BadRequest(f"mcp.task_store {self.where!r} is not a Redis URL: {exc}") from None

    def _name(self, key: str) -> str:
        return NAMESPACE + check_key(key)

    @staticmethod
    def _load(raw: str | None) -> dict[str, Any] | None:
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    @staticmethod
    def _dump(value: dict[str, Any]) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def get(self, key: str) -> dict[str, Any] | None:
        return self._load(self.client.get(self._name(key)))  # type: ignore[arg-type]

    def add(self, key: str, value: dict[str, Any], ttl: float) -> bool:
        return bool(self.client.set(self._name(key), self._dump(value), px=max(1, int(ttl * 1000)), nx=True))

    def put(self, key: str, value: dict[str, Any], ttl: float) -> None:
        self.client.set(self._name(key), self._dump(value), px=max(1, int(ttl * 1000)))

    def update(self, key: str, change: Change, ttl: float | None = None) -> dict[str, Any] | None:
        name = self._name(key)

        def attempt(pipe: Any) -> dict[str, Any] | None:
            old = self._load(pipe.get(name))
            new = change(old)
            pipe.multi()
            if new is None:
                pipe.delete(name)
            elif ttl is not None:
                pipe.set(name, self._dump(new), px=max(1, int(ttl * 1000)))
            elif old is None:
                raise ValueError(f"a new record {key!r} needs a ttl")
            else:
                pipe.set(name, self._dump(new), keepttl=True)
            return new

        written: dict[str, Any] | None = self.client.transaction(attempt, name, value_from_callable=True)  # type: ignore[arg-type,assignment]
        return written

    def delete(self, key: str) -> None:
        self.client.delete(self._name(key))

    def keys(self, prefix: str) -> list[str]:
        pattern = NAMESPACE + _GLOB.sub(r"\\\1", prefix) + "*"
        return sorted(name[len(NAMESPACE) :] for name in self.client.scan_iter(match=pattern, count=500))

    def close(self) -> None:
        self.client.close()
