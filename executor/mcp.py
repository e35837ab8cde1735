"""``toolexec mcp``: the enabled tools as a Model Context Protocol server, over stdio or Streamable HTTP.

Built on the official SDK's low-level ``Server``, which serves both protocol eras (the
``initialize`` handshake through 2025-11-25 and the stateless 2026-07-28 revision). The
low-level server neither validates arguments nor turns exceptions into ``isError``
results: every call goes through toolexec's one call path (:class:`~toolexec.calls.Calls`,
with its limiter and in-flight registry, over a :class:`~toolexec.sources.WatchedSource`
that the file watcher swaps), whose results carry the model-readable message and a ``reason``.

Only this module and :mod:`toolexec.watch` import the SDK (and pydantic, starlette,
uvicorn, watchfiles): a one-shot ``toolexec run`` never pays for them.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import collections
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeVar, overload

import anyio
import anyio.abc
import jsonschema
import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from referencing import Registry

from toolexec import mcp_asking, mcp_results, strictjson
from toolexec.agents import agent_config, instructions
from toolexec.build import build
from toolexec.calls import Calls, Pending, Ticket
from toolexec.catalog import Catalog
from toolexec.cli import exit_now
from toolexec.config import Config, load_config
from toolexec.errors import BadRequest, ToolexecError, did_you_mean
from toolexec.mcp_auth import client_secret, granted_scopes
from toolexec.mcp_paths import scrub
from toolexec.mcp_stdio import json_safe, stdio_transport
from toolexec.mcp_stdio_call import DirectCalls
from toolexec.mcp_tasks import McpTasks
from toolexec.mcp_threads import CallThreads
from toolexec.observe import Caller
from toolexec.policy import enforced_tool
from toolexec.providers import mcp as mcp_format
from toolexec.providers.names import MCP_NAMES, NameMap
from toolexec.records import ToolCall, ToolDeclaration, ToolResult
from toolexec.recordtype import replace
from toolexec.runtimes.process import CallControl
from toolexec.runtimes.process_linux import protect
from toolexec.serve import companion, stop_companion
from toolexec.sources import WatchedSource
from toolexec.tracing import configure_from_environment
from toolexec.validation import MAX_DEPTH
from toolexec.version import __version__
from toolexec.watch import watch_tools

CatalogMode = Literal["full", "summaries"]
T = TypeVar("T")
# What answer_call_then hands a call's answer to, on the call's thread: a function that makes the answer (or raises).
Then = Callable[[Callable[[], "types.CallToolResult | types.InputRequiredResult"]], T]
DESCRIBE_TOOL = "describe_tool"
# Progress events waiting for a slow client, per call; past it the oldest give way to the newest.
PROGRESS_PENDING = 16
# How long a cancelled call may take to end its tree (SIGTERM, grace, SIGKILL) before the server stops waiting.
CANCEL_WAIT_SECONDS = 10.0
# Threads for calls beyond the max_parallel running: those that wait outside a slot (for a client's answer to a
# tool's question, or for their tool's own caps). A call waiting for a slot waits on the event loop, in no thread.
WAITING_THREADS = 64


def log(message: str) -> None:
    """A diagnostic line on stderr (never stdout: on stdio that is the protocol stream)."""
    print(f"toolexec mcp: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True, kw_only=True)
class ServeOptions:
    """How ``toolexec mcp`` serves: the catalog form, page size and whether to reload on edits."""

    catalog: CatalogMode = "full"
    page_size: int | None = None  # None: the config's mcp.page_size
    reload: bool = True
    # Serve one agent of the config (its functions, then its shared tools), its instructions as the server's.
    agent: str | None = None
    variables: dict[str, str] | None = None
    agent_tools_only: bool = False  # only the agent's own functions (llm-functions' AGENT_TOOLS_ONLY)
    # True: every tool runs warm (--warm; docs/performance.md); None: those the config or their script name.
    warm: bool | None = None


# How a progress event reaches the client: (progress, total, message).
ReportProgress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True, kw_only=True)
class Requester:
    """Who sends one ``tools/call`` and what their connection allows: read from the SDK's request context
    (:meth:`of`), or from the HTTP request itself by the direct path (:mod:`toolexec.mcp_http_call`)."""

    caller: Caller  # for the audit log
    modern: bool  # the 2026-07-28 revision (or later)
    authorization: str | None  # the Authorization header sent ("" for none); None off HTTP (stdio)
    ask: mcp_asking.Answerer | None = None  # how the client answers a tool's questions (None: it cannot)
    progress: ReportProgress | None = None  # None: the client sent no progress token

    @classmethod
    def of(cls, ctx: ServerRequestContext[Any, Any], authenticating: bool) -> Requester:
        """The requester of the request ``ctx`` describes."""
        params = getattr(ctx.session, "client_params", None)
        info = getattr(params, "client_info", None)
        headers = getattr(ctx.request, "headers", None)
        authorization = None if headers is None else (headers.get("authorization") or "")
        listening = (ctx.meta or {}).get("progress_token") is not None
        return cls(
            caller=caller(f"{info.name} {info.version}".strip() if info is not None else None, authorization, authenticating),
            modern=mcp_results.modern(ctx),
            authorization=authorization,
            ask=mcp_asking.answerer(ctx),
            progress=ctx.session.report_progress if listening else None,
        )


def caller(client: str | None, authorization: str | None, authenticating: bool) -> Caller:
    """Who asks, for the audit log: the client as it named itself, and the bearer token's subject when the server
    checks one (the OAuth access token's subject or client, or ``static token`` for ``mcp.token_env``'s)."""
    subject = None
    oauth = get_access_token()
    if oauth is not None:
        subject = getattr(oauth, "subject", None) or oauth.client_id
    elif authenticating and authorization:
        subject = "static token"
    return Caller(surface="mcp", client=client, subject=subject)


def summary_of(tool: ToolDeclaration) -> str:
    """The one-line summary: the declared one, else the description's first line."""
    return tool.metadata.summary or (tool.description.strip().split("\n", 1)[0] if tool.description else tool.name)


def mcp_tool(tool: ToolDeclaration, name: str, *, summaries: bool, any_shape: bool = False) -> types.Tool:
    """The ``tools/list`` entry of one tool: :func:`toolexec.providers.mcp.declare`'s (what
    ``toolexec declarations --format mcp`` prints), or in summaries mode the one-line summary and no parameters."""
    declared = mcp_format.declare(tool, name, any_shape=any_shape).declaration
    if summaries:
        declared = {
            **{key: value for key, value in declared.items() if key in ("name", "title", "annotations")},
            "description": f"{summary_of(tool)} (call {DESCRIBE_TOOL} for its parameters)",
            "inputSchema": {"type": "object"},
        }
    return types.Tool.model_validate(declared)


def describe(tool: ToolDeclaration, name: str) -> dict[str, Any]:
    """What ``describe_tool`` returns: the full spec, worked examples and error modes."""
    meta = tool.metadata
    declared = mcp_format.declare(tool, name, any_shape=True).declaration
    return {
        "name": name,
        "title": meta.title,
        "summary": summary_of(tool),
        "description": tool.description,
        "inputSchema": declared["inputSchema"],
        "outputSchema": declared.get("outputSchema"),
        "annotations": {key: value for key, value in declared.get("annotations", {}).items() if key != "title"},
        "tags": list(meta.tags),
        "examples": list(meta.examples),
        "errors": list(meta.errors),
        **({"taskSupport": meta.task} if meta.task else {}),
    }


DESCRIBE_TOOL_SPEC = types.Tool(
    name=DESCRIBE_TOOL,
    title="Describe a tool",
    description="Return one tool's full specification: description, input and output schema, examples and error modes. "
    "Call it before using a tool whose parameters you do not know.",
    input_schema={
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The tool's name as listed."}},
        "required": ["name"],
        "additionalProperties": False,
    },
    annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
)


class Listing:
    """The tools offered by one catalog under one config, in catalog order, under their MCP names.

    The names are :mod:`toolexec.providers.names`' map over every tool of the catalog, so they
    are the ones ``toolexec declarations --format mcp`` prints and ``Executor`` maps back.
    """

    def __init__(self, config: Config, catalog: Catalog, *, summaries: bool) -> None:
        # each showing the sandbox policy its calls run under (config's sandbox_policies and mode applied)
        self.tools = [enforced_tool(config.sandbox, config.sandbox_policies, tool) for tool in catalog.enabled(config)]
        self.map = NameMap(catalog.tools, MCP_NAMES)
        self.names = {t.name: self.map.safe(t.name) for t in self.tools}  # enabled tool → its MCP name
        self.by_name = {t.name: t for t in self.tools}
        self.by_mcp_name = {self.names[t.name]: t for t in self.tools}
        self.entries = [mcp_tool(t, self.names[t.name], summaries=summaries) for t in self.tools]
        # What a 2026-07-28 client is offered: output schemas of any shape. Only a tool whose output is not an object
        # is listed otherwise; every other entry is the same object in both lists (1,000 tools: one set in memory).
        self.modern_entries = [
            mcp_tool(t, self.names[t.name], summaries=summaries, any_shape=True) if _any_shape_only(t, summaries) else entry
            for t, entry in zip(self.tools, self.entries, strict=True)
        ]
        if summaries and DESCRIBE_TOOL not in self.by_mcp_name:
            self.entries.append(DESCRIBE_TOOL_SPEC)
            self.modern_entries.append(DESCRIBE_TOOL_SPEC)
        self._checks: dict[str, Any] = {}

    def output_check(self, tool: ToolDeclaration) -> Any:
        """A JSON Schema validator of the tool's declared output, made once per listing."""
        if tool.name not in self._checks:
            schema = mcp_format.output_schema(tool, any_shape=True)
            # An empty registry: a reference outside the schema is never fetched.
            check = jsonschema.Draft202012Validator(schema, registry=Registry()) if schema is not None else None
            self._checks[tool.name] = check
        return self._checks[tool.name]


def _any_shape_only(tool: ToolDeclaration, summaries: bool) -> bool:
    """Whether a 2026-07-28 client is offered more of ``tool`` than an earlier one: an output schema that is not an
    object's (:func:`toolexec.providers.mcp.output_schema`), in the full listing."""
    return not summaries and mcp_format.output_schema(tool, any_shape=True) != mcp_format.output_schema(tool)


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode().rstrip("=")


def _offset(cursor: str, total: int) -> int:
    """The offset an opaque cursor stands for; a cursor this server did not make is invalid params."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset = data["offset"]
        if isinstance(offset, int) and not isinstance(offset, bool) and 0 <= offset <= total:
            return offset
    except (ValueError, TypeError, KeyError, binascii.Error):
        pass
    raise MCPError(types.INVALID_PARAMS, f"invalid cursor {cursor[:64]!r}: pass a nextCursor from a previous tools/list")


class LatestProgress:
    """One call's progress on its way to the client, bounded and coalesced: at most :data:`PROGRESS_PENDING` events
    wait, and when a tool writes faster than the client reads, the oldest waiting ones give way to the newest (which
    always goes out). A fast writer costs a few events of memory, never a queue.

    ``put`` is called from the thread running the call; iterating (in the event loop) yields the waiting events in
    order until ``close``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: collections.deque[dict[str, Any]] = collections.deque(maxlen=PROGRESS_PENDING)
        self._waking = False  # a wake-up is on its way to the loop: later events only join the pending ones
        self._closed = False
        self._ready = anyio.Event()
        self._token = anyio.lowlevel.current_token()

    def put(self, event: dict[str, Any]) -> None:
        """Add ``event`` (from the call's thread)."""
        with self._lock:
            self._pending.append(event)
            if self._waking or self._closed:
                return
            self._waking = True
        with contextlib.suppress(Exception):  # the loop is gone: nobody is left to tell
            anyio.from_thread.run_sync(self._ready.set, token=self._token)

    def close(self) -> None:
        """No more events (in the loop): iteration ends after the pending ones."""
        with self._lock:
            self._closed = True
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            await self._ready.wait()
            with self._lock:
                events = list(self._pending)
                self._pending.clear()
                self._waking, self._ready = False, anyio.Event()
                closed = self._closed
            for event in events:
                yield event
            if closed:
                return


class ToolServer:
    """One MCP server over one config's enabled tools; reloadable while it serves."""

    def __init__(self, config_source: Any, options: ServeOptions) -> None:
        self.config_source = config_source
        self.options = options
        config = self._load()
        report = build(config)
        self._report_problems(report.problems)
        self.source = WatchedSource(config, report.catalog)
        # the one call path: its limiter and in-flight registry; a sealed cold call's files serve its tool's next call
        self.calls = Calls(self.source, caller=Caller(surface="mcp"), warm=options.warm, keep_files=True)
        self.listing = Listing(config, report.catalog, summaries=options.catalog == "summaries")
        self.bus = InMemorySubscriptionBus()
        self.legacy_sessions: list[ServerSession] = []  # stdio: the one handshake-era connection, for list_changed
        self._reported: set[str] = set(report.problems)
        self.stale: str | None = None  # why the tools served are not those on disk (a reload failed); None: fresh
        self.built = time.time()  # when the catalog served was built
        self._stop_watching = anyio.Event()
        self.authenticating = False  # whether HTTP requests carry a checked bearer token (for the audit log)
        self.stopping = False  # set by SIGTERM/SIGINT: calls cancelled from now on are answered "shutting down"
        self._drained: Callable[[], Awaitable[None]] | None = None  # stdio: until every request is answered
        self._call_threads: anyio.CapacityLimiter | None = None  # the calls' worker threads (made in the loop)
        self._threads = CallThreads()  # the threads of calls that need no anyio worker (toolexec.mcp_threads)
        self.server: Server[Any] = Server(
            "toolexec",
            version=__version__,
            instructions=self._instructions(report.catalog),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
            on_list_resources=mcp_results.list_resources,
            on_read_resource=self.read_resource,
        )
        self.owner = mcp_results.process_secret()  # stdio: who the files of results belong to
        self.server.middleware.append(self._remember_session)
        self.server.middleware.append(mcp_asking.state_boundary(config))  # seals a question's requestState
        self.task_support = McpTasks(self)  # tools that declare `task` run as MCP tasks (toolexec.mcp_tasks)
        self.task_support.install()

    @property
    def config(self) -> Config:
        """The config being served (swapped by a reload)."""
        return self.source.config

    @property
    def catalog(self) -> Catalog:
        """The catalog being served (swapped by a reload)."""
        return self.source.catalog

    @property
    def page_size(self) -> int:
        """Tools per ``tools/list`` page."""
        return self.options.page_size or self.config.mcp.page_size

    # --- protocol handlers -------------------------------------------------------------------

    async def _remember_session(self, ctx: ServerRequestContext[Any, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        """Keep the stdio connection's session: a handshake-era list_changed goes out on its standalone channel."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and ctx.request is None:
            self.legacy_sessions[:] = [ctx.session]
        return await call_next(ctx)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """``tools/list``: the enabled tools in catalog order, ``page_size`` at a time."""
        entries = self.listing.modern_entries if mcp_results.modern(ctx) else self.listing.entries
        start = _offset(params.cursor, len(entries)) if params is not None and params.cursor else 0
        end = start + self.page_size
        return types.ListToolsResult(
            tools=entries[start:end],
            next_cursor=_cursor(end) if end < len(entries) else None,
            **mcp_results.list_cache(self.options.reload),
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """``resources/read``: a file a result linked to, for the client it was returned to."""
        owner = mcp_results.owner_of(ctx, self.owner)
        return await anyio.to_thread.run_sync(mcp_results.read_resource, params.uri, owner, self.config)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """``tools/call`` as the SDK hands it over: :meth:`answer_call` for the request ``ctx`` describes."""
        return await self.answer_call(params, Requester.of(ctx, self.authenticating))

    async def answer_call(
        self, params: types.CallToolRequestParams, requester: Requester
    ) -> types.CallToolResult | types.InputRequiredResult:
        """``tools/call`` through the engine; refusals and failures are ``isError`` results, an unknown tool is -32602;
        a tool's question goes to the client (:mod:`toolexec.mcp_asking`). The SDK's handler and the direct HTTP path
        (:mod:`toolexec.mcp_http_call`) both answer here."""
        call, finish = self._call_of(params, requester)
        if call is None:
            return finish(None)
        result = await self._invoke(requester, call)
        if result.ok and result.artifacts:  # (their files are read: off the event loop)
            return await anyio.to_thread.run_sync(finish, result)
        return finish(result)

    async def answer_call_then(self, params: types.CallToolRequestParams, requester: Requester, then: Then[T]) -> T:
        """:meth:`answer_call`, its answer handed to ``then`` on the call's own thread (as a function that makes it,
        or raises what :meth:`answer_call` would): what ``then`` returns, once the call's thread has run it. The direct
        stdio path writes the response there (:mod:`toolexec.mcp_stdio_call`), with no hop back to the event loop on
        the call's way out."""
        call, finish = self._call_of(params, requester)
        if call is None:
            return then(lambda: finish(None))
        return await self._invoke(requester, call, lambda result: then(lambda: finish(result)))

    def _call_of(
        self, params: types.CallToolRequestParams, requester: Requester
    ) -> tuple[ToolCall | None, Callable[[ToolResult | None], types.CallToolResult | types.InputRequiredResult]]:
        """The call ``params`` ask for (None: ``describe_tool``, answered without one) and what makes its answer of its
        result (on any thread: it reads an artifact's files)."""
        listing = self.listing
        if params.name == DESCRIBE_TOOL and self.options.catalog == "summaries" and DESCRIBE_TOOL not in listing.by_mcp_name:
            return None, lambda _: self._describe(listing, params.arguments)
        name = listing.map.original(params.name)
        tool = listing.by_name.get(name)
        call = ToolCall(name=name, arguments=params.arguments if params.arguments is not None else {}, scopes=granted_scopes())
        call = mcp_asking.resumed(call, params)

        def finish(result: ToolResult | None) -> types.CallToolResult | types.InputRequiredResult:
            assert result is not None
            return self._answer(listing, params, requester, call, tool, result)

        return call, finish

    def _answer(
        self,
        listing: Listing,
        params: types.CallToolRequestParams,
        requester: Requester,
        call: ToolCall,
        tool: ToolDeclaration | None,
        result: ToolResult,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The answer to ``call`` once it has ``result``."""
        if result.input_request is not None:
            return mcp_asking.input_required(result, call)
        if self.stopping and result.status == "cancelled":
            raise MCPError(
                types.INTERNAL_ERROR,
                f"toolexec mcp is shutting down: the call of {params.name!r} was cancelled and its processes ended; "
                "send it again once the server is back",
            )
        if result.reason in ("unknown_tool", "not_enabled"):
            raise MCPError(types.INVALID_PARAMS, self.scrub(result.error or f"unknown tool {params.name!r}"))
        answer = self.shape(listing, result, requester.modern, tool)
        if result.ok and result.artifacts and not answer.is_error:
            owner = mcp_results.owner_for(requester.authorization, self.owner)
            files = mcp_results.content(result.artifacts, owner)
            answer.content = [block for block in answer.content if not _empty_text(block)] + files
        return answer

    def shape(
        self, listing: Listing, result: ToolResult, modern: bool, tool: ToolDeclaration | None = None
    ) -> types.CallToolResult:
        """The ``CallToolResult`` of a finished call (a task's result too) for a client of the 2026-07-28 revision
        (``modern``) or an earlier one: an error, or the output as declared; what toolexec says in it carries no
        server path."""
        if not result.ok:
            return _error(self.scrub(result.error or f"Tool call '{result.tool_name}' failed"))
        result = replace(result, notes=tuple(self.scrub(note) for note in result.notes))
        return self._success(listing, tool or listing.by_name.get(result.tool_name), result, modern)

    def scrub(self, text: str) -> str:
        """``text`` (what toolexec, not the tool, says to a client) without the server's paths (:func:`scrub`)."""
        return scrub(text, self.config)

    def _describe(self, listing: Listing, arguments: dict[str, Any] | None) -> types.CallToolResult:
        name = (arguments or {}).get("name")
        tool = listing.by_mcp_name.get(name) if isinstance(name, str) else None
        if tool is None:
            return _error(
                f"no tool named {name!r}{did_you_mean(str(name), list(listing.by_mcp_name))}; pass a name from tools/list"
            )
        spec = describe(tool, listing.names[tool.name])
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(spec, indent=2, ensure_ascii=False))], structured_content=spec
        )

    def _success(self, listing: Listing, tool: ToolDeclaration | None, result: ToolResult, modern: bool) -> types.CallToolResult:
        text = result.output + "".join(f"\n[toolexec note: {note}]" for note in result.notes)
        check = listing.output_check(tool) if tool is not None else None
        if check is None:
            return types.CallToolResult(content=[types.TextContent(text=text)])
        try:
            value = _output_json(result.output)
        except ValueError as exc:
            return _error(
                f"Tool call '{result.tool_name}' declared an output schema but its output is not JSON ({exc}): {result.output[:200]}"
            )
        problems = sorted(check.iter_errors(value), key=lambda e: list(e.absolute_path))
        if problems:
            where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in problems[0].absolute_path) or "(root)"
            return _error(
                f"Tool call '{result.tool_name}' returned output that does not conform to its declared output schema: "
                f"at {where}: {problems[0].message}"
            )
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(value, ensure_ascii=False))],
            structured_content=mcp_results.structured(value, modern),
        )

    @overload
    async def _invoke(self, requester: Requester, call: ToolCall) -> ToolResult: ...

    @overload
    async def _invoke(self, requester: Requester, call: ToolCall, then: Callable[[ToolResult], T]) -> T: ...

    async def _invoke(self, requester: Requester, call: ToolCall, then: Callable[[ToolResult], Any] | None = None) -> Any:
        """Run one call down the call path; progress events become notifications; cancelling the request ends the
        call's tree. ``then``: run on the result where the call ran (its thread; a call refused before it had one: here),
        and what it returns is returned.

        The call is prepared here, waits for its slot here (a queued call holds no thread), and runs in a worker
        thread once it has it. Progress is wired (a pipe for the tool, a task forwarding its lines) only when the
        client sent a progress token: otherwise there is no one to tell, and the tool sees no ``LLM_PROGRESS``.
        """
        pending = self.calls.prepare(call, caller=requester.caller)
        if isinstance(pending, ToolResult):
            return pending if then is None else then(pending)
        slot = await self._slot(pending)
        report = requester.progress
        listening = report is not None
        ask = requester.ask
        latest = LatestProgress() if listening else None

        def on_event(event: dict[str, Any]) -> None:
            if event.get("event") == "progress" and latest is not None:
                latest.put(event)

        control = CallControl(on_event=on_event if listening else None)
        done = threading.Event()

        def work() -> Any:
            try:
                approved = self.calls.approve(pending)
                if isinstance(approved, ToolResult):
                    if slot is not None:
                        self.calls.slots.give_up(slot)
                    result = approved
                else:
                    result = self.calls.execute(approved, control, mcp_asking.with_answerer(ask, control), slot=slot)
                return result if then is None else then(result)
            finally:
                done.set()

        async def forward(latest: LatestProgress) -> None:
            assert report is not None
            async for event in latest:
                with contextlib.suppress(Exception):  # a closed stream must not fail the call
                    await report(event["progress"], event.get("total"), event.get("message"))

        if self._call_threads is None:
            self._call_threads = anyio.CapacityLimiter(self.calls.max_parallel + WAITING_THREADS)
        try:
            if latest is None and ask is None:  # nobody listens or answers: a call thread of our own (mcp_threads)
                return await self._threads.run(work, self._call_threads)
            if latest is None:  # nobody listens for progress: no task group to make and end per call
                return await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=self._call_threads)
            async with anyio.create_task_group() as group:
                group.start_soon(forward, latest)
                try:
                    result = await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=self._call_threads)
                finally:
                    latest.close()
            return result
        except anyio.get_cancelled_exc_class():
            control.cancel()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(done.wait, CANCEL_WAIT_SECONDS)
            raise
        finally:
            if done.is_set():
                control.close()

    async def _slot(self, pending: Pending) -> Ticket | None:
        """The call's slot under ``max_parallel``, waited for on the event loop (None: the call takes it on its
        thread, after its tool's own caps). Cancelled while it waits, the call ends there: not run."""
        if self.calls.before_call is not None:  # an approval comes first, and may take long: no slot held meanwhile
            return None
        loop = asyncio.get_running_loop()
        granted = asyncio.Event()

        def wake() -> None:  # on the thread that freed the slot
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
                loop.call_soon_threadsafe(granted.set)

        ticket = self.calls.reserve(pending, wake)
        if ticket is None or ticket.granted:
            return ticket
        try:
            await granted.wait()
        except BaseException:
            self.calls.withdraw(pending, ticket, "the call was cancelled before it started")
            raise
        return ticket

    async def cancel_all(self) -> None:
        """Cancel every call in flight and wait until their process trees are gone (bounded); later calls are refused."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.task_support.close, CANCEL_WAIT_SECONDS)  # their records say so
            await anyio.to_thread.run_sync(self.calls.close, CANCEL_WAIT_SECONDS)

    def _load(self) -> Config:
        """The config served: the one found, or the config of its agent named by the options."""
        config = load_config(self.config_source)
        if self.options.agent is None:
            return config
        return agent_config(config, self.options.agent, given=self.options.variables, tools_only=self.options.agent_tools_only)

    def _instructions(self, catalog: Catalog) -> str:
        """The server's ``instructions``: an agent's own (filled in, dynamic ones run), else what toolexec serves."""
        if self.config.agent is None:
            return "Tools compiled by toolexec from scripts; each call runs the script in its own process."
        return instructions(self.config, catalog.enabled(self.config)) or f"The tools of the agent {self.config.agent.name}."

    # --- hot reload ----------------------------------------------------------------------------

    def _report_problems(self, problems: list[str]) -> None:
        for problem in problems:
            log(problem)

    async def reload(self) -> bool:
        """Rebuild what changed and swap the catalog; announce list_changed when the offered tools differ."""

        def rebuild() -> tuple[Config, Any]:
            config = self._load()
            return config, build(config)

        try:
            config, report = await anyio.to_thread.run_sync(rebuild)
        except ToolexecError as error:
            log(f"{error} (still serving the previous tools)")
            self.stale = "the config or the tools could not be reloaded: serving the previous tools (see the server's log)"
            return False
        self.stale, self.built = None, time.time()
        fresh = [p for p in report.problems if p not in self._reported]
        self._reported = set(report.problems)
        self._report_problems(fresh)
        old = self.listing
        diff = report.catalog.diff(self.catalog)
        self.source.swap(config, report.catalog)
        self.listing = Listing(config, report.catalog, summaries=self.options.catalog == "summaries")
        offered = set(old.names) | set(self.listing.names)
        changed = (
            any(n in offered for n in (*diff.added, *diff.removed, *diff.changed))
            or set(old.names) != set(self.listing.names)
            or old.entries != self.listing.entries  # a tool renamed for MCP, say, by a new one taking its name
        )
        if changed:
            await self.announce()
        return changed

    def close(self) -> None:
        """Stop the file watcher and the warm servers (the server keeps nothing on disk)."""
        self._stop_watching.set()
        self._threads.close()
        self.calls.close_warm()

    async def announce(self) -> None:
        """notifications/tools/list_changed to the handshake-era stdio client, and the event to 2026 listeners."""
        for session in list(self.legacy_sessions):
            with contextlib.suppress(Exception):
                await session.send_tool_list_changed()
        await self.bus.publish(ToolsListChanged())

    # --- serving ---------------------------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve over stdin/stdout until EOF or SIGTERM/SIGINT; then cancel the calls in flight and return."""
        init = self.server.create_initialization_options(NotificationOptions(tools_changed=True))
        async with anyio.create_task_group() as group:
            group.start_soon(self._signals, self._stop_stdio)
            if self.options.reload:
                group.start_soon(self._watch)
            try:
                async with stdio_transport(DirectCalls(self)) as (read, write, drained):
                    self._drained = drained
                    await self.server.run(read, write, init)
            finally:
                self.close()  # the watcher stops within one step, not after its 5 s timeout
                await self.cancel_all()
                group.cancel_scope.cancel()

    async def serve_http(self, sock: Any, host: str, token: str | None, client_secret: str | None = None) -> None:
        """Serve Streamable HTTP (stateless: no per-client state) on ``sock`` until SIGTERM/SIGINT.

        A stop ends the calls in flight first (each is answered with an error saying so), then lets uvicorn
        finish the responses and close the connections, and returns: the process exits 0."""
        import uvicorn  # noqa: PLC0415 - slow to import, and only --http needs it

        from toolexec.mcp_http import quiet_loop_errors, uvicorn_config  # noqa: PLC0415 - imports uvicorn

        gate, _ = self.http_app(host, token, client_secret)
        shown = f"[{host}]" if ":" in host else host

        class Uvicorn(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Any:  # ours: a stop ends the calls in flight and exits 0, not by the signal
                yield

        server = Uvicorn(uvicorn_config(gate))

        async def stop() -> None:
            await self.cancel_all()
            server.should_exit = True

        quiet_loop_errors()
        log(f"serving http://{shown}:{sock.getsockname()[1]}/mcp")
        async with anyio.create_task_group() as group:
            group.start_soon(self._signals, stop)
            if self.options.reload:
                group.start_soon(self._watch)
            try:
                await server.serve(sockets=[sock])
            finally:
                self.close()
                await self.cancel_all()
                sock.close()
                group.cancel_scope.cancel()

    def http_app(self, host: str, token: str | None, client_secret: str | None = None) -> tuple[Any, Any]:
        """The ASGI app serving Streamable HTTP on ``host`` (:class:`toolexec.mcp_http.Gate` in front of the SDK's
        stateless app), and the SDK's app (whose lifespan runs its session manager)."""
        from toolexec.mcp_http import Gate, guard_and_routes  # noqa: PLC0415 - imports uvicorn
        from toolexec.mcp_http_call import DirectCalls  # noqa: PLC0415 - only --http needs it
        from toolexec.mcp_http_memo import ListMemo  # noqa: PLC0415 - only --http needs it

        self.authenticating = token is not None or self.config.mcp.auth is not None
        guard, routes = guard_and_routes(self, token, client_secret)
        app = self.server.streamable_http_app(
            stateless_http=True,
            transport_security=self._transport_security(host),
            host=host,
            custom_starlette_routes=routes,
        )
        memo = ListMemo("/mcp", lambda: self.listing)
        return Gate(app, guard, memo=memo, direct=DirectCalls(self, "/mcp")), app

    def _transport_security(self, host: str) -> TransportSecuritySettings:
        """DNS-rebinding protection: Host must be this server's (or a configured proxy's); Origin a loopback or configured one."""
        settings = self.config.mcp
        shown = f"[{host}]" if ":" in host else host
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", f"{shown}:*", *settings.allowed_hosts],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *settings.allowed_origins],
        )

    async def _watch(self) -> None:
        await watch_tools(self, self._stop_watching)

    async def _stop_stdio(self) -> None:
        """SIGTERM/SIGINT on stdio: end every call's tree, answer each request in flight (a call says the server is
        shutting down), then exit 0 (the stdin reader thread cannot be interrupted while it waits for a line, so the
        process ends here rather than by unwinding)."""
        await self.cancel_all()
        if self._drained is not None:
            with anyio.move_on_after(CANCEL_WAIT_SECONDS):
                await self._drained()
        self.close()
        _exit_now()

    async def _signals(self, stop: Callable[[], Any]) -> None:
        """The first SIGTERM/SIGINT stops the server; later ones find it stopping already (and do not kill it)."""
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as group:
                async for _ in signals:
                    if not self.stopping:
                        self.stopping = True
                        group.start_soon(self._stop, stop)

    async def _stop(self, stop: Callable[[], Any]) -> None:
        outcome = stop()
        if outcome is not None:
            await outcome


def _output_json(output: str) -> Any:
    """A tool's output read as the JSON its output schema promises (:mod:`toolexec.strictjson`), in a form any
    client can be sent (lone surrogates replaced); ValueError saying what it is not."""
    return json_safe(strictjson.loads(output, MAX_DEPTH))


def _empty_text(block: Any) -> bool:
    """An empty text block (a tool that returned only files)."""
    return isinstance(block, types.TextContent) and not block.text


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _exit_now() -> NoReturn:
    """End the process at once, exit status 0: every call has ended and the client has gone, so nothing is left
    to do but the interpreter's teardown of the SDK's modules, which takes a loaded machine most of a second the
    client would wait for (the atexit handlers still run: the process helper's guard is stopped)."""
    exit_now(0)


def main(config_source: Any, *, http: str | None, token_env: str | None, options: ServeOptions, no_token: bool = False) -> int:
    """Run the server until its input ends or it is told to stop; 0 on a clean stop."""
    from toolexec.mcp_http import listen, parse_bind, resolve_token  # noqa: PLC0415 - imports uvicorn

    protect()  # the server's memory holds the token and every client's arguments: no tool may read it
    configure_from_environment()  # OpenTelemetry from the OTEL_* variables, when any is set
    bind = parse_bind(http) if http is not None else None
    if bind is None and (no_token or token_env):
        raise BadRequest(f"{'--no-token' if no_token else '--token-env'} applies to --http only; stdio needs no token")
    server = ToolServer(config_source, options)
    # One-shot `toolexec run` calls of the same config are served while this runs (toolexec serve; not an agent's).
    one_shot = companion(server.config.path, warm=options.warm) if options.agent is None else None
    atexit.register(stop_companion, one_shot)  # _exit_now runs the atexit handlers only
    try:
        settings = server.config.mcp
        if settings.cwd is not None:  # a GUI client starts its servers in /: tool calls start where the config says
            server.config_source = server.config_source if server.config.embedded else server.config.path
            os.chdir(settings.cwd)
        if bind is None:
            if sys.stdin.isatty():  # a person typed it: say what it waits for
                log(
                    "serving MCP over stdin/stdout: it waits for a client's JSON-RPC messages (Ctrl-D or Ctrl-C ends it; "
                    "--http PORT serves HTTP; see docs/mcp.md)"
                )
            anyio.run(server.serve_stdio)
            _exit_now()
        if settings.auth is not None:
            if no_token or token_env:
                raise BadRequest(f"{'--no-token' if no_token else '--token-env'} does not apply under mcp.auth (OAuth): drop it")
            secret = client_secret(settings.auth)
            sock = listen(*bind)
            log(f"OAuth: tokens from {settings.auth.issuer} for {settings.auth.audience} (mcp.auth)")
            anyio.run(server.serve_http, sock, bind[0], None, secret)
            return 0
        token = resolve_token(server.config, token_env, no_token=no_token, host=bind[0])
        if token_env:  # read once; no tool inherits it (mcp.token_env is kept from tools by Config.secret_names)
            os.environ.pop(token_env, None)
        sock = listen(*bind)
        anyio.run(server.serve_http, sock, bind[0], token.value if token is not None else None)
        return 0
    finally:
        server.close()
