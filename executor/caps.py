"""Per-tool caps, enforced in one place for every surface: calls of one tool in flight at once
(``max_concurrency``; others wait in order, each no longer than its own timeout) and calls per unit of time
(``rate``; a call past it is refused with ``rate_limited`` and when to retry).

The counts live in the shared store (:mod:`toolexec.store`): ``mcp.task_store`` when it is set (a directory on a
shared volume, or Redis), so the caps hold across every process and replica using it; else ``cache/.tasks`` in
the functions' state directory, shared by the processes of one machine. A tool without caps costs nothing here.

A waiting call is an entry in the tool's queue and a running one a holder, each with an expiry, so a process
that dies holding or queueing frees its place when the expiry passes (a holder's is its call's timeout).
"""

from __future__ import annotations

import os
import threading
import time

from toolexec.capspec import rate_window
from toolexec.errors import BusyTooLong, RateLimited

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

    from toolexec.config import Config
    from toolexec.records import ToolDeclaration
    from toolexec.runtimes.process import CallControl
    from toolexec.store import Store

__all__ = ["Held", "effective", "enter"]

POLL = 0.02  # seconds between two looks at the queue while waiting
WAITER_TTL = 10.0  # a waiter that stops looking (its process died) leaves the queue after this
GRACE = 30.0  # beyond a holder's timeout, for the tree to be killed and the slot given back

_stores: dict[str, Store] = {}
_stores_lock = threading.Lock()


def effective(config: Config, tool: ToolDeclaration) -> dict[str, Any] | None:
    """The caps a call of ``tool`` runs under: config's ``tool_limits`` entry (which replaces the script's), else
    what the script declares; None for none."""
    if tool.name in config.tool_limits:
        return dict(config.tool_limits[tool.name]) or None
    caps = {"max_concurrency": tool.metadata.max_concurrency, "rate": tool.metadata.rate}
    return {k: v for k, v in caps.items() if v is not None} or None


def _store(config: Config) -> Store:
    from toolexec.store import open_store

    spec = config.mcp.task_store or f"dir:{config.state.root / 'cache' / '.tasks'}"
    with _stores_lock:
        store = _stores.get(spec)
        if store is None:
            store = _stores[spec] = open_store(spec, relative_to=config.path.parent)
        return store


class Held:
    """A call's place under its tool's caps; :meth:`release` when the call has ended."""

    def __init__(self, store: Store | None, key: str | None, token: str) -> None:
        self.store, self.key, self.token = store, key, token

    def release(self) -> None:
        if self.store is None or self.key is None:
            return
        token = self.token

        def leave(record: dict[str, Any] | None) -> dict[str, Any] | None:
            if record is None:
                return None
            holders = {t: e for t, e in record.get("holders", {}).items() if t != token}
            return {**record, "holders": holders} if holders or record.get("waiting") else None

        self.store.update(self.key, leave)


def enter(config: Config, tool: ToolDeclaration, caps: dict[str, Any], timeout: float, control: CallControl) -> Held | None:
    """Wait for a slot (``max_concurrency``), then count the call against ``rate``; the place held, or None when
    the call was cancelled while it waited. Raises BusyTooLong or RateLimited (the call's refusal)."""
    store = _store(config)
    token = f"{os.getpid()}.{threading.get_ident()}.{os.urandom(6).hex()}"
    held = Held(None, None, token)
    slots = caps.get("max_concurrency")
    if slots is not None:
        key = f"cap.{tool.name}.slots"
        if not _wait_for_slot(store, key, token, int(slots), timeout, control):
            if control.cancelled:
                return None
            raise BusyTooLong(tool.name, int(slots), timeout)
        held = Held(store, key, token)
    rate = caps.get("rate")
    if rate is not None:
        try:
            _count(store, f"cap.{tool.name}.rate", tool.name, str(rate))
        except RateLimited:
            held.release()
            raise
    return held


def _wait_for_slot(store: Store, key: str, token: str, slots: int, timeout: float, control: CallControl) -> bool:
    deadline = time.monotonic() + timeout
    hold = timeout + GRACE
    while True:
        now = time.time()

        def step(record: dict[str, Any] | None, now: float = now) -> dict[str, Any]:
            record = record or {}
            holders = {t: e for t, e in record.get("holders", {}).items() if e > now}
            waiting = [w for w in record.get("waiting", []) if w[1] > now or w[0] == token]
            for entry in waiting:
                if entry[0] == token:
                    entry[1] = now + WAITER_TTL
                    break
            else:
                waiting.append([token, now + WAITER_TTL])
            free = slots - len(holders)
            if free > 0 and token in [w[0] for w in waiting[:free]]:  # first in line: in
                waiting = [w for w in waiting if w[0] != token]
                holders[token] = now + hold
            return {"holders": holders, "waiting": waiting}

        if token in store.update(key, step, ttl=hold + WAITER_TTL)["holders"]:  # type: ignore[index]
            return True
        if control.cancelled or time.monotonic() >= deadline:
            _leave_queue(store, key, token)
            return False
        time.sleep(POLL)


def _leave_queue(store: Store, key: str, token: str) -> None:
    def leave(record: dict[str, Any] | None) -> dict[str, Any] | None:
        if record is None:
            return None
        waiting = [w for w in record.get("waiting", []) if w[0] != token]
        return {**record, "waiting": waiting} if waiting or record.get("holders") else None

    store.update(key, leave)


def _count(store: Store, key: str, tool: str, rate: str) -> None:
    """Count one call against ``rate`` (a sliding window), or raise RateLimited saying when to retry."""
    count, window = rate_window(rate)
    now = time.time()
    refused: list[float] = []  # set by the run of ``step`` that was written (a Redis retry runs it again)

    def step(record: dict[str, Any] | None) -> dict[str, Any]:
        refused.clear()
        times = [t for t in (record or {}).get("times", []) if t > now - window]
        if len(times) >= count:
            refused.append(times[0] + window - now)
            return {"times": times}
        return {"times": [*times, now]}

    store.update(key, step, ttl=window + 1)
    if refused:
        raise RateLimited(tool, rate, refused[0])
