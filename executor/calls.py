"""The one call path: every call, from every surface, takes these steps in this order.

::

    ToolCall ─ prepare ──────────────────────────── approve ─────────── execute ─────────────────────────→ ToolResult
               resolve the name (provider-safe too)  before_call hook    registered in flight (close() ends it)
               one snapshot: declaration + source    (sync or async;     a slot of max_parallel
               (one freshness check)                 a failure denies)   Engine: runtime.prepare → process → result
               call id, timeout, arguments validated  Rewrite re-validated  ↺ a question asked: the slot given up,
                                                                            ``ask`` answers it, the tool runs again
               the token's OAuth scopes (ToolCall.scopes) cover the tool's Scope:

:class:`Calls` holds the one limiter and the one in-flight registry. :class:`~toolexec.api.Executor`
(``call``, ``acall``, ``call_many``), :class:`~toolexec.toolkit.Toolkit` (a filter over it) and the MCP
server's ``tools/call`` are adapters over it; a refusal at any step is a result, never an exception.
A per-call feature (a sandbox policy, a usage cap, a tracing span, an audit line) is one step here,
or a small wrapper around :meth:`Calls.execute`; see docs/architecture.md.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque

from toolexec import results
from toolexec.engine import Engine, refused
from toolexec.errors import EXIT_CANCELLED, BadRequest, CallDenied, InternalError, ScopeMissing, ToolexecError
from toolexec.records import ToolCall, ToolResult, limit_problem
from toolexec.recordtype import record, replace
from toolexec.sources import Snapshot, Source
from toolexec.state import call_id_for, check_call_id

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping
    from concurrent.futures import Future, ThreadPoolExecutor
    from typing import Any, Literal, TypeGuard

    from toolexec.approval import ApprovalRequest, BeforeCall, Decision
    from toolexec.asking import Asker
    from toolexec.callfiles import FilePool
    from toolexec.caps import Held
    from toolexec.config import Config
    from toolexec.observe import Caller, Observation
    from toolexec.records import InputRequest, InputResponse, ToolDeclaration
    from toolexec.runtimes.process import CallControl
    from toolexec.runtimes.sandbox_spare import Spares
    from toolexec.runtimes.warm import WarmPool

    # A filter step: given the resolved tool name, raises a ToolexecError (the refusal) for a call it does not admit.
    Admit = Callable[[str], None]

__all__ = ["CLOSED", "Calls", "Pending", "Slots", "Ticket", "missing_scopes", "runs_warm"]

CLOSED = "the executor is closed; create a new Executor to call tools"


@record
class Pending:
    """A call that passed :meth:`Calls.prepare`: what it will run, with what, under which id."""

    call: ToolCall  # as the caller sent it (the name resolved; a Rewrite's arguments)
    snapshot: Snapshot  # taken once: what is approved is what runs
    arguments: dict[str, Any]  # validated against the snapshot's schema
    call_id: str
    started: float
    observation: Observation | None = None  # its span and audit line, when either is wanted

    def approval_request(self) -> ApprovalRequest:
        """What the ``before_call`` hook is shown."""
        from toolexec.approval import ApprovalRequest

        return ApprovalRequest(tool=self.snapshot.declaration, arguments=self.arguments, call_id=self.call.call_id)


class Ticket:
    """One place in the queue for a slot: ``granted`` once the slot is this call's (at once, or handed over by a
    call that ended); ``wake`` is called, on the releasing thread, when it is handed over."""

    __slots__ = ("granted", "wake")

    def __init__(self, wake: Callable[[], object]) -> None:
        self.wake = wake
        self.granted = False


class Slots:
    """The ``max_parallel`` slots, handed over in arrival order.

    A slot freed goes straight to the first call waiting (its ``wake`` alone is called), so an ending call wakes one
    waiter, not all of them; a waiter is a thread (:meth:`take`) or an event loop's task that waits without a thread
    (:meth:`enqueue`, then its ``wake``)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.running = 0  # slots held
        self._lock = threading.Lock()
        self._waiting: deque[Ticket] = deque()

    def enqueue(self, wake: Callable[[], object]) -> Ticket:
        """A ticket granted now when a slot is free and nobody waits, else queued (``wake`` says when it is granted)."""
        ticket = Ticket(wake)
        with self._lock:
            if self.running < self.total and not self._waiting:
                self.running += 1
                ticket.granted = True
            else:
                self._waiting.append(ticket)
        return ticket

    def take(self, control: CallControl) -> bool:
        """Wait on this thread for a slot; False (and no slot) when ``control`` is cancelled first."""
        woken = threading.Event()
        ticket = self.enqueue(woken.set)
        while not ticket.granted:
            if control.cancelled:
                self.give_up(ticket)
                return False
            # Woken when the slot is handed over (or by close()); a cancellation of this call alone (a pipe, not
            # this event) is seen within the timeout.
            woken.wait(0.05)
            woken.clear()
        if control.cancelled:
            self.release()
            return False
        return True

    def give_up(self, ticket: Ticket) -> None:
        """``ticket`` is no longer wanted: out of the queue, or its slot released when it was granted meanwhile."""
        with self._lock:
            if not ticket.granted:
                self._waiting.remove(ticket)
                return
        self.release()

    def release(self) -> None:
        """A slot held is freed: handed to the first waiter, if any."""
        with self._lock:
            if not self._waiting:
                self.running -= 1
                return
            ticket = self._waiting.popleft()
            ticket.granted = True
        ticket.wake()

    def wake_all(self) -> None:
        """Wake every waiter (they look at their cancellation): close() has cancelled them."""
        with self._lock:
            waiting = list(self._waiting)
        for ticket in waiting:
            ticket.wake()


class Calls:
    """The path every call takes (see the module's picture), with the one limiter and in-flight registry."""

    def __init__(
        self,
        source: Source,
        *,
        before_call: BeforeCall | None = None,
        max_parallel: int | None = None,
        caller: Caller | None = None,
        warm: bool | None = None,
        ahead: bool = True,
        keep_files: bool = False,
    ) -> None:
        """``warm``: True runs every tool warm (docs/performance.md), None those the config or their script name,
        False none (a one-shot run, which would only pay for the server's start). ``ahead``: set up each confined (or
        baseline) call's sandbox before the next call of its kind comes (:mod:`toolexec.runtimes.sandbox_spare`); not
        for a one-shot run, which makes no second call. ``keep_files``: a cold call that ran sealed (its PID namespace
        seen gone) leaves its private files to its tool's next call, as a sealed warm call does (a server:
        ``toolexec mcp``); they live in a directory of the surface's until it closes."""
        self.source = source
        self.warm = warm
        self.ahead = ahead
        self.keep_files = keep_files
        self._pool: WarmPool | None = None
        self._files: FilePool | None = None  # the private files of warm calls, kept between sealed ones
        self._spares: Spares | None = None
        self.before_call = before_call
        self.caller = caller  # who asks, for the audit log: the surface (None: the Python API)
        self.max_parallel = max_parallel or source.config.max_parallel
        self._registry = threading.Condition()  # guards _in_flight, _closed and _threads
        self._in_flight: dict[object, CallControl] = {}
        self.slots = Slots(self.max_parallel)  # the one limiter
        self._closed = False
        self._threads: ThreadPoolExecutor | None = None

    # --- the steps ----------------------------------------------------------------------------

    def prepare(
        self,
        call: ToolCall,
        *,
        admit: Admit | None = None,
        caller: Caller | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> Pending | ToolResult:
        """Resolve, snapshot and validate ``call``; the refusal of a call that cannot run.

        ``admit`` is a filter (a toolkit's): it sees the resolved call and may refuse it with a ToolexecError.
        ``caller`` (else the surface's) is who asks, for the audit log; ``trace`` a carrier whose span the call's
        span continues (else the current span).
        """
        from toolexec.validation import parse_arguments

        started = time.monotonic()
        call_id = call_id_for(call.call_id)  # the one default for a missing call id
        observation = _observe(self.source.config, call.name, call_id, caller or self.caller, trace)
        snapshot = None
        try:
            check_call_id(call_id)
            if call.timeout is not None and (problem := limit_problem("timeout", call.timeout)) is not None:
                from toolexec.errors import brief

                raise BadRequest(f"timeout must be {problem}, got {brief(call.timeout)}")
            if not isinstance(call.name, str):
                raise BadRequest(f"a tool name must be text, got {type(call.name).__name__}")
            snapshot = self.source.snapshot(call.name)
            tool = snapshot.declaration
            if admit is not None:
                admit(tool.name)
            if call.scopes is not None and (missing := missing_scopes(tool.metadata.scopes, call.scopes)):
                raise ScopeMissing(tool.name, missing)
            arguments = snapshot.validator(tool.name, parse_arguments(call.arguments, tool.name))
            if call.input_responses is not None:
                call = replace(call, input_responses=_responses(call.input_responses))
        except ToolexecError as error:
            return _finished(observation, refused(call, error, started=started, call_id=call_id), snapshot, call.arguments)
        except Exception as error:  # a fault of toolexec's own: a result all the same, never an exception
            result = refused(call, InternalError(error), started=started, call_id=call_id)
            return _finished(observation, result, snapshot, call.arguments)
        if tool.name != call.name:
            call = replace(call, name=tool.name)
        return Pending(
            call=call, snapshot=snapshot, arguments=arguments, call_id=call_id, started=started, observation=observation
        )

    def ask(self, pending: Pending) -> Decision | Awaitable[Decision]:
        """The ``before_call`` hook's answer (an awaitable from an async hook); a hook that raises denies."""
        if self.before_call is None:
            return None
        try:
            decision = self.before_call(pending.approval_request())
        except Exception as error:  # a failing hook denies; the caller's program goes on
            return failed_hook(error)
        return _guarded(decision) if _awaitable(decision) else decision

    def decide(self, pending: Pending, decision: Any) -> Pending | ToolResult:
        """The call to run (as approved, or rewritten and validated again), or the refusal the model reads."""
        if decision is None or decision is True:
            return pending
        from toolexec.approval import Deny, Rewrite  # only a hook's answer needs them

        tool = pending.snapshot.declaration
        try:
            if isinstance(decision, Deny):
                raise CallDenied(tool.name, decision.reason)
            if decision is False:
                raise CallDenied(tool.name, "the before_call hook did not allow it")
            if not isinstance(decision, Rewrite):
                raise CallDenied(tool.name, f"the before_call hook returned {decision!r}, not Deny, Rewrite, True, False or None")
            arguments = decision.arguments
            if not isinstance(arguments, dict):
                raise CallDenied(
                    tool.name, f"the before_call hook rewrote the arguments to {type(arguments).__name__}, not an object"
                )
            arguments = pending.snapshot.validator(tool.name, arguments)
        except ToolexecError as error:
            result = results.refusal(tool.name, pending.call_id, error, time.monotonic())
            return _finished(pending.observation, result, pending.snapshot, pending.arguments)
        call = replace(pending.call, name=tool.name, arguments=arguments)
        return replace(pending, call=call, arguments=arguments)

    def approve(self, pending: Pending, control: CallControl | None = None) -> Pending | ToolResult:
        """:meth:`ask` and :meth:`decide` on this thread (an async hook is run to completion here). A call whose
        ``control`` was cancelled while the hook decided (Ctrl-C at a ``--confirm`` question) is cancelled, not
        denied: nobody declined it."""
        if self.before_call is None:
            return pending
        decision = self.ask(pending)
        if _awaitable(decision):
            import asyncio

            decision = asyncio.run(_awaited(decision))
        if control is not None and control.cancelled and decision is not None and decision is not True:
            result = not_run(pending.call, pending.call_id, "cancelled", "the call was cancelled while asking; nothing ran")
            return _finished(pending.observation, result, pending.snapshot, pending.arguments)
        return self.decide(pending, decision)

    def execute(
        self, pending: Pending, control: CallControl, ask: Asker | None = None, *, slot: Ticket | None = None
    ) -> ToolResult:
        """Registered in flight, then a slot, then the engine; unregistered when it returns.

        With ``ask``, the tool may ask questions (:mod:`toolexec.asking`): each is put to ``ask`` with the slot given
        up, and the tool runs again with the answers so far; ``ask`` returning None hands the question back (the
        ``input_required`` result). Without it the tool is told nobody can be asked. ``slot``: a granted
        :meth:`reserve` ticket, the slot of the first run (released here whatever happens)."""
        token = self._register(control)
        if token is None:
            if slot is not None:
                self.slots.give_up(slot)
            return _finished(pending.observation, not_run(pending.call, pending.call_id, "refused", CLOSED), pending.snapshot)
        return self._execute(token, pending, control, ask, slot)

    def reserve(self, pending: Pending, wake: Callable[[], object]) -> Ticket | None:
        """A slot for the first run of ``pending``, for a caller that waits for it without a thread (an event loop):
        granted now, or later (``wake`` is then called from the thread that freed it); hand the granted ticket to
        :meth:`execute`, or to :meth:`withdraw` when the call is given up. None when the tool has caps of its own
        (``max_concurrency``, ``rate``): their wait comes before a slot's, on the call's thread."""
        if _capped(pending.snapshot.config, pending.snapshot.declaration):
            return None
        return self.slots.enqueue(wake)

    def withdraw(self, pending: Pending, ticket: Ticket | None, message: str) -> ToolResult:
        """``pending`` ends before it ran (cancelled while it waited for ``ticket``): the ticket given up, the
        observation ended, the cancelled result."""
        if ticket is not None:
            self.slots.give_up(ticket)
        result = not_run(pending.call, pending.call_id, "cancelled", message)
        return _finished(pending.observation, result, pending.snapshot, pending.arguments)

    def _execute(
        self, token: object, pending: Pending, control: CallControl, ask: Asker | None = None, slot: Ticket | None = None
    ) -> ToolResult:
        try:
            return _finished(pending.observation, self._rounds(pending, control, ask, slot), pending.snapshot, pending.arguments)
        finally:
            with self._registry:
                del self._in_flight[token]
                self._registry.notify_all()

    def _rounds(self, pending: Pending, control: CallControl, ask: Asker | None, slot: Ticket | None = None) -> ToolResult:
        """The tool's runs: one, or one more per question ``ask`` answers (``slot``: the first one's)."""
        while True:
            result = self._run_once(pending, control, ask is not None, slot)
            slot = None
            request = result.input_request
            if request is None or ask is None:
                return result
            from toolexec.asking import MAX_ROUNDS  # only a tool that asks needs the asking module

            if len(_known(pending)) >= MAX_ROUNDS:  # answers given up front (a protocol's rounds) count too
                problem = BadRequest(f"tool {pending.call.name!r} asked more than {MAX_ROUNDS} questions in one call")
                return results.refusal(pending.call.name, pending.call_id, problem, pending.started)
            answer = self._answer(pending, request, ask, control)
            if answer is None:
                return result
            if isinstance(answer, ToolResult):
                return answer
            pending = replace(pending, call=replace(pending.call, input_responses={**_known(pending), request.key: answer}))

    def _run_once(self, pending: Pending, control: CallControl, can_ask: bool, slot: Ticket | None = None) -> ToolResult:
        """One run of the tool: under its own caps (max_concurrency, rate), in one of the ``max_parallel`` slots
        (``slot``: taken already, by :meth:`reserve`)."""
        holds = slot is not None
        observation = pending.observation
        held: Held | None = None
        try:
            waiting = time.monotonic()
            snapshot, tool = pending.snapshot, pending.snapshot.declaration
            if not holds and _capped(snapshot.config, tool):  # the tool's own caps, before a slot
                from toolexec.caps import effective, enter  # only a capped tool needs them

                if (caps := effective(snapshot.config, tool)) is not None:
                    try:
                        timeout = pending.call.timeout or tool.limits.timeout or snapshot.config.timeout
                        held = enter(snapshot.config, tool, caps, timeout, control)
                    except ToolexecError as error:
                        return refused(pending.call, error, started=pending.started, call_id=pending.call_id)
                    if held is None:
                        return not_run(pending.call, pending.call_id, "cancelled", "the call was cancelled before it started")
            holds = holds or self.slots.take(control)
            if not holds or control.cancelled:  # closed (or cancelled) while waiting for a slot
                return not_run(pending.call, pending.call_id, "cancelled", "the call was cancelled before it started")
            if observation is not None:
                observation.queued(time.monotonic() - waiting)
            pool = self._warm_pool(snapshot.config, tool)
            engine = Engine(
                pending.snapshot.config,
                pool=pool,
                files=self._file_pool(snapshot.config, pool),
                spares=self._sandboxes(snapshot.config),
                keep_cold=self.keep_files,
            )
            return engine.execute(
                pending.snapshot,
                pending.call,
                pending.arguments,
                control,
                call_id=pending.call_id,
                started=pending.started,
                can_ask=can_ask,
                observation=observation,
            )
        finally:
            if held is not None:
                held.release()
            if holds:
                self.slots.release()

    def _answer(
        self, pending: Pending, request: InputRequest, ask: Asker, control: CallControl
    ) -> InputResponse | ToolResult | None:
        """``ask``'s answer to ``request``, checked against its schema; the result ending the call when there is none
        to be had (cancelled meanwhile, a failing or wrong answer)."""
        from toolexec.asking import check_response

        name = pending.call.name
        try:
            answer = ask(request)
            if control.cancelled:
                return not_run(pending.call, pending.call_id, "cancelled", "the call was cancelled while it waited for an answer")
            return None if answer is None else check_response(request, answer)
        except ToolexecError as error:
            return results.refusal(name, pending.call_id, error, pending.started)
        except Exception as error:  # the one answering failed: the call ends, the caller's program goes on
            failed = CallDenied(name, f"its question {request.key!r} was not answered: {type(error).__name__}: {error}")
            return results.refusal(name, pending.call_id, failed, pending.started)

    # --- whole calls ---------------------------------------------------------------------------

    def run(
        self,
        call: ToolCall,
        control: CallControl | None = None,
        *,
        admit: Admit | None = None,
        ask: Asker | None = None,
        caller: Caller | None = None,
    ) -> ToolResult:
        """Every step on this thread; ``control`` (made and closed here when not given) cancels the call; ``ask``
        answers the tool's questions (see :meth:`execute`); ``caller`` is who asks (for the audit log)."""
        pending = self.prepare(call, admit=admit, caller=caller, trace=control.trace if control is not None else None)
        if isinstance(pending, Pending):
            pending = self.approve(pending, control)
        if isinstance(pending, ToolResult):
            return pending
        if control is not None:
            return self.execute(pending, control, ask)
        from toolexec.runtimes.process import CallControl

        own = CallControl()
        try:
            return self.execute(pending, own, ask)
        finally:
            own.close()

    def submit(self, pending: Pending | ToolResult, control: CallControl, ask: Asker | None = None) -> Future[ToolResult]:
        """:meth:`execute` on the calls' own threads (``max_parallel`` of them); a result is returned as done."""
        from concurrent.futures import Future, ThreadPoolExecutor

        if isinstance(pending, ToolResult):
            done: Future[ToolResult] = Future()
            done.set_result(pending)
            return done
        with self._registry:  # registered before it is queued, so close() cancels and waits for it too
            token = self._register(control)
            if token is not None:
                if self._threads is None:
                    self._threads = ThreadPoolExecutor(self.max_parallel, thread_name_prefix="toolexec-call")
                return self._threads.submit(self._execute, token, pending, control, ask)
        closed: Future[ToolResult] = Future()
        result = not_run(pending.call, pending.call_id, "refused", CLOSED)
        closed.set_result(_finished(pending.observation, result, pending.snapshot, pending.arguments))
        return closed

    def run_many(
        self, calls: Iterable[ToolCall], control: CallControl, *, admit: Admit | None = None, ask: Asker | None = None
    ) -> list[ToolResult]:
        """``calls`` prepared and approved in order, run concurrently; results in input order.

        If the waiting thread is interrupted (``KeyboardInterrupt``), ``control`` is cancelled and
        the calls have ended before it re-raises.
        """
        from concurrent.futures import wait

        work = []
        for call in calls:
            pending = self.prepare(call, admit=admit, trace=control.trace)
            work.append(self.submit(self.approve(pending, control) if isinstance(pending, Pending) else pending, control, ask))
        try:
            wait(work)
        except BaseException:  # the waiting thread was interrupted: end the calls, then re-raise
            control.cancel()
            wait(work)
            raise
        return [future.result() for future in work]

    # --- warm servers -----------------------------------------------------------------------------

    def _warm_pool(self, config: Config, tool: ToolDeclaration) -> WarmPool | None:
        """The pool a call of ``tool`` forks from (made on the first warm call; :data:`served_pool` in a call
        ``toolexec serve`` forked), or None: it runs cold."""
        if not runs_warm(config, tool, self.warm):
            return None
        if served_pool is not None:
            return served_pool
        with self._registry:
            if self._pool is None and not self._closed:
                from toolexec.callfiles import FilePool
                from toolexec.runtimes.warm import WarmPool

                self._pool = WarmPool(max_servers=config.warm_max, idle=config.warm_idle)
                self._files = FilePool()
            return self._pool

    def _file_pool(self, config: Config, pool: WarmPool | None) -> FilePool | None:
        """Where a call's private files come from and go back to: the pool of warm calls' (made with the warm pool),
        and on a surface that keeps them (``keep_files``) in every mode but ``off`` the same pool for cold calls too,
        whose PID namespace is seen gone before their status (:attr:`toolexec.runtimes.process.Finished.sealed`);
        None: made for the call and removed after it."""
        if pool is not None:
            return self._files
        if config.sandbox == "off" or not self.ahead or not self.keep_files or served_spares is not None:
            return None
        with self._registry:
            if self._files is None and not self._closed and self.ahead:
                from toolexec.callfiles import FilePool

                self._files = FilePool()
            return self._files

    def _sandboxes(self, config: Config) -> Spares | None:
        """The sandboxes set up ahead of this surface's calls (made with the first call that can use one; in a call
        ``toolexec serve`` forked, :data:`served_spares`), or None."""
        if config.sandbox == "off":
            return None
        if served_spares is not None:
            return served_spares
        if not self.ahead:
            return None
        with self._registry:
            if self._spares is None and not self._closed:
                from toolexec.runtimes.sandbox_spare import Spares

                self._spares = Spares(idle=config.warm_idle)
            return self._spares

    # --- the registry and the limiter ----------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """How many calls are registered (waiting for a slot or running)."""
        with self._registry:
            return len(self._in_flight)

    def close(self, timeout: float | None = None) -> bool:
        """Cancel every call in flight and wait (up to ``timeout`` seconds) until they have returned; later calls
        are refused. True when every call has returned. Closing twice is harmless."""
        with self._registry:
            self._closed = True
            for control in self._in_flight.values():
                control.cancel()
            self.slots.wake_all()  # calls waiting for a slot see their cancellation now
            done = self._registry.wait_for(lambda: not self._in_flight, timeout)
            threads, self._threads = (self._threads, None) if done else (None, self._threads)
        if threads is not None:
            threads.shutdown(wait=True)  # every call has returned: the threads are idle
        self.close_warm()
        cgroups = sys.modules.get("toolexec.runtimes.cgroup")  # loaded only where a call made a cgroup
        if done and cgroups is not None:
            cgroups.drain()  # the cgroups of calls that are over are removed off their path: nothing is left at close
        return done

    def settle(self, timeout: float | None = 10.0) -> bool:
        """Wait (up to ``timeout`` seconds) until the private files of the warm calls that are over are kept for the
        next call or removed (done off the calls' paths: :meth:`toolexec.callfiles.FilePool.give_back`); whether
        they are."""
        with self._registry:
            files = self._files
        return files.settle(timeout) if files is not None else True

    def close_warm(self) -> None:
        """Stop the warm servers (each ends once its calls are over, and is reaped) and discard the sandboxes set up
        ahead; later calls run cold."""
        with self._registry:
            pool, self._pool = self._pool, None
            files, self._files = self._files, None
            spares, self._spares = self._spares, None
            self.warm = False
            self.ahead = False
        # The files first: a set given back is tidied off its call's path, and a fresh one made ahead in its place,
        # in a confined server's calls' directory too, which the warm pool's close removes: once closed, the file pool
        # makes none (a call still running gives its files back to a closed pool: they are removed then).
        if files is not None:
            files.close()
        if pool is not None:
            pool.close()
        if spares is not None:
            spares.close()

    def _register(self, control: CallControl) -> object | None:
        with self._registry:
            if self._closed:
                return None
            token = object()
            self._in_flight[token] = control
            return token


# The warm servers of the ``toolexec serve`` this process was forked from to run one call (their pool outlives the
# call, and is never closed here); None: a Calls keeps its own.
served_pool: WarmPool | None = None
# The sandbox set up ahead by such a call's process while it waited (:mod:`toolexec.serve_spares`); None elsewhere.
served_spares: Spares | None = None


def runs_warm(config: Config, tool: ToolDeclaration, everything: bool | None) -> bool:
    """Whether calls of ``tool`` fork from a warm server: never when ``everything`` is False, always when True, else
    when its script says ``Warm: true`` or ``warm_tools`` names it (or says ``all``)."""
    if everything is not None:
        return everything
    return tool.metadata.warm is not None or tool.name in config.warm_tools or "all" in config.warm_tools


def _capped(config: Config, tool: ToolDeclaration) -> bool:
    """Whether a call of ``tool`` may run under caps (:mod:`toolexec.caps`, imported only then): config names the
    tool under ``tool_limits``, or its script declares ``max_concurrency`` or ``rate``."""
    metadata = tool.metadata
    return tool.name in config.tool_limits or metadata.max_concurrency is not None or metadata.rate is not None


def _observe(
    config: Config, name: object, call_id: str, caller: Caller | None, trace: Mapping[str, str] | None
) -> Observation | None:
    """The call's observation (:func:`toolexec.observe.observe`), its module imported only where one may be made: an
    audit log is configured, or tracing may be wanted (an ``OTEL_*`` variable is set, or the program imported
    OpenTelemetry; :func:`toolexec.tracing.wanted` decides)."""
    if config.audit_log is None and "opentelemetry.trace" not in sys.modules and not _otel_variables():
        return None
    from toolexec.observe import observe

    return observe(config, name, call_id, caller, trace)


def _otel_variables() -> bool:
    """Whether an ``OTEL_*`` variable is set. Every call asks: known once per state of ``os.environ``
    (:func:`toolexec.runtimes.environment.otel_variables`), since reading every name each time was most of the step."""
    from toolexec.runtimes.environment import otel_variables

    return otel_variables()


def missing_scopes(needed: Iterable[str], granted: Iterable[str]) -> tuple[str, ...]:
    """The scopes of ``needed`` (a tool's ``Scope:``) that ``granted`` (an access token's) lacks, in order."""
    have = set(granted)
    return tuple(scope for scope in needed if scope not in have)


def _known(pending: Pending) -> dict[str, InputResponse]:
    return dict(pending.call.input_responses or {})


def _responses(given: Any) -> dict[str, InputResponse]:
    """Answers given with a call (``input_responses``), each read as :func:`toolexec.asking.parse_response` reads it."""
    from toolexec.asking import parse_response

    if not isinstance(given, dict):
        raise BadRequest(f"input_responses must be an object of answers keyed by question, got {type(given).__name__}")
    return {str(key): parse_response(value, f"input_responses[{key!r}]") for key, value in given.items()}


def _finished(
    observation: Observation | None, result: ToolResult, snapshot: Snapshot | None, arguments: Any = None
) -> ToolResult:
    """``result``, once its observation (span, audit line) has ended with it."""
    if observation is not None:
        try:
            observation.finish(result, snapshot, arguments)
        except Exception as error:  # a fault in telling the outside never changes the call's result
            import sys

            sys.stderr.write(f"toolexec: the span or audit line of call {result.tool_call_id} failed: {error!r:.200}\n")
    return result


def _awaitable(value: object) -> TypeGuard[Awaitable[Any]]:
    """What ``inspect.isawaitable`` says, without importing ``inspect`` on the one-shot path."""
    if value is None or isinstance(value, bool):
        return False
    if hasattr(type(value), "__await__"):
        return True
    code = getattr(value, "gi_code", None)  # a generator made a coroutine by @types.coroutine
    return code is not None and bool(code.co_flags & 0x100)


async def _awaited(decision: Awaitable[Decision]) -> Decision:
    return await decision


async def _guarded(decision: Awaitable[Decision]) -> Decision:
    """An async hook's answer; one that raises denies, as a sync one does."""
    try:
        return await decision
    except Exception as error:
        return failed_hook(error)


def failed_hook(error: Exception) -> Decision:
    """The denial standing for a hook that raised."""
    from toolexec.approval import Deny

    return Deny(f"the before_call hook failed: {type(error).__name__}: {error}")


def not_run(call: ToolCall, call_id: str, status: Literal["refused", "cancelled"], message: str) -> ToolResult:
    """The result of a call that never started: refused (closed) or cancelled while it waited for a slot."""
    if status == "refused":
        return results.refusal(call.name, call_id, BadRequest(message), time.monotonic())
    return ToolResult(
        ok=False,
        status="cancelled",
        output="",
        error=message,
        exit_code=EXIT_CANCELLED,
        stderr="",
        duration_ms=0.0,
        tool_call_id=call_id,
        tool_name=call.name,
        tool_call_error=f"Tool call '{call.name}' was cancelled",
        reason="cancelled",
    )
