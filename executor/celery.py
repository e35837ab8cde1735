"""Tool calls on Celery workers, through the same call path as a local call.

Where one machine is not enough for the tools' work, run the calls on the workers of a task queue you
already operate instead of a new one. The task runs the call with an :class:`~toolexec.api.Executor` of the
worker's config, so validation, limits, the sandbox, the process-tree kill, tracing and the audit log all
apply on the worker, and it returns the same :class:`~toolexec.records.ToolResult`::

    from celery import Celery
    from toolexec.celery import register, submit

    app = Celery("tools", broker="redis://127.0.0.1:6379/0", backend="redis://127.0.0.1:6379/1")
    register(app, config="/srv/tools/config.yaml")     # on the workers (and wherever calls are sent from)

    result = submit(app, "fs_ls", {"path": "."}).get(timeout=60)   # a ToolResult

Two tasks are registered: ``toolexec.call``, acknowledged when a worker takes it (a call whose worker dies is
not run again), and ``toolexec.call_idempotent``, acknowledged when it is done and re-queued when its worker
is lost: :func:`submit` sends a call there only for a tool whose ``idempotent`` annotation is true, the one
kind of call that may safely run twice. A worker that dies mid-call leaves no tool process behind (the
process helper's guard kills the call's tree when its host dies), and a call's ``timeout`` (or the tool's,
or the config's) kills the tree on the worker as it would locally. docs/operations.md has the Temporal recipe.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from celery.signals import worker_process_shutdown

from toolexec.api import Executor
from toolexec.records import ToolResult

if TYPE_CHECKING:
    from celery import Celery, Task
    from celery.result import AsyncResult

__all__ = ["CALL", "CALL_IDEMPOTENT", "RemoteCall", "register", "run_call", "submit"]

CALL = "toolexec.call"
CALL_IDEMPOTENT = "toolexec.call_idempotent"

_executors: dict[str | None, Executor] = {}
_lock = threading.Lock()


def _executor(config: str | os.PathLike[str] | None) -> Executor:
    """The worker process's one executor per config (made on its first call, closed when the process exits)."""
    key = os.fspath(config) if config is not None else None
    with _lock:
        executor = _executors.get(key)
        if executor is None:
            executor = _executors[key] = Executor(config)
        return executor


def run_call(
    tool: str,
    arguments: Any = None,
    *,
    config: str | os.PathLike[str] | None = None,
    call_id: str | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """One call through the call path of ``config`` (None: the usual lookup, e.g. ``TOOLEXEC_CONFIG``), as the
    JSON-ready result a task queue carries. What the Celery task runs; a Temporal activity can run it too."""
    return _executor(config).call(tool, arguments, call_id=call_id, timeout=timeout).to_dict()


def register(app: Celery, *, config: str | os.PathLike[str] | None = None, **options: Any) -> Task:
    """Register ``toolexec.call`` and ``toolexec.call_idempotent`` on ``app`` (``options`` go to both, e.g.
    ``time_limit``); returns the first. The call id is the task's id unless the caller gives one."""

    def call(task: Any, tool: str, arguments: Any = None, call_id: str | None = None, timeout: float | None = None) -> dict:
        return run_call(tool, arguments, config=config, call_id=call_id or task.request.id, timeout=timeout)

    app.task(name=CALL_IDEMPOTENT, bind=True, acks_late=True, reject_on_worker_lost=True, **options)(call)
    task: Task = app.task(name=CALL, bind=True, **options)(call)

    worker_process_shutdown.connect(_close_all, weak=False)
    return task


def _close_all(**_: Any) -> None:
    with _lock:
        executors = list(_executors.values())
        _executors.clear()
    for executor in executors:
        executor.close()


class RemoteCall:
    """A call sent to the workers; :meth:`get` waits for its :class:`ToolResult`."""

    def __init__(self, result: AsyncResult) -> None:
        self.async_result = result

    @property
    def id(self) -> str:
        """The task's id (the call id too, unless one was given)."""
        return str(self.async_result.id)

    def get(self, timeout: float | None = None) -> ToolResult:
        """The call's result, as a local call returns it; a task that failed on the worker raises as Celery does."""
        return ToolResult.from_dict(self.async_result.get(timeout=timeout))


def submit(
    app: Celery,
    tool: str,
    arguments: Any = None,
    *,
    call_id: str | None = None,
    timeout: float | None = None,
    idempotent: bool | None = None,
    executor: Executor | None = None,
    **options: Any,
) -> RemoteCall:
    """Send one call to the workers (``options`` go to ``apply_async``: ``queue``, ``countdown``, …).

    ``idempotent`` picks the task that is re-queued when its worker is lost; None reads the tool's
    ``idempotent`` annotation from ``executor`` when one is given (else False)."""
    if idempotent is None:
        idempotent = bool(executor is not None and executor.describe(tool).metadata.annotations.idempotent)
    name = CALL_IDEMPOTENT if idempotent else CALL
    sent = app.send_task(name, args=(tool, arguments, call_id, timeout), **options)
    return RemoteCall(sent)
