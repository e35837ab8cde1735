"""The public Python API: one :class:`Executor` per config, safe to share between threads and tasks.

Every call, whether from :meth:`Executor.call`, :meth:`Executor.acall` or
:meth:`Executor.call_many`, runs on the executor's own ``config.max_parallel``
threads (the one concurrency limiter: a call waits for a free thread) and is
registered with its cancellation while queued or running, so that
:meth:`Executor.close` can end every call in flight.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from toolexec import results
from toolexec.catalog import Catalog, DamagedCatalog, expand_enabled, load_catalog
from toolexec.config import Config, load_config
from toolexec.engine import Engine, refused
from toolexec.errors import EXIT_CANCELLED, BadRequest, ToolexecError
from toolexec.records import ToolCall, ToolDeclaration, ToolResult
from toolexec.runtimes.process import Cancellation

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor
    from types import TracebackType

    from toolexec.build import BuildReport

CLOSED = "the executor is closed; create a new Executor to call tools"


class Executor:
    """Builds, lists and calls the tools of one config.

    >>> ex = Executor("config.yaml")            # doctest: +SKIP
    >>> ex.call("demo_py", {"text": "hi"}).output  # doctest: +SKIP

    Use it as a context manager (or call :meth:`close`) to end the calls still
    running when you are done: ``with Executor() as ex: ...``.
    """

    def __init__(self, config: Config | str | os.PathLike[str] | None = None) -> None:
        self.config = config if isinstance(config, Config) else load_config(config)
        self._catalog: Catalog | None = None
        self._lock = threading.Lock()
        # Calls in flight (queued or running), so close() can cancel them.
        self._in_flight: dict[object, Cancellation] = {}
        self._registry = threading.Condition()  # guards _in_flight, _closed and _threads
        self._closed = False
        # The one concurrency limiter: every call runs on one of these max_parallel threads.
        self._threads: ThreadPoolExecutor | None = None

    @property
    def catalog(self) -> Catalog:
        """The catalog, rebuilt when a visible tool or the config changed since it was read."""
        return self._fresh_catalog()

    def _fresh_catalog(self, tool: str | None = None) -> Catalog:
        """The catalog, fresh for everything (or, with ``tool``, for a call of that tool: only its
        file is checked and only its record read, so a call costs the same with a thousand tools)."""
        with self._lock:
            try:
                if self._catalog is None or not self._catalog.is_fresh(self.config, tool=tool):
                    catalog = load_catalog(self.config)
                    if catalog is None or not catalog.is_fresh(self.config, tool=tool):
                        catalog = self.build().catalog
                    self._catalog = catalog
                if tool is not None and (entry := self._catalog.entry(tool)) is not None:
                    entry.serving  # noqa: B018 - read the one record the call needs, here where a lost one is rebuilt
            except DamagedCatalog:  # a damaged index or a lost record (a cleared cache): rebuilt
                self._catalog = self.build().catalog
            return self._catalog

    def build(self, *, force: bool = False, on_file: Callable[[str], None] | None = None) -> BuildReport:
        """Compile the visible tools (see :func:`toolexec.build.build`); ``on_file`` follows progress."""
        from toolexec.build import build  # compiling is only needed when something changed

        report = build(self.config, force=force, on_file=on_file)
        self._catalog = report.catalog
        return report

    def tools(self, *, enabled_only: bool = True, tags: Sequence[str] = ()) -> list[ToolDeclaration]:
        """The built tools (only the enabled ones unless told otherwise), keeping those that carry every tag in ``tags``."""

        def listing() -> list[ToolDeclaration]:
            catalog = self.catalog
            return catalog.enabled(self.config) if enabled_only else list(catalog.tools.values())

        try:
            found = listing()
        except DamagedCatalog:  # a record was lost (a cleared cache): rebuild once
            self.build()
            found = listing()
        return [tool for tool in found if all(tag in tool.metadata.tags for tag in tags)]

    def broken(self, *, enabled_only: bool = True) -> list[dict[str, Any]]:
        """The visible tools that failed to build: ``name``, ``language``, ``source`` and ``error`` (every problem)."""
        from toolexec.compilers import language_of

        wanted = None if not enabled_only or self.config.enabled_tools is None else set(expand_enabled(self.config))
        return [
            {
                "name": entry.name,
                "language": language_of(entry.file) or "unknown",
                "source": str(self.config.tools_dir / entry.file),
                "error": "\n".join(entry.problems),
            }
            for entry in self.catalog.entries
            if entry.problems and (wanted is None or entry.name in wanted)
        ]

    def describe(self, name: str) -> ToolDeclaration:
        return self._fresh_catalog(name).get(name, self.config)

    def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        cancel: Cancellation | None = None,
    ) -> ToolResult:
        """Run one tool and return its result; never raises for a failed or refused call.

        Waits for a free slot when ``max_parallel`` calls are already running. Setting
        ``cancel`` (from any thread) ends the tool's whole process tree; so does
        :meth:`close`, which sets it, and so does interrupting the waiting thread
        (``KeyboardInterrupt``), which re-raises once the tool has ended.
        """
        return self.call_many([ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout)], cancel=cancel)[0]

    def call_many(self, calls: Iterable[ToolCall], *, cancel: Cancellation | None = None) -> list[ToolResult]:
        """Run ``calls`` concurrently, at most ``max_parallel`` at once; results in input order.

        Each result is as :meth:`call` returns it (a refusal or failure is a result).
        Setting ``cancel`` cancels every call of the batch; if the waiting thread is
        interrupted (``KeyboardInterrupt``), the calls are cancelled before it re-raises.
        """
        from concurrent.futures import wait

        requests = list(calls)
        if not requests:
            return []
        shared = cancel if cancel is not None else Cancellation()
        work = [self._submit(request, shared) for request in requests]
        try:
            try:
                wait(work)
            except BaseException:  # the waiting thread was interrupted: end the calls, then re-raise
                shared.cancel()
                wait(work)
                raise
            return [future.result() for future in work]
        finally:
            if cancel is None:  # closed here, so its descriptors are gone when this returns
                _close_when_done(shared, work)

    async def acall(
        self, name: str, arguments: Any = None, *, call_id: str | None = None, timeout: float | None = None
    ) -> ToolResult:
        """As :meth:`call`; cancelling the awaiting task ends the tool's whole process tree.

        Runs on the executor's own threads (not asyncio's default pool, which is
        smaller than ``max_parallel`` on a small machine), so ``max_parallel`` calls
        really run at once.
        """
        import asyncio  # not at module level: it costs a one-shot `toolexec run` ~50 ms

        request = ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout)
        cancel = Cancellation()
        future = self._submit(request, cancel)
        _close_when_done(cancel, [future])  # not before: a task cancelled twice stops waiting
        work = asyncio.wrap_future(future)
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            cancel.cancel()
            await asyncio.wait([work])
            raise

    def close(self) -> None:
        """Cancel every call in flight and wait until they have returned; later calls are refused.

        A running call's process tree ends and the call returns a ``cancelled``
        result; a call still waiting for a slot returns ``cancelled`` without starting.
        Closing twice is harmless.
        """
        with self._registry:
            self._closed = True
            for cancel in self._in_flight.values():
                cancel.cancel()
            self._registry.wait_for(lambda: not self._in_flight)
            threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=True)  # every call has returned: the threads are idle

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def _submit(self, request: ToolCall, cancel: Cancellation) -> Future[ToolResult]:
        """Queue ``request`` for the executor's threads; a refused result at once when closed."""
        from concurrent.futures import Future, ThreadPoolExecutor

        with self._registry:  # registered before it is queued, so close() cancels and waits for it too
            token = self._register(cancel)
            if token is not None:
                if self._threads is None:
                    self._threads = ThreadPoolExecutor(self.config.max_parallel, thread_name_prefix="toolexec-call")
                return self._threads.submit(self._run, token, request, cancel)
        refused: Future[ToolResult] = Future()
        refused.set_result(_not_run(request, "refused", CLOSED))
        return refused

    def _register(self, control: Cancellation) -> object | None:
        """Record a call in flight; None once the executor is closed."""
        with self._registry:
            if self._closed:
                return None
            token = object()
            self._in_flight[token] = control
            return token

    def _run(self, token: object, request: ToolCall, control: Cancellation) -> ToolResult:
        """Run the registered call on one of the executor's threads, then unregister it: the path every call takes."""
        try:
            if control.cancelled:  # closed (or cancelled) while waiting for a thread
                return _not_run(request, "cancelled", "the call was cancelled before it started")
            try:
                catalog = self._fresh_catalog(request.name if isinstance(request.name, str) else None)
            except ToolexecError as error:  # the catalog could not be (re)built: no writable state directory
                return refused(request, error, started=time.monotonic())
            return Engine(self.config, catalog).invoke(request, control)
        finally:
            with self._registry:
                del self._in_flight[token]
                self._registry.notify_all()


def _close_when_done(cancel: Cancellation, work: list[Future[ToolResult]]) -> None:
    """Close ``cancel`` once every future in ``work`` has finished (its pipe is in use until then).

    When they all have, it is closed at once, in this thread.
    """
    pending = [len(work)]
    lock = threading.Lock()

    def finished(_: Future[ToolResult]) -> None:
        with lock:
            pending[0] -= 1
            if pending[0]:
                return
        cancel.close()

    for future in work:
        future.add_done_callback(finished)


def _not_run(request: ToolCall, status: Literal["refused", "cancelled"], message: str) -> ToolResult:
    """The result of a call that never started: refused (a closed executor) or cancelled while queued."""
    call_id = request.call_id or f"call_{os.urandom(12).hex()}"
    if status == "refused":
        return results.refusal(request.name, call_id, BadRequest(message), time.monotonic())
    return ToolResult(
        ok=False,
        status="cancelled",
        output="",
        error=message,
        exit_code=EXIT_CANCELLED,
        stderr="",
        duration_ms=0.0,
        tool_call_id=call_id,
        tool_name=request.name,
        tool_call_error=f"Tool call '{request.name}' was cancelled",
        reason="cancelled",
    )
