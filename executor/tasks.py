"""Long-running calls as tasks: a call that runs on after the request that started it, its state in a shared
:class:`~toolexec.store.Store` so any replica can answer for it.

::

    start ── record "working" in the store ── a thread runs Calls.execute (same limits, same process-tree control)
                                               └─ on return: the record becomes completed / failed / cancelled
    get ──── the record (any replica); "working" on a replica whose heartbeat stopped → failed
    cancel ─ the record is marked; the owning replica's watcher sees the mark (within POLL_SECONDS) and cancels the
             call: its whole tree is ended, wherever the request came in

A task belongs to the principal that started it (a digest of the client's credentials, see :mod:`toolexec.mcp_tasks`):
to anyone else it does not exist. The record is kept ``ttl`` seconds from its creation (the call's time limit plus
``mcp.task_ttl``) and then pruned; the result is a JSON object the protocol layer made (what ``tools/call`` would have
returned), so the store never holds anything but JSON.

Records, under ``task:<id>``: ``id owner tool status message created updated ttl replica cancel result error``.
Replicas announce themselves under ``replica:<id>`` every :data:`HEARTBEAT_SECONDS`.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from toolexec.calls import Calls, Pending
from toolexec.records import ToolResult
from toolexec.runtimes.process import CallControl
from toolexec.store import Store

__all__ = ["POLL_SECONDS", "TERMINAL", "Outcome", "Tasks"]

Status = Literal["working", "completed", "failed", "cancelled"]
TERMINAL = frozenset({"completed", "failed", "cancelled"})
# How often the owner looks for cancel marks (and a poll interval suggested to clients, in ms, is this times 2).
POLL_SECONDS = 0.25
HEARTBEAT_SECONDS = 2.0
HEARTBEAT_TTL = 10.0  # a replica silent this long is gone: its working tasks are failed
PRUNE_SECONDS = 60.0
_ID = re.compile(r"[A-Za-z0-9_-]{20,64}")


@dataclass(frozen=True)
class Outcome:
    """How a finished call ends its task: the status, a message, and the protocol's result or error object."""

    status: Status
    message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Tasks:
    """The tasks of one server process: started here, answered from the shared ``store`` for any replica's."""

    def __init__(self, store: Store, calls: Calls, *, keep: float) -> None:
        self.store = store
        self.calls = calls
        self.keep = keep
        self.replica = secrets.token_hex(8)
        self._lock = threading.Lock()
        self._running: dict[str, tuple[CallControl, threading.Thread]] = {}
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self.stopping = False  # set by close(): calls ended now are the server's doing, not the client's

    # --- starting and running -------------------------------------------------------------------

    def start(
        self,
        owner: str,
        pending: Pending,
        time_limit: float,
        finish: Callable[[ToolResult], Outcome],
        *,
        keep: float | None = None,
    ) -> dict[str, Any]:
        """Record a new task and start running ``pending`` on a thread; the record (already readable by any replica).

        ``finish`` turns the call's result into the task's outcome; ``keep`` (at most ``mcp.task_ttl``) is how long
        the record outlives the call's time limit."""
        now = time.time()
        task_id = secrets.token_urlsafe(24)
        ttl = time_limit + min(keep if keep is not None else self.keep, self.keep)
        record: dict[str, Any] = {
            "id": task_id,
            "owner": owner,
            "tool": pending.call.name,
            "status": "working",
            "message": None,
            "created": now,
            "updated": now,
            "ttl": ttl,
            "replica": self.replica,
            "cancel": False,
            "result": None,
            "error": None,
        }
        self._ensure_watcher()
        self.store.add(f"task:{task_id}", record, ttl)
        control = CallControl()
        thread = threading.Thread(target=self._run, args=(task_id, pending, control, finish), name=f"toolexec-task-{task_id[:8]}")
        with self._lock:
            self._running[task_id] = (control, thread)
        thread.start()
        return record

    def _run(self, task_id: str, pending: Pending, control: CallControl, finish: Callable[[ToolResult], Outcome]) -> None:
        try:
            result = self.calls.execute(pending, control)
            outcome = finish(result)
        except Exception as error:  # a fault of toolexec's own: the task fails, the thread does not
            outcome = Outcome(
                "failed", f"internal error: {type(error).__name__}", error={"code": -32603, "message": "internal error"}
            )
        finally:
            control.close()
        if self.stopping and outcome.status == "cancelled":
            message = "toolexec mcp stopped before the task ended; its processes were ended; start the call again"
            outcome = Outcome("failed", message, error={"code": -32603, "message": message})

        def end(record: dict[str, Any] | None) -> dict[str, Any] | None:
            if record is None:
                return None  # pruned meanwhile: nothing to keep
            status = outcome.status
            if record["cancel"] and status != "completed":
                status = "cancelled"
            return {
                **record,
                "status": status,
                "message": outcome.message,
                "updated": time.time(),
                "result": outcome.result,
                "error": outcome.error,
            }

        try:
            self.store.update(f"task:{task_id}", end)
        finally:
            with self._lock:
                self._running.pop(task_id, None)

    # --- what any replica answers ----------------------------------------------------------------

    def get(self, owner: str, task_id: str) -> dict[str, Any] | None:
        """The task's record, None when there is no such task of ``owner`` (another principal's is not there)."""
        if not isinstance(task_id, str) or not _ID.fullmatch(task_id):
            return None
        record = self.store.get(f"task:{task_id}")
        if record is None or not secrets.compare_digest(str(record.get("owner")), owner):
            return None
        if (
            record["status"] == "working"
            and record["replica"] != self.replica
            and self.store.get(f"replica:{record['replica']}") is None
        ):
            return self._orphaned(task_id) or record
        return record

    def _orphaned(self, task_id: str) -> dict[str, Any] | None:
        """Fail a working task whose replica stopped answering (killed, crashed)."""
        message = "the toolexec mcp instance running this task stopped before it ended; start the call again"

        def fail(record: dict[str, Any] | None) -> dict[str, Any] | None:
            if record is None or record["status"] != "working":
                return record
            return {
                **record,
                "status": "failed",
                "message": message,
                "updated": time.time(),
                "error": {"code": -32603, "message": message},
            }

        return self.store.update(f"task:{task_id}", fail)

    def cancel(self, owner: str, task_id: str) -> dict[str, Any] | None:
        """Mark the task cancelled (the owner ends its tree); the record as it now stands, None when not found."""
        record = self.get(owner, task_id)
        if record is None or record["status"] in TERMINAL:
            return record

        def mark(found: dict[str, Any] | None) -> dict[str, Any] | None:
            return {**found, "cancel": True, "updated": time.time()} if found is not None else None

        record = self.store.update(f"task:{task_id}", mark) or record
        with self._lock:
            local = self._running.get(task_id)
        if local is not None:  # running here: no need to wait for the watcher
            local[0].cancel()
        return record

    def wait(self, owner: str, task_id: str, timeout: float) -> dict[str, Any] | None:
        """Block (a worker thread) until the task ends or ``timeout`` passes; its record, None when not found."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.get(owner, task_id)
            if record is None or record["status"] in TERMINAL or time.monotonic() >= deadline:
                return record
            time.sleep(POLL_SECONDS)

    def list(self, owner: str) -> list[dict[str, Any]]:
        """``owner``'s tasks still kept, oldest first."""
        found = (self.get(owner, key[5:]) for key in self.store.keys("task:"))
        return sorted((r for r in found if r is not None), key=lambda r: r["created"])

    # --- the watcher: cancel marks, heartbeat, pruning --------------------------------------------

    def _ensure_watcher(self) -> None:
        with self._lock:
            if self._watcher is None:
                self._heartbeat()
                self._watcher = threading.Thread(target=self._watch, name="toolexec-task-watcher", daemon=True)
                self._watcher.start()

    def _heartbeat(self) -> None:
        self.store.put(f"replica:{self.replica}", {"seen": time.time()}, HEARTBEAT_TTL)

    def _watch(self) -> None:
        beat = prune = time.monotonic()
        while not self._stop.wait(POLL_SECONDS):
            try:
                with self._lock:
                    running = {task_id: control for task_id, (control, _) in self._running.items()}
                for task_id, control in running.items():
                    record = self.store.get(f"task:{task_id}")
                    if record is not None and record.get("cancel") and not control.cancelled:
                        control.cancel()
                now = time.monotonic()
                if now - beat >= HEARTBEAT_SECONDS:
                    self._heartbeat()
                    beat = now
                if now - prune >= PRUNE_SECONDS:
                    self.store.prune()
                    prune = now
            except Exception as error:  # the store is unreachable for a moment: try again next round
                import sys  # noqa: PLC0415 - only a failing store writes here

                print(f"toolexec mcp: the task store {self.store.where}: {type(error).__name__}: {error}", file=sys.stderr)

    def close(self, timeout: float) -> None:
        """Cancel the tasks running here and wait (up to ``timeout``) until their records say how they ended."""
        self.stopping = True
        with self._lock:
            running = list(self._running.values())
        for control, _ in running:
            control.cancel()
        deadline = time.monotonic() + timeout
        for _, thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=POLL_SECONDS * 4)
        with contextlib.suppress(Exception):  # the store is gone: the heartbeat expires on its own
            self.store.delete(f"replica:{self.replica}")
        self.store.close()
