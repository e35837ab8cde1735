"""MCP tasks on the wire, in both protocol eras, over :class:`toolexec.tasks.Tasks`.

* 2025-11-25 (the handshake era): a tool lists ``execution.taskSupport``; the client sends ``tools/call`` with a
  ``task`` field and gets ``{task: Task}`` back; ``tasks/get``, ``tasks/result`` (waits for the end, then the
  ``CallToolResult``, or the error), ``tasks/cancel`` and ``tasks/list``; the server declares ``capabilities.tasks``.
* 2026-07-28 (the ``io.modelcontextprotocol/tasks`` extension): the client declares the extension in the request's
  ``_meta`` client capabilities and gets ``{resultType: "task", …}``; ``tasks/get`` carries the result (or the
  error) once the task ends; ``tasks/cancel`` and ``tasks/update`` answer an empty acknowledgement.

A tool that declares ``task: required`` called without task support is refused: -32601 (2025-11-25) or -32021
with the missing capability (2026-07-28). One with ``task: optional`` runs as an ordinary call then.

Arguments are resolved and validated before a task exists: a refused call is answered at once, as ``tools/call``
answers it, and only a call that will run becomes a task. A task belongs to the principal that started it: over
HTTP a digest of the bearer token (or of the OAuth subject, when the request carries one); over stdio the one
client of this process.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import secrets
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from toolexec.calls import Pending
from toolexec.config import Config
from toolexec.errors import BadRequest
from toolexec.records import ToolCall, ToolResult
from toolexec.store import Store, open_store
from toolexec.tasks import POLL_SECONDS, TERMINAL, Outcome, Tasks

if TYPE_CHECKING:
    from toolexec.mcp import ToolServer

EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
NOT_FOUND = "Failed to retrieve task: Task not found (it never existed, has expired, or belongs to another client)"


# ``tasks/get``, ``tasks/result``, ``tasks/cancel`` and ``tasks/update`` params: the task's id (an update's input
# responses are ignored: toolexec's tasks never ask for input). ``tasks/list`` takes a cursor it does not need.
TaskParams = types.GetTaskRequestParams
ListParams = types.PaginatedRequestParams


def default_store(config: Config) -> Store:
    """The store ``mcp.task_store`` names, else ``cache/.tasks`` in the functions' state directory."""
    spec = config.mcp.task_store or f"dir:{config.state.root / 'cache' / '.tasks'}"
    return open_store(spec, relative_to=config.path.parent)


def principal(ctx: ServerRequestContext[Any, Any], local: str) -> str:
    """Who is asking, as a digest: the OAuth subject or the bearer token over HTTP, this process's client over stdio."""
    request = ctx.request
    if request is None:
        return local
    scope = getattr(request, "scope", None) or {}
    token = getattr(scope.get("user"), "access_token", None)  # set by the SDK's OAuth middleware (mcp.auth)
    subject, client = getattr(token, "subject", None), getattr(token, "client_id", None)
    if isinstance(subject, str) and subject:
        seed = f"oauth-subject:{subject}"  # the user, whichever of their tokens (they expire and are renewed)
    elif isinstance(client, str) and client:
        seed = f"oauth-client:{client}"
    else:
        headers = getattr(request, "headers", None)
        seed = f"bearer:{headers.get('authorization', '') if headers is not None else ''}"
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class McpTasks:
    """The tasks methods and the ``tools/call`` interception of one :class:`~toolexec.mcp.ToolServer`."""

    def __init__(self, server: ToolServer) -> None:
        self.server = server
        self._local = f"stdio:{secrets.token_hex(16)}"  # the one client of a stdio server
        self._tasks: Tasks | None = None
        self._opening = threading.Lock()
        if server.config.mcp.task_store is not None:  # a store named in the config is checked at start
            self._tasks = Tasks(default_store(server.config), server.calls, keep=server.config.mcp.task_ttl)

    @property
    def tasks(self) -> Tasks:
        """The tasks, their store opened on first use (the default directory is made only when a task needs it)."""
        with self._opening:
            if self._tasks is None:
                config = self.server.config
                self._tasks = Tasks(default_store(config), self.server.calls, keep=config.mcp.task_ttl)
            return self._tasks

    def install(self) -> None:
        """Register the methods, the ``tools/call`` middleware and the capabilities of both eras."""
        lowlevel = self.server.server
        lowlevel.middleware.append(self.intercept)
        lowlevel.extensions[EXTENSION] = {}
        for method, params, handler in (
            ("tasks/get", TaskParams, self.get),
            ("tasks/result", TaskParams, self.result),
            ("tasks/cancel", TaskParams, self.cancel),
            ("tasks/list", ListParams, self.list),
            ("tasks/update", TaskParams, self.update),
        ):
            lowlevel.add_request_handler(method, params, handler)  # type: ignore[arg-type]  # each handler takes its params
        capabilities = lowlevel.get_capabilities

        def with_tasks(*args: Any, **kwargs: Any) -> types.ServerCapabilities:
            found = capabilities(*args, **kwargs)
            if kwargs.get("protocol_version") in MODERN_PROTOCOL_VERSIONS:
                return found
            tasks = types.ServerTasksCapability(
                list=types.TasksListCapability(),
                cancel=types.TasksCancelCapability(),
                requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())),
            )
            return found.model_copy(update={"tasks": tasks})

        lowlevel.get_capabilities = with_tasks  # type: ignore[method-assign]

    def close(self, timeout: float) -> None:
        """End the tasks running here (their records say the server stopped) and release the store."""
        if self._tasks is not None:
            self._tasks.close(timeout)

    # --- tools/call ------------------------------------------------------------------------------

    async def intercept(self, ctx: ServerRequestContext[Any, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        """A ``tools/call`` of a task tool, from a client that can take a task, becomes one; the rest pass through."""
        params = ctx.params
        if ctx.method != "tools/call" or not isinstance(params, Mapping) or not isinstance(params.get("name"), str):
            return await call_next(ctx)
        listing = self.server.listing
        tool = listing.by_name.get(listing.map.original(params["name"]))
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        support = tool.metadata.task if tool is not None else None
        task = params.get("task")
        if not modern and task is not None and not isinstance(task, Mapping):
            return await call_next(ctx)  # the ordinary path refuses a malformed 'task' as invalid params
        asked = self._capable(ctx) if modern else task is not None
        if support is None:
            if asked and not modern and tool is not None:
                raise MCPError(types.METHOD_NOT_FOUND, f"tool {params['name']!r} does not run as a task; call it without 'task'")
            return await call_next(ctx)
        if not asked:
            if support == "required":
                raise self._required(params["name"], modern)
            return await call_next(ctx)
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            return await call_next(ctx)  # the ordinary path says what is wrong with them
        requested = task.get("ttl") if isinstance(task, Mapping) else None
        keep = requested / 1000 if isinstance(requested, int) and not isinstance(requested, bool) and requested > 0 else None
        return await self._create(ctx, ToolCall(name=tool.name, arguments=arguments or {}), modern, keep)  # type: ignore[union-attr]

    def _capable(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Whether a 2026-era request declares the tasks extension in its client capabilities."""
        meta = ctx.params.get("_meta") if isinstance(ctx.params, Mapping) else None
        capabilities = meta.get(CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
        extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
        return isinstance(extensions, dict) and EXTENSION in extensions

    @staticmethod
    def _required(name: str, modern: bool) -> MCPError:
        if modern:
            return MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"tool {name!r} runs only as a task: declare the {EXTENSION} extension in the request's client capabilities",
                data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )
        return MCPError(
            types.METHOD_NOT_FOUND,
            f"tool {name!r} runs only as a task (its taskSupport is required): send tools/call with a 'task' field",
        )

    async def _create(self, ctx: ServerRequestContext[Any, Any], call: ToolCall, modern: bool, keep: float | None) -> Any:
        server = self.server
        listing = server.listing

        def prepare() -> Pending | ToolResult:
            pending = server.calls.prepare(call)
            return server.calls.approve(pending) if isinstance(pending, Pending) else pending

        pending = await anyio.to_thread.run_sync(prepare)
        if isinstance(pending, ToolResult):  # refused before it ran: answered as tools/call answers it
            if pending.reason in ("unknown_tool", "not_enabled"):
                raise MCPError(types.INVALID_PARAMS, pending.error or f"unknown tool {call.name!r}")
            return self._wire(server.shape(listing, pending, modern), ctx)
        snapshot = pending.snapshot
        time_limit = pending.call.timeout or snapshot.declaration.limits.timeout or snapshot.config.timeout

        def finish(result: ToolResult) -> Outcome:
            if result.status == "timeout":
                message = result.error or f"Tool call '{result.tool_name}' timed out"
                return Outcome("failed", message, error={"code": types.REQUEST_TIMEOUT, "message": message})
            if result.status == "cancelled":
                return Outcome("cancelled", result.error)
            shaped = server.shape(listing, result, modern)
            return Outcome("completed", result.error if not result.ok else None, result=_dump(shaped))

        owner = principal(ctx, self._local)
        record = await self._store(lambda: self.tasks.start(owner, pending, time_limit, finish, keep=keep))
        shown = self._task(record, modern)
        if modern:
            return self._wire({"resultType": "task", **shown}, ctx)
        return {"task": shown}

    def _wire(self, result: Any, ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
        """What a short-circuiting middleware answers: the wire object, stamped as the runner stamps 2026 results."""
        data = _dump(result) if isinstance(result, BaseModel) else dict(result)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            data.setdefault("resultType", "complete")
            data["_meta"] = {**(data.get("_meta") or {}), types.SERVER_INFO_META_KEY: self.server.server.server_info_stamp}
        return data

    async def _store(self, work: Callable[..., Any], *args: Any) -> Any:
        """``work(*args)`` on a worker thread; a store that fails (unreachable, full) is an internal error whose
        details stay in the server's log."""
        try:
            return await anyio.to_thread.run_sync(work, *args)
        except MCPError:
            raise
        except BadRequest as refusal:  # a bound of toolexec's own (too many tasks): the message says what to do
            raise MCPError(types.INTERNAL_ERROR, str(refusal)) from None
        except Exception as error:
            from toolexec.mcp import log  # noqa: PLC0415 - toolexec.mcp imports this module

            where = self._tasks.store.where if self._tasks is not None else "(not opened)"
            log(f"the task store {where}: {type(error).__name__}: {error}")
            raise MCPError(types.INTERNAL_ERROR, "the task store is unavailable; try again later") from None

    # --- the tasks methods -----------------------------------------------------------------------

    def _task(self, record: dict[str, Any], modern: bool, *, detailed: bool = False) -> dict[str, Any]:
        """A record as the era's ``Task`` (2026 ``tasks/get``: with its result or error inlined)."""
        shown: dict[str, Any] = {"taskId": record["id"], "status": record["status"]}
        if record.get("message"):
            shown["statusMessage"] = record["message"]
        shown["createdAt"] = _iso(record["created"])
        shown["lastUpdatedAt"] = _iso(record["updated"])
        ttl_ms, poll_ms = math.ceil(record["ttl"] * 1000), int(POLL_SECONDS * 2000)
        shown.update({"ttlMs": ttl_ms, "pollIntervalMs": poll_ms} if modern else {"ttl": ttl_ms, "pollInterval": poll_ms})
        if detailed and record["status"] == "completed" and record.get("result") is not None:
            shown["result"] = record["result"]
        if detailed and record["status"] == "failed":
            shown["error"] = record.get("error") or {"code": types.INTERNAL_ERROR, "message": record.get("message") or "failed"}
        return shown

    async def _find(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> dict[str, Any]:
        self._require_capability(ctx)
        owner = principal(ctx, self._local)
        record = await self._store(self.tasks.get, owner, task_id)
        if record is None:
            raise MCPError(types.INVALID_PARAMS, NOT_FOUND)
        return record

    def _require_capability(self, ctx: ServerRequestContext[Any, Any]) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and not self._capable(ctx):
            raise MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"tasks/* needs the {EXTENSION} extension in the request's client capabilities",
                data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/get``: the task as it stands (2026: with its result or error once it ended)."""
        record = await self._find(ctx, params.task_id)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        return {**({"resultType": "complete"} if modern else {}), **self._task(record, modern, detailed=modern)}

    async def result(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/result`` (2025-11-25): wait for the end; the call's result, or the error it ended with."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(
                types.METHOD_NOT_FOUND, "tasks/result is a 2025-11-25 method; on 2026-07-28 tasks/get carries the result"
            )
        record = await self._find(ctx, params.task_id)
        owner = principal(ctx, self._local)
        while record["status"] not in TERMINAL:  # the wait is bounded by the task's own time limit and ttl
            found = await self._store(self.tasks.wait, owner, params.task_id, 5.0)
            if found is None:  # pruned while it ran (its time limit and ttl passed)
                raise MCPError(types.INVALID_PARAMS, NOT_FOUND)
            record = found
        related = {RELATED_TASK: {"taskId": record["id"]}}
        if record["status"] == "completed" and record.get("result") is not None:
            return {**record["result"], "_meta": {**(record["result"].get("_meta") or {}), **related}}
        if record["status"] == "cancelled":
            raise MCPError(types.INVALID_PARAMS, f"task {record['id']} was cancelled: it has no result", data=related)
        error = record.get("error") or {}
        raise MCPError(
            error.get("code", types.INTERNAL_ERROR), error.get("message") or record.get("message") or "failed", data=related
        )

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/cancel``: mark it; the replica running it ends its tree. 2025-11-25 answers the task, 2026 an ack."""
        record = await self._find(ctx, params.task_id)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if record["status"] in TERMINAL:
            if modern:
                return {}
            raise MCPError(types.INVALID_PARAMS, f"Cannot cancel task: already in terminal status {record['status']!r}")
        owner = principal(ctx, self._local)
        marked = await self._store(self.tasks.cancel, owner, params.task_id)
        return {} if modern else self._task(marked or record, modern)

    async def list(self, ctx: ServerRequestContext[Any, Any], params: ListParams) -> dict[str, Any]:
        """``tasks/list`` (2025-11-25): this client's tasks still kept (2026 has no list: task ids are capabilities)."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            raise MCPError(types.METHOD_NOT_FOUND, "tasks/list is a 2025-11-25 method; the 2026-07-28 extension has none")
        owner = principal(ctx, self._local)
        records = await self._store(self.tasks.list, owner)
        return {"tasks": [self._task(record, False) for record in records]}

    async def update(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
        """``tasks/update`` (2026): toolexec's tasks never wait for input, so responses are acknowledged and ignored."""
        await self._find(ctx, params.task_id)
        return {}


def _dump(result: Any) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    return dict(result)
