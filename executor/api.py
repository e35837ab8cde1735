"""The public Python API: one :class:`Executor` per config, safe to share between threads and tasks.

Every call, whether from :meth:`Executor.call` (which runs on the calling thread),
:meth:`Executor.acall` or :meth:`Executor.call_many` (which run on the executor's own
threads), takes the one call path (:class:`~toolexec.calls.Calls`): one snapshot of the
tool, validation, the ``before_call`` hook, one of ``config.max_parallel`` slots (a call
waits for a free one), registered with its cancellation while waiting or running, so that
:meth:`Executor.close` can end every call in flight.

Besides calls, the executor is a registry (:meth:`~Executor.get`, :meth:`~Executor.has`,
:meth:`~Executor.names`, :meth:`~Executor.manifest`, :meth:`~Executor.register`),
declares its tools in every provider's format (:meth:`~Executor.declarations`), answers a
model's calls in the shape they came in (:meth:`~Executor.answer`), hands out
:class:`~toolexec.toolkit.Toolkit` subsets, and asks a ``before_call`` hook
(:mod:`toolexec.approval`) before each call runs.
"""

from __future__ import annotations

import os

from toolexec.calls import Calls, Pending
from toolexec.catalog import Catalog, DamagedCatalog
from toolexec.config import Config, load_config
from toolexec.errors import BadRequest, ToolexecError, UnknownTool
from toolexec.records import ToolCall, ToolDeclaration, ToolResult
from toolexec.runtimes.process import CallControl
from toolexec.sources import PolledSource

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from concurrent.futures import Future
    from types import TracebackType
    from typing import Any

    from toolexec.approval import BeforeCall, OnInput
    from toolexec.asking import Asker
    from toolexec.build import BuildReport
    from toolexec.calls import Admit
    from toolexec.providers import Batch, Declarations, Names
    from toolexec.toolkit import DiscoveryReport, Toolkit


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
        variables: dict[str, str] | None = None,
        agent_tools_only: bool = False,
        on_input: OnInput | None = None,
    ) -> None:
        """Load ``config`` (a path, a :class:`Config`, or None for the usual lookup).

        ``before_call`` is the approval hook (:mod:`toolexec.approval`): it sees every call
        with its tool and validated arguments before it runs, and may allow, deny or rewrite it.

        ``on_input`` answers the questions tools ask mid-call (:mod:`toolexec.asking`): given an
        :class:`~toolexec.records.InputRequest`, it returns an :class:`~toolexec.records.InputResponse` (or its
        JSON form), or None to hand the question back as an ``input_required`` result. It may be async (awaited on
        the caller's loop by :meth:`acall`). Without it, tools are told nobody can be asked. A call's own
        ``on_input`` overrides it.

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
        self.source = PolledSource(self.config)
        # The one call path: its limiter (max_parallel slots) and in-flight registry, which close() ends.
        self.calls = Calls(self.source, before_call=before_call)
        self.on_input = on_input

    @property
    def before_call(self) -> BeforeCall | None:
        """The approval hook every call passes (None: every call is allowed)."""
        return self.calls.before_call

    @before_call.setter
    def before_call(self, hook: BeforeCall | None) -> None:
        self.calls.before_call = hook

    @property
    def catalog(self) -> Catalog:
        """The catalog, rebuilt when a visible tool or the config changed since it was read."""
        return self.source.catalog()

    def build(self, *, force: bool = False, on_file: Callable[[str], None] | None = None) -> BuildReport:
        """Compile the visible tools (see :func:`toolexec.build.build`); ``on_file`` follows progress."""
        return self.source.build(force=force, on_file=on_file)

    def tools(self, *, enabled_only: bool = True, tags: Sequence[str] = ()) -> list[ToolDeclaration]:
        """The enabled tools (every visible one with ``enabled_only=False``) and the registered ones,
        keeping those that carry every tag in ``tags``."""

        def listing() -> list[ToolDeclaration]:
            config, catalog, _ = self._serving()
            return catalog.enabled(config) if enabled_only else list(catalog.tools.values())

        try:
            found = listing()
        except DamagedCatalog:  # a record was lost (a cleared cache): rebuild once
            self.source.build(trust_index=False)
            found = listing()
        return [self._enforced(tool) for tool in found if all(tag in tool.metadata.tags for tag in tags)]

    def _enforced(self, tool: ToolDeclaration) -> ToolDeclaration:
        """``tool`` showing the sandbox policy its calls run under (config's ``sandbox_policies`` and ``sandbox`` mode
        applied), not only the one its script declares: what describe, declarations and MCP show."""
        from toolexec.policy import enforced_tool

        return enforced_tool(self.config.sandbox, self.config.sandbox_policies, tool)

    def listing(self, *, enabled_only: bool = True, tags: Sequence[str] = ()) -> list[dict[str, Any]]:
        """What ``toolexec list`` shows of the tools :meth:`tools` returns (``name``, ``language``, ``description``,
        ``title``, ``summary``, ``tags``, ``annotations``, ``source``, ``declares_sandbox``: whether its script declares a
        sandbox policy; ``error`` None), then, without ``tags``, of those
        :meth:`broken` returns (their ``error``, no description): one freshness check, and only the catalog's index is
        read (listing 10,000 tools reads no declaration)."""

        def listing() -> list[dict[str, Any]]:
            config, catalog, _ = self._serving()
            served = [{**row, "error": None} for row in catalog.listing(config, enabled_only=enabled_only)]
            if tags:  # a tool that failed to build has no tags to match
                return [row for row in served if all(tag in row["tags"] for tag in tags)]
            empty: dict[str, Any] = {
                **{"description": None, "title": None, "summary": None, "tags": [], "annotations": None},
                "declares_sandbox": False,
            }
            return served + [{**row, **empty} for row in catalog.broken(config, enabled_only=enabled_only)]

        try:
            return listing()
        except DamagedCatalog:  # a damaged row or a lost record (a cleared cache): rebuild once
            self.source.build(trust_index=False)
            return listing()

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
        return self.source.register(path)

    def unregister(self, name: str) -> None:
        """Forget a tool :meth:`register` added; calls of it are refused from now on."""
        self.source.unregister(name)

    def discovery(self) -> DiscoveryReport:
        """What discovery found: ``searched`` files, ``loaded`` tool names, ``errors`` (file, line, message)."""
        from toolexec.toolkit import discovery_report

        return discovery_report(self.config, self.catalog, list(self.source.registered.values()))

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

    def declarations(
        self, format: str = "openai", *, json_schema: bool = False, only: Iterable[str] | None = None
    ) -> Declarations:
        """The callable tools (those named in ``only``, when given) declared in ``format``: ``openai``,
        ``openai-strict``, ``responses``, ``anthropic``, ``gemini`` (``json_schema=True``: ``parametersJsonSchema``)
        or ``mcp``. A list, ready for a request's ``tools``; its ``notes`` say which declarations had to give way
        (renamed, not strict)."""
        from toolexec.providers import declarations

        tools = self.tools()
        if only is not None:
            wanted = set(only)
            tools = [tool for tool in tools if tool.name in wanted]
        return declarations(tools, format, names=self._serving()[2], json_schema=json_schema)

    def original_name(self, name: str) -> str:
        """The tool a provider-safe name stands for (any provider's), or ``name`` itself."""
        if not self.source.registered and self.source.catalog(name).entry(name) is not None:
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

    def answer(self, data: Any, format: str | None = None, *, cancel: CallControl | None = None) -> Any:
        """Run a model's tool calls and return the result messages in the same provider's shape.

        ``data`` is what the model returned (parsed JSON: a message, a response, a list of
        calls; or the SDK's own object), or a :class:`~toolexec.providers.Batch` from
        :meth:`parse_calls`; see :func:`toolexec.providers.parse_batch` for the accepted shapes.
        """
        from toolexec.providers import Batch, render

        batch = data if isinstance(data, Batch) else self.parse_calls(data, format)
        return render(batch, batch.complete(self.call_many(batch.calls, cancel=cancel)))

    def format_tool_result(self, result: ToolResult, format: str = "openai") -> dict[str, Any]:
        """One result in ``format``'s shape, naming the tool as this executor declared it."""
        from toolexec.providers import format_tool_result

        return format_tool_result(result, format, names=self._serving()[2])

    def broken(self, *, enabled_only: bool = True) -> list[dict[str, Any]]:
        """The visible tools that failed to build: ``name``, ``language``, ``source`` and ``error`` (every problem)."""
        return self.catalog.broken(self.config, enabled_only=enabled_only)

    def instructions(self) -> str:
        """The served agent's instructions, as its model gets them (:func:`toolexec.agents.instructions`):
        ``{{variables}}`` filled in, ``_instructions`` run for dynamic ones. BadRequest without an agent."""
        from toolexec.agents import instructions

        return instructions(self.config, self.tools())

    def describe(self, name: str) -> ToolDeclaration:
        """The declaration and metadata of one visible tool (``toolexec describe``), its sandbox policy the enforced one."""
        return self._enforced(self.source.catalog(name).get(name, self.config))

    def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        cancel: CallControl | None = None,
        on_input: OnInput | None = None,
        input_responses: dict[str, Any] | None = None,
    ) -> ToolResult:
        """Run one tool and return its result; never raises for a failed or refused call.

        Waits for a free slot when ``max_parallel`` calls are already running. Setting
        ``cancel`` (from any thread) ends the tool's whole process tree; so does
        :meth:`close`, which sets it, and so does interrupting the waiting thread
        (``KeyboardInterrupt``), which re-raises once the tool has ended.

        ``on_input`` (else the executor's) answers the tool's questions; ``input_responses`` are answers given
        up front, by question key (what an ``input_required`` result asked, answered out of band).
        """
        call = ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout, input_responses=input_responses)
        return self.calls.run(call, cancel, ask=self._asker(on_input))

    def call_many(
        self, calls: Iterable[ToolCall], *, cancel: CallControl | None = None, on_input: OnInput | None = None
    ) -> list[ToolResult]:
        """Run ``calls`` concurrently, at most ``max_parallel`` at once; results in input order.

        Each result is as :meth:`call` returns it (a refusal or failure is a result).
        Setting ``cancel`` cancels every call of the batch; if the waiting thread is
        interrupted (``KeyboardInterrupt``), the calls are cancelled before it re-raises.
        ``on_input`` (else the executor's) answers the tools' questions, from the calls' threads.
        """
        return self._call_many(calls, cancel, on_input=on_input)

    def _call_many(
        self,
        calls: Iterable[ToolCall],
        cancel: CallControl | None,
        admit: Admit | None = None,
        on_input: OnInput | None = None,
    ) -> list[ToolResult]:
        requests = list(calls)
        if not requests:
            return []
        shared = cancel if cancel is not None else CallControl()
        try:
            return self.calls.run_many(requests, shared, admit=admit, ask=self._asker(on_input))
        finally:
            if cancel is None:
                shared.close()

    def _asker(self, on_input: OnInput | None) -> Asker | None:
        """The call path's ``ask`` for a call on a thread: ``on_input`` (else the executor's); an async one is run
        to completion on that thread."""
        chosen = on_input if on_input is not None else self.on_input
        if chosen is None:
            return None
        from toolexec.asking import on_thread

        return on_thread(chosen)

    async def acall(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        on_input: OnInput | None = None,
        input_responses: dict[str, Any] | None = None,
    ) -> ToolResult:
        """As :meth:`call`; cancelling the awaiting task ends the tool's whole process tree.

        An async ``before_call`` hook (and an async ``on_input``) is awaited on the caller's event loop. The call
        runs on the executor's own threads (not asyncio's default pool, which is smaller than ``max_parallel``
        on a small machine), so ``max_parallel`` calls really run at once.
        """
        call = ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout, input_responses=input_responses)
        return await self._acall(call, on_input=on_input)

    async def _acall(self, call: ToolCall, admit: Admit | None = None, on_input: OnInput | None = None) -> ToolResult:
        import asyncio  # not at module level: it costs a one-shot `toolexec run` ~50 ms

        pending = self.calls.prepare(call, admit=admit)
        if isinstance(pending, Pending):
            decision = self.calls.ask(pending)
            if asyncio.iscoroutine(decision) or isinstance(decision, asyncio.Future):
                decision = await decision
            pending = self.calls.decide(pending, decision)
        if isinstance(pending, ToolResult):
            return pending
        control = CallControl()
        chosen = on_input if on_input is not None else self.on_input
        ask = None
        if chosen is not None:
            from toolexec.asking import on_loop

            ask = on_loop(chosen, asyncio.get_running_loop(), control)
        future = self.calls.submit(pending, control, ask)
        _close_when_done(control, future)  # not before: a task cancelled twice stops waiting
        work = asyncio.wrap_future(future)
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            control.cancel()
            await asyncio.wait([work])
            raise

    def close(self) -> None:
        """Cancel every call in flight and wait until they have returned; later calls are refused.

        A running call's process tree ends and the call returns a ``cancelled``
        result; a call still waiting for a slot returns ``cancelled`` without starting.
        Closing twice is harmless.
        """
        self.calls.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def _serving(self) -> tuple[Config, Catalog, Names]:
        """The config, catalog and provider-safe names calls use: the built catalog plus the registered tools."""
        return self.source.serving()


def _close_when_done(control: CallControl, future: Future[ToolResult]) -> None:
    """Close ``control`` once ``future`` has finished (its pipe is in use until then)."""
    future.add_done_callback(lambda _: control.close())
