"""The threads a plain MCP ``tools/call`` runs on: handed over and back with one wake-up each way.

``anyio.to_thread.run_sync`` costs a call two turns of the event loop before its function is queued (a checkpoint,
then the capacity limiter's) and the machinery of a generic worker on the way back: about 235 µs a round trip on an
idle loop against 90 µs for a queue and ``call_soon_threadsafe`` (``benchmarks``-style A/B on this machine), all of it
on the path of a call at concurrency 1. :class:`CallThreads` is that queue: idle threads wait on one each, a call's
function runs in a copy of the caller's context (an OAuth token's scopes, a span), and its result or exception comes
back through the loop. Nothing else changes:

* **The same bound.** The server's :class:`anyio.CapacityLimiter` of call threads is taken without waiting
  (:meth:`CallThreads.run`); when none is free the call goes through ``anyio.to_thread`` as before, and waits there.
* **Abandoned on cancel**, as ``abandon_on_cancel=True``: a cancelled caller stops waiting at once; the thread runs
  the call to its end (the caller has cancelled its :class:`~toolexec.runtimes.CallControl`, which ends its tree).
* **Only for what needs no anyio worker**: a function that calls ``anyio.from_thread`` without a token (the
  handshake-era elicitation) must run on an anyio worker thread; the caller keeps such calls on ``anyio.to_thread``.
* **Nothing left behind.** A thread idle for :data:`IDLE_SECONDS` ends; :meth:`CallThreads.close` ends the idle ones
  at once (a busy one ends after its call). The threads are daemons: a call that never returns cannot hold the
  process's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

__all__ = ["IDLE_SECONDS", "CallThreads"]

T = TypeVar("T")
IDLE_SECONDS = 10.0  # as anyio's worker threads

_Job = tuple[contextvars.Context, Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"] | None


class _Worker:
    """One thread and the queue it waits on."""

    def __init__(self, pool: CallThreads) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.pool = pool
        self.thread = threading.Thread(target=self._serve, name="toolexec-call", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                if self.pool._retire(self):
                    return
                continue
            if job is None:
                return
            context, func, loop, future = job
            del job
            try:
                result, error = context.run(func), None
            except BaseException as caught:  # (handed to the caller, as anyio does)
                result, error = None, caught
            self.pool._idle(self)  # (before the loop hears: the caller's next call finds this thread waiting)
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits for this result any more
                loop.call_soon_threadsafe(_settle, future, result, error)
            del context, func, loop, future, result, error


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # the caller was cancelled: abandoned
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class CallThreads:
    """Threads for the calls of one MCP server (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[_Worker] = []  # idle, the most recent last (the one reused: its caches are warm)
        self._closed = False

    async def run(self, func: Callable[[], T], limiter: anyio.CapacityLimiter) -> T:
        """``func()`` on a call thread, under ``limiter`` (taken without waiting: when none is free, or once closed,
        through ``anyio.to_thread.run_sync``, which waits for one)."""
        try:
            limiter.acquire_nowait()
        except anyio.WouldBlock:
            return await anyio.to_thread.run_sync(func, abandon_on_cancel=True, limiter=limiter)
        try:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[T] = loop.create_future()
            with self._lock:
                worker = self._waiting.pop() if self._waiting else None
                closed = self._closed
            if closed:
                return await anyio.to_thread.run_sync(func, abandon_on_cancel=True)
            if worker is None:
                worker = _Worker(self)
            worker.jobs.put((contextvars.copy_context(), func, loop, future))
            return await future
        finally:
            limiter.release()

    def close(self) -> None:
        """End the idle threads; later calls go through ``anyio.to_thread``."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = self._waiting, []
        for worker in waiting:
            worker.jobs.put(None)

    def __len__(self) -> int:
        """How many threads wait for a call."""
        with self._lock:
            return len(self._waiting)

    def _idle(self, worker: _Worker) -> None:
        with self._lock:
            if not self._closed:
                self._waiting.append(worker)
                return
        worker.jobs.put(None)

    def _retire(self, worker: _Worker) -> bool:
        """Whether ``worker``, idle for :data:`IDLE_SECONDS`, ends (it does unless a call was just handed to it)."""
        with self._lock:
            if worker in self._waiting:
                self._waiting.remove(worker)
                return True
        return False
