"""``tools/call`` over stateless Streamable HTTP without the SDK's per-request session.

In stateless mode the SDK serves every POST with a fresh transport, session, dispatcher and SSE response (a task
group, memory streams and a dozen task switches), which costs a warm tool's call several times the call itself.
:class:`DirectCalls` answers a plain ``tools/call`` here instead: the same checks, the ONE call path
(:meth:`toolexec.mcp.ToolServer.answer_call` → :class:`toolexec.calls.Calls`: approval, caps, audit, tracing) and
the same bytes on the wire. Every case but the plain one goes to the SDK:

* **Which requests.** A POST to the endpoint holding one JSON-RPC ``tools/call`` request (an id every encoder writes
  alike), one ``MCP-Protocol-Version`` header of the handshake era (the 2026 revision has its own stateless path in
  the SDK), params of nothing but ``name`` and ``arguments`` (no ``_meta``: a progress token, a trace context; no
  ``task``, ``requestState`` or ``inputResponses``), naming a tool that does not run as a task; never while
  OpenTelemetry traces go somewhere (the SDK's span is then wanted); never ``describe_tool``. A stateless
  handshake-era request has no way back to the client, so no tool can ask it anything on either path.
* **Who may call.** The gate (:class:`toolexec.mcp_http.Gate`) has authenticated the caller and bounded the body
  first, as for every request; the call runs inside the guard's wrapper, so an OAuth token's scopes and subject
  reach the call path as they do through the SDK.
* **The SDK's header checks are not written again.** Host and Origin (DNS-rebinding protection), Content-Type,
  Accept and the era's routing are the SDK's: a set of those headers is admitted once the SDK has answered a
  request carrying exactly them with 200 and an event stream, and that answer's start (status, headers) is what is
  sent again. Until then, and for any other set, the SDK answers (and refuses) as before. At most
  :data:`MAX_ADMITTED` sets are kept.
* **Validated and shaped as the SDK does it**, with its own pieces: the params against the version's surface
  (:func:`mcp_types.methods.validate_client_request`) and the handler's params type (a request either fails goes to
  the SDK, which answers its error); the result dumped, sieved by :func:`mcp_types.methods.serialize_server_result`
  and sent as the SDK's ``JSONRPCResponse``; an exception as the SDK's dispatcher maps it
  (:func:`mcp.shared.jsonrpc_dispatcher.handler_exception_to_error_data`).
* **A client that goes away** cancels its call (its process tree is ended), and nothing is sent.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel

from toolexec.mcp_direct import METHOD, direct_params_type, plain_params, respond
from toolexec.mcp_http_memo import EVENT_PREFIX, EVENT_SUFFIX, KEY_HEADERS, plain_id, traced

if TYPE_CHECKING:
    from toolexec.mcp import ToolServer

__all__ = ["MAX_ADMITTED", "DirectCalls", "Plan"]

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]

MAX_ADMITTED = 64


@dataclass(frozen=True)
class Plan:
    """A ``tools/call`` the direct path may answer: its id, validated params, the era, and the key of its headers."""

    request_id: str | int
    params: types.CallToolRequestParams
    version: str
    key: tuple[tuple[bytes, bytes], ...]


class DirectCalls:
    """The direct ``tools/call`` path of one :class:`~toolexec.mcp.ToolServer` (see the module)."""

    def __init__(self, server: ToolServer, path: str) -> None:
        self.server = server
        self.path = path  # the MCP endpoint's path (``/mcp``)
        self.params_type: type[BaseModel] | None = direct_params_type(server)
        self.usable = self.params_type is not None
        self._admitted: OrderedDict[tuple[tuple[bytes, bytes], ...], dict[str, Any]] = OrderedDict()

    def __len__(self) -> int:
        """How many header sets are admitted."""
        return len(self._admitted)

    def plan(self, scope: dict[str, Any], message: object) -> Plan | None:
        """The plan for a request (its ``scope`` and decoded body), or None when the SDK must answer it."""
        if not self.usable or scope.get("method") != "POST" or scope.get("path") != self.path:
            return None
        if not isinstance(message, types.JSONRPCRequest) or message.method != METHOD or not plain_id(message.id):
            return None
        key = tuple(sorted((name, value) for name, value in scope.get("headers") or [] if name in KEY_HEADERS))
        versions = [value for name, value in key if name == b"mcp-protocol-version"]
        if len(versions) != 1 or (version := versions[0].decode("latin-1")) not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        if traced():  # the SDK's span is wanted
            return None
        assert self.params_type is not None
        typed = plain_params(self.server, self.params_type, message.params, version)
        if typed is None:
            return None
        return Plan(message.id, typed, version, key)

    def admitted(self, plan: Plan) -> bool:
        """Whether the SDK has admitted the plan's headers (see the module)."""
        return plan.key in self._admitted

    async def run_sdk(self, plan: Plan, app: App, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Let ``app`` (the SDK) answer, and admit the request's headers when it answered with 200 and an event
        stream."""
        start: dict[str, Any] | None = None

        async def watch(event: dict[str, Any]) -> None:
            nonlocal start
            if event["type"] == "http.response.start":
                start = event
            await send(event)

        await app(scope, receive, watch)
        if start is None or start.get("status") != 200:
            return
        headers = list(start.get("headers", []))
        if [value for name, value in headers if name.lower() == b"content-type"] != [b"text/event-stream"]:
            return
        self._admitted[plan.key] = {"type": "http.response.start", "status": 200, "headers": headers}
        self._admitted.move_to_end(plan.key)
        while len(self._admitted) > MAX_ADMITTED:
            self._admitted.popitem(last=False)

    async def answer(self, plan: Plan, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Run the call and answer it as the SDK would; nothing is sent when the client went away meanwhile (its
        call is cancelled). Run inside the guard's wrapper (an OAuth token in the SDK's auth context)."""
        from toolexec.mcp import Requester, caller  # noqa: PLC0415 - toolexec.mcp imports the HTTP modules lazily

        start = self._admitted[plan.key]
        authorization = b""
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                authorization = value
                break
        sent = authorization.decode("latin-1")
        server = self.server
        requester = Requester(caller=caller(None, sent, server.authenticating), modern=False, authorization=sent)
        data: bytes | None = None
        with anyio.CancelScope() as call:
            # The client closing the connection cancels its call. Watched by a bare task whose end cancels the call's
            # scope, not a task group: one group per call costs its start, its cancellation and a turn of the event
            # loop to join it, on the way to the answer; the watch is let go without being waited for.
            watch = asyncio.ensure_future(_disconnected(receive))

            def ended(watch: asyncio.Future[None]) -> None:  # (a receive that failed: the connection is gone too)
                if not watch.cancelled():
                    watch.exception()  # (retrieved: never logged as lost)
                call.cancel()

            watch.add_done_callback(ended)
            try:
                data = await self._respond(plan, requester)
            finally:
                watch.remove_done_callback(ended)
                watch.cancel()
        if data is None:
            return
        await send(start)
        await send({"type": "http.response.body", "body": EVENT_PREFIX + data + EVENT_SUFFIX})

    async def _respond(self, plan: Plan, requester: Any) -> bytes:
        """The JSON-RPC response to the plan's request, as the SDK's runner and dispatcher write it."""
        message = await respond(self.server, plan.request_id, plan.params, plan.version, requester)
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode()


async def _disconnected(receive: Receive) -> None:
    """Until the client has closed the connection."""
    while (await receive())["type"] != "http.disconnect":
        pass
