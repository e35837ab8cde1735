"""The public Python API: one :class:`Executor` per config, safe to share between threads and tasks.

Every call, whether from :meth:`Executor.call` (which runs on the calling thread),
:meth:`Executor.acall` or :meth:`Executor.call_many` (which run on the executor's own
threads), takes one of ``config.max_parallel`` slots while it runs (the one concurrency
limiter: a call waits for a free slot) and is registered with its cancellation while
waiting or running, so that :meth:`Executor.close` can end every call in flight.

Besides calls, the executor is a registry (:meth:`~Executor.get`, :meth:`~Executor.has`,
:meth:`~Executor.names`, :meth:`~Executor.manifest`, :meth:`~Executor.register`),
declares its tools in every provider's format (:meth:`~Executor.definitions`), answers a
model's calls in the shape they came in (:meth:`~Executor.answer`), hands out
:class:`~toolexec.toolkit.Toolkit` subsets, and asks a ``before_call`` hook
(:mod:`toolexec.approval`) before each call runs.
"""

from __future__ import annotations

import os
import threading
import time

from toolexec import results
from toolexec.catalog import Catalog, DamagedCatalog, expand_enabled, load_catalog
from toolexec.config import Config, load_config
from toolexec.engine import Engine, refused
from toolexec.errors import EXIT_CANCELLED, BadRequest, CallDenied, ToolexecError, UnknownTool
from toolexec.records import ToolCall, ToolDeclaration, ToolResult
from toolexec.runtimes.process import Cancellation
from toolexec.state import call_id_for

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
    from concurrent.futures import Future, ThreadPoolExecutor
    from types import TracebackType
    from typing import Any, Literal, TypeGuard

    from toolexec.approval import ApprovalRequest, BeforeCall, Decision
    from toolexec.build import BuildReport
    from toolexec.providers import Batch, Definitions, Names
    from toolexec.toolkit import DiscoveryReport, Toolkit

CLOSED = "the executor is closed; create a new Executor to call tools"


class Executor:
    """Builds, lists and calls the tools of one config.

    >>> ex = Executor("config.yaml")            # doctest: +SKIP
    >>> ex.call("demo_py", {"text": "hi"}).output  # doctest: +SKIP

    Use it as a context manager (or call :meth:`close`) to end the calls still
    running when you are done: ``with Executor() as ex: ...``.
    """

    def __init__(
        self,
        config: Config | str | os.PathLike[str] | None = None,
        *,
        before_call: BeforeCall | None = None,
        agent: str | None = None,
        variables: Mapping[str, str] | None = None,
        agent_tools_only: bool = False,
    ) -> None:
        """Load ``config`` (a path, a :class:`Config`, or None for the usual lookup).

        ``before_call`` is the approval hook (:mod:`toolexec.approval`): it sees every call
        with its tool and validated arguments before it runs, and may allow, deny or rewrite it.

        With ``agent``, the executor serves that agent of the config (:mod:`toolexec.agents`): its own
        functions, then its shared tools (only its own with ``agent_tools_only``); ``variables``
        gives values to the agent's variables (over ``agent_variables`` in config and the environment).
        """
        loaded = config if isinstance(config, Config) else load_config(config)
        if agent is not None:
            from toolexec.agents import agent_config

            loaded = agent_config(loaded, agent, given=variables, tools_only=agent_tools_only)
        elif variables:
            raise BadRequest("variables are given to an agent's functions: name the agent too (agent=NAME, --agent NAME)")
        self.config = loaded
        self.before_call = before_call
        self._catalog: Catalog | None = None
        # Tools registered at run time (outside visible_tools), and the catalog that serves them too.
        self._registered: dict[str, ToolDeclaration] = {}
        self._serving_cache: tuple[Catalog, int, Config, Catalog, Names] | None = None
        self._generation = 0
        self._lock = threading.Lock()
        # Calls in flight (queued or running), so close() can cancel them.
        self._in_flight: dict[object, Cancellation] = {}
        self._registry = threading.Condition()  # guards _in_flight, _closed, _running and _threads
        self._closed = False
        # The one concurrency limiter: a call runs only while it holds one of max_parallel slots.
        self._running = 0
        # Where call_many and acall run their calls (made on first use; call runs on its caller's thread).
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
        """The enabled tools (every visible one with ``enabled_only=False``) and the registered ones,
        keeping those that carry every tag in ``tags``."""

        def listing() -> list[ToolDeclaration]:
            config, catalog, _ = self._serving()
            return catalog.enabled(config) if enabled_only else list(catalog.tools.values())

        try:
            found = listing()
        except DamagedCatalog:  # a record was lost (a cleared cache): rebuild once
            self.build()
            found = listing()
        return [tool for tool in found if all(tag in tool.metadata.tags for tag in tags)]

    # --- the registry --------------------------------------------------------------------

    def get(self, name: str) -> ToolDeclaration:
        """The declaration of a callable tool (enabled or registered; a provider-safe name is mapped back).

        Raises :class:`UnknownTool` or :class:`~toolexec.errors.NotEnabled` as a call would be refused.
        """
        config, catalog, _ = self._serving()
        return catalog.get_enabled(self.original_name(name), config)

    def has(self, name: str) -> bool:
        """Whether :meth:`get` would find ``name``."""
        try:
            self.get(name)
        except ToolexecError:
            return False
        return True

    def names(self) -> list[str]:
        """The callable tools' names, sorted."""
        return sorted(tool.name for tool in self.tools())

    def manifest(self) -> list[dict[str, Any]]:
        """``{"name", "description", "input_schema"}`` of each callable tool, sorted by name."""
        tools = sorted(self.tools(), key=lambda tool: tool.name)
        return [{"name": t.name, "description": t.description, "input_schema": t.to_function()["parameters"]} for t in tools]

    def register(self, path: str | os.PathLike[str]) -> ToolDeclaration:
        """Compile the tool file at ``path`` (outside ``visible_tools``) and make it callable until :meth:`unregister`.

        It is validated like a build (a :class:`~toolexec.errors.CompileError` lists every
        problem); a name another tool already has is refused with :class:`BadRequest`.
        """
        from pathlib import Path

        from toolexec.compilers import compile_file

        source = Path(path).resolve()
        tool = compile_file(source)
        catalog = self.catalog
        taken = {entry.name: str(self.config.tools_dir / entry.file) for entry in catalog.entries}
        taken.update({name: t.source for name, t in self._registered.items()})
        if tool.name in taken:
            raise BadRequest(f"cannot register {source}: tool name {tool.name!r} is already used by {taken[tool.name]}")
        with self._lock:
            self._registered[tool.name] = tool
            self._generation += 1
        return tool

    def unregister(self, name: str) -> None:
        """Forget a tool :meth:`register` added; calls of it are refused from now on."""
        with self._lock:
            if name not in self._registered:
                registered = ", ".join(sorted(self._registered)) or "none"
                raise BadRequest(f"tool {name!r} was not registered with register() (registered: {registered})")
            del self._registered[name]
            self._generation += 1

    def discovery(self) -> DiscoveryReport:
        """What discovery found: ``searched`` files, ``loaded`` tool names, ``errors`` (file, line, message)."""
        from toolexec.toolkit import discovery_report

        return discovery_report(self.config, self.catalog, list(self._registered.values()))

    def toolkit(self, name: str | Iterable[str]) -> Toolkit:
        """A :class:`~toolexec.toolkit.Toolkit`: a ``mapping_tools`` alias, or an explicit list of tool names."""
        from toolexec.toolkit import Toolkit

        if isinstance(name, str):
            if name not in self.config.mapping_tools:
                aliases = ", ".join(sorted(self.config.mapping_tools)) or "none"
                raise BadRequest(
                    f"no toolkit {name!r}: it is not a mapping_tools alias in {self.config.path} (aliases: {aliases}); "
                    "pass a list of tool names for an ad hoc toolkit"
                )
            label, members = name, list(self.config.mapping_tools[name])
        else:
            members = [self.original_name(tool) for tool in name]
            label = ",".join(members)
        known = self._serving()[1].tools
        unknown = [tool for tool in members if tool not in known]
        if unknown:
            raise (
                UnknownTool(unknown[0], known, because=None)
                if len(unknown) == 1
                else BadRequest(f"toolkit {label!r} names unknown tools: {', '.join(unknown)}")
            )
        return Toolkit(self, label, members)

    # --- providers' formats --------------------------------------------------------------

    def definitions(self, format: str = "openai", *, json_schema: bool = False) -> list[dict[str, Any]]:
        """The callable tools declared in ``format``: ``openai``, ``openai-strict``, ``responses``,
        ``anthropic``, ``gemini`` (``json_schema=True``: ``parametersJsonSchema``) or ``mcp``."""
        return self.declarations(format, json_schema=json_schema).declarations

    def declarations(
        self, format: str = "openai", *, json_schema: bool = False, only: Iterable[str] | None = None
    ) -> Definitions:
        """As :meth:`definitions`, with a note per tool whose declaration had to give way (renamed, not strict)."""
        from toolexec.providers import definitions

        tools = self.tools()
        if only is not None:
            wanted = set(only)
            tools = [tool for tool in tools if tool.name in wanted]
        return definitions(tools, format, names=self._serving()[2], json_schema=json_schema)

    def original_name(self, name: str) -> str:
        """The tool a provider-safe name stands for (any provider's), or ``name`` itself."""
        if not self._registered and self._fresh_catalog(name).entry(name) is not None:
            return name  # a tool's own name: no name map (which lists every tool) is needed
        return self._serving()[2].original(name)

    def parse_calls(self, data: Any, format: str | None = None) -> Batch:
        """A model's tool calls (parsed JSON, in ``format``'s shape or the first that fits), names mapped back.

        A ``null`` sent for an optional parameter that does not accept ``null`` (what
        OpenAI's strict mode sends for "not given") is dropped, so the tool's default applies.
        """
        from dataclasses import replace

        from toolexec.providers import parse_batch
        from toolexec.providers.schema import drop_optional_nulls
        from toolexec.validation import parse_arguments

        _, catalog, names = self._serving()
        batch = parse_batch(data, format, names=names)
        entries: list[ToolCall | ToolResult] = []
        for entry in batch.entries:
            tool = catalog.tools.get(entry.name) if isinstance(entry, ToolCall) else None
            if isinstance(entry, ToolCall) and tool is not None:
                try:
                    arguments = parse_arguments(entry.arguments, tool.name)
                except ToolexecError:
                    arguments = entry.arguments  # refused, with its message, when it runs
                entry = replace(entry, arguments=drop_optional_nulls(tool.parameters, arguments))
            entries.append(entry)
        return replace(batch, entries=tuple(entries))

    def answer(self, data: Any, format: str | None = None, *, cancel: Cancellation | None = None) -> Any:
        """Run a model's tool calls and return the result messages in the same provider's shape.

        ``data`` is what the model returned (parsed JSON: a message, a response, a list of
        calls); see :func:`toolexec.providers.parse_batch` for the accepted shapes.
        """
        from toolexec.providers import render

        batch = self.parse_calls(data, format)
        return render(batch, batch.complete(self.call_many(batch.calls, cancel=cancel)))

    def format_tool_result(self, result: ToolResult, format: str = "openai") -> dict[str, Any]:
        """One result in ``format``'s shape, naming the tool as this executor declared it."""
        from toolexec.providers import format_tool_result

        return format_tool_result(result, format, names=self._serving()[2])

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

    def instructions(self) -> str:
        """The served agent's instructions, as its model gets them (:func:`toolexec.agents.instructions`):
        ``{{variables}}`` filled in, ``_instructions`` run for dynamic ones. BadRequest without an agent."""
        from toolexec.agents import instructions

        return instructions(self.config, self.tools())

    def describe(self, name: str) -> ToolDeclaration:
        """The declaration and metadata of one visible tool (``toolexec describe``)."""
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
        request = self._resolve(ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout))
        approved = self._approve(request) if self.before_call is not None else request
        if isinstance(approved, ToolResult):
            return approved
        control = cancel if cancel is not None else Cancellation()
        try:
            with self._registry:  # registered before it waits for a slot, so close() cancels and waits for it too
                token = self._register(control)
            if token is None:
                return _not_run(approved, "refused", CLOSED)
            return self._run(token, approved, control)
        finally:
            if cancel is None:
                control.close()

    def call_many(self, calls: Iterable[ToolCall], *, cancel: Cancellation | None = None) -> list[ToolResult]:
        """Run ``calls`` concurrently, at most ``max_parallel`` at once; results in input order.

        Each result is as :meth:`call` returns it (a refusal or failure is a result).
        Setting ``cancel`` cancels every call of the batch; if the waiting thread is
        interrupted (``KeyboardInterrupt``), the calls are cancelled before it re-raises.
        """
        from concurrent.futures import Future, wait

        requests = [self._resolve(request) for request in calls]
        if not requests:
            return []
        shared = cancel if cancel is not None else Cancellation()
        work: list[Future[ToolResult]] = []
        for request in requests:
            approved = self._approve(request) if self.before_call is not None else request
            if isinstance(approved, ToolResult):
                done: Future[ToolResult] = Future()
                done.set_result(approved)
                work.append(done)
            else:
                work.append(self._submit(approved, shared))
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

        request = self._resolve(ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout))
        if self.before_call is not None:
            checked = self._check(request)
            if isinstance(checked, ToolResult):
                return checked
            try:
                decision = self.before_call(checked[1])
                if _awaitable(decision):
                    decision = await decision
            except Exception as error:  # a failing hook denies; the caller's program goes on
                decision = _failed_hook(error)
            approved = self._decided(request, checked[0], checked[1], decision)
            if isinstance(approved, ToolResult):
                return approved
            request = approved
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
            self._registry.notify_all()  # calls waiting for a slot see their cancellation now
            self._registry.wait_for(lambda: not self._in_flight)
            threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=True)  # every call has returned: the threads are idle

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def _call_catalog(self, tool: str | None) -> tuple[Config, Catalog]:
        """The config and catalog a call of ``tool`` runs against: without registered tools, the catalog
        checked for that tool only (see :meth:`_fresh_catalog`), so no other tool's row is read."""
        if not self._registered:
            return self.config, self._fresh_catalog(tool)
        config, catalog, _ = self._serving()
        return config, catalog

    def _serving(self) -> tuple[Config, Catalog, Names]:
        """The config, catalog and provider-safe names calls use: the built catalog plus the registered tools."""
        try:
            return self._serving_once()
        except DamagedCatalog:  # a damaged index row or a lost record, met while listing: rebuilt once
            self.build()
            return self._serving_once()

    def _serving_once(self) -> tuple[Config, Catalog, Names]:
        from dataclasses import replace

        from toolexec.catalog import Entry
        from toolexec.providers import Names

        base = self.catalog
        with self._lock:
            cached = self._serving_cache
            if cached is not None and cached[0] is base and cached[1] == self._generation:
                return cached[2], cached[3], cached[4]
            registered = list(self._registered.values())
            config, catalog = self.config, base
            if registered:
                extra = tuple(Entry(file=t.source, name=t.name, stat=None, sha256=None, declaration=t) for t in registered)
                catalog = Catalog(fingerprint=base.fingerprint, entries=base.entries + extra)
                if config.enabled_tools is not None:
                    config = replace(config, enabled_tools=(*config.enabled_tools, *self._registered))
            names = Names(catalog.tools)
            self._serving_cache = (base, self._generation, config, catalog, names)
            return config, catalog, names

    def _resolve(self, request: ToolCall) -> ToolCall:
        """``request`` naming the tool itself when it came with a provider-safe name."""
        try:
            name = self.original_name(request.name) if isinstance(request.name, str) else request.name
        except ToolexecError:  # no catalog to map names with: the call itself is refused, as a result
            return request
        return (
            request
            if name == request.name
            else ToolCall(name=name, arguments=request.arguments, call_id=request.call_id, timeout=request.timeout)
        )

    def _check(self, request: ToolCall) -> tuple[ToolDeclaration, ApprovalRequest] | ToolResult:
        """What the hook is shown (the tool and validated arguments), or the refusal of a call that fails before it."""
        from toolexec.approval import ApprovalRequest
        from toolexec.validation import parse_arguments

        started = time.monotonic()
        try:
            config, catalog, _ = self._serving()
            tool = catalog.get_enabled(request.name, config)
            # the hook sees the arguments the tool would run with (a number given for a string made a string)
            arguments = catalog.validator(tool.name)(tool.name, parse_arguments(request.arguments, tool.name))
        except ToolexecError as error:
            return results.refusal(request.name, call_id_for(request.call_id), error, started)
        return tool, ApprovalRequest(tool=tool, arguments=arguments, call_id=request.call_id)

    def _approve(self, request: ToolCall) -> ToolCall | ToolResult:
        """Ask the ``before_call`` hook (an async one runs to completion here) about ``request``."""
        checked = self._check(request)
        if isinstance(checked, ToolResult):
            return checked
        tool, asked = checked
        assert self.before_call is not None
        try:
            decision = self.before_call(asked)
            if _awaitable(decision):
                import asyncio

                decision = asyncio.run(_awaited(decision))
        except Exception as error:  # a failing hook denies; the caller's program goes on
            decision = _failed_hook(error)
        return self._decided(request, tool, asked, decision)

    def _decided(self, request: ToolCall, tool: ToolDeclaration, asked: ApprovalRequest, decision: Any) -> ToolCall | ToolResult:
        """The call to run (as approved or rewritten), or the refusal the model reads."""
        from toolexec.approval import Deny, Rewrite

        started = time.monotonic()
        arguments: Any = asked.arguments
        try:
            if isinstance(decision, Deny):
                raise CallDenied(tool.name, decision.reason)
            if decision is False:
                raise CallDenied(tool.name, "the before_call hook did not allow it")
            if isinstance(decision, Rewrite):
                arguments = decision.arguments
                if not isinstance(arguments, dict):
                    raise CallDenied(
                        tool.name, f"the before_call hook rewrote the arguments to {type(arguments).__name__}, not an object"
                    )
                arguments = self._serving()[1].validator(tool.name)(tool.name, arguments)
            elif decision is not None and decision is not True:
                raise CallDenied(tool.name, f"the before_call hook returned {decision!r}, not Deny, Rewrite, True, False or None")
        except ToolexecError as error:
            return results.refusal(tool.name, call_id_for(request.call_id), error, started)
        return ToolCall(name=tool.name, arguments=arguments, call_id=request.call_id, timeout=request.timeout)

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
        """Run the registered call once it holds a slot, then unregister it: the path every call takes."""
        holds = False
        try:
            holds = self._take_slot(control)
            if not holds:  # closed (or cancelled) while waiting for a slot
                return _not_run(request, "cancelled", "the call was cancelled before it started")
            try:
                config, catalog = self._call_catalog(request.name if isinstance(request.name, str) else None)
            except ToolexecError as error:  # the catalog could not be (re)built: no writable state directory
                return refused(request, error, started=time.monotonic())
            return Engine(config, catalog).invoke(request, control)
        finally:
            with self._registry:
                self._running -= holds
                del self._in_flight[token]
                self._registry.notify_all()

    def _take_slot(self, control: Cancellation) -> bool:
        """Wait for one of the ``max_parallel`` slots; False when the call was cancelled first."""
        with self._registry:
            while self._running >= self.config.max_parallel and not control.cancelled:
                # A slot freed or close() wakes this at once; a cancellation of this call alone
                # (a pipe, not this condition) is seen within the timeout.
                self._registry.wait(0.05)
            if control.cancelled:
                return False
            self._running += 1
            return True


def _awaitable(value: object) -> TypeGuard[Awaitable[Any]]:
    import inspect  # only a before_call hook's answer needs it

    return inspect.isawaitable(value)


async def _awaited(decision: Awaitable[Decision]) -> Decision:
    return await decision


def _failed_hook(error: Exception) -> Decision:
    from toolexec.approval import Deny

    return Deny(f"the before_call hook failed: {type(error).__name__}: {error}")


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
    call_id = call_id_for(request.call_id)
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
