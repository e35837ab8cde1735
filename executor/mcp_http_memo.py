"""A memo of the SDK's own answer to ``tools/list`` over stateless Streamable HTTP.

In stateless mode the SDK serves every POST with a fresh transport, session, dispatcher and SSE
response (nine tasks and twenty stream hand-offs for one ``tools/list``), although what it answers
is a function of the tools served and the request's headers alone. :class:`ListMemo` keeps the
SDK's answer to each such request, as the SDK sent it, and answers the same request again with it,
the request's own id spliced in: byte for byte what the SDK would send, for a fraction of its cost.

What is memoised, and when the SDK answers instead (every case but the plain one goes to the SDK):

* only a ``tools/list`` request whose params hold nothing but a ``cursor``, in a handshake-era
  protocol version (the 2026 revision has its own, stateless path in the SDK), after the gate has
  admitted the caller: authentication and body bounds are never skipped;
* keyed by the tools served (the listing object, swapped by a reload, which empties the memo), the
  params and every header the SDK's checks read (Host, Origin, Accept, Content-Type, the protocol
  version, a session id): a request the SDK would refuse is refused by the SDK;
* only a 200 answer made of one ``message`` event holding a result for the request's id is kept,
  at most :data:`MAX_ENTRIES` of them (a client varying its headers cannot make the memo grow);
* never while OpenTelemetry traces go somewhere (a tracer provider is set): each request has its span then.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp_types import JSONRPCRequest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import trace

__all__ = ["EVENT_PREFIX", "EVENT_SUFFIX", "KEY_HEADERS", "MAX_ENTRIES", "ListMemo", "Lookup", "plain_id", "traced"]

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]

MAX_ENTRIES = 64
# The request headers the SDK's answer depends on (its transport security, Accept, Content-Type and protocol checks).
KEY_HEADERS = frozenset(
    {b"host", b"origin", b"accept", b"content-type", b"mcp-protocol-version", b"mcp-session-id", b"last-event-id"}
)
EVENT_PREFIX = b"event: message\r\ndata: "
EVENT_SUFFIX = b"\r\n\r\n"


@dataclass(frozen=True)
class Lookup:
    """A memoisable request: its key, and the id its answer carries."""

    key: tuple[Any, ...]
    request_id: str | int


class ListMemo:
    """The SDK's ``tools/list`` answers by request, for the listing that ``served()`` returns (see the module)."""

    def __init__(self, path: str, served: Callable[[], object]) -> None:
        self.path = path  # the MCP endpoint's path (``/mcp``)
        self.served = served  # the tools served now: a new object after every reload
        self._listing: object = None
        self._entries: OrderedDict[tuple[Any, ...], tuple[dict[str, Any], bytes]] = OrderedDict()

    def __len__(self) -> int:
        """How many answers are kept."""
        return len(self._entries)

    def key(self, scope: dict[str, Any], message: object) -> Lookup | None:
        """What to look a request up by (its ``scope`` and decoded body), or None when the SDK must answer it."""
        if scope.get("method") != "POST" or scope.get("path") != self.path:
            return None
        if not isinstance(message, JSONRPCRequest) or message.method != "tools/list" or not plain_id(message.id):
            return None
        params = message.params
        if params is not None and (set(params) - {"cursor"} or not isinstance(params.get("cursor", ""), str)):
            return None  # _meta (a progress token, say) and anything else: the SDK's
        headers = tuple(sorted((name, value) for name, value in scope.get("headers") or [] if name in KEY_HEADERS))
        versions = [value for name, value in headers if name == b"mcp-protocol-version"]
        if len(versions) != 1 or versions[0].decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        if traced():
            return None
        return Lookup((headers, (params or {}).get("cursor")), message.id)

    async def answer(self, lookup: Lookup, send: Send) -> bool:
        """Answer from the memo; False when it holds nothing for ``key`` (the caller then runs the SDK: :meth:`run`)."""
        if self.served() is not self._listing:
            return False
        found = self._entries.get(lookup.key)
        if found is None:
            return False
        start, result = found
        await send(start)
        await send({"type": "http.response.body", "body": EVENT_PREFIX + _response(lookup.request_id, result) + EVENT_SUFFIX})
        return True

    async def run(self, lookup: Lookup, app: App, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """Let ``app`` (the SDK) answer, and keep its answer when it is the plain one (see the module)."""
        listing = self.served()
        start: dict[str, Any] | None = None
        body: list[bytes] = []

        async def keep(event: dict[str, Any]) -> None:
            nonlocal start
            if event["type"] == "http.response.start":
                start = event
            elif event["type"] == "http.response.body":
                body.append(event.get("body", b""))
            await send(event)

        await app(scope, receive, keep)
        if start is None or start.get("status") != 200 or self.served() is not listing:
            return
        result = _result(lookup.request_id, b"".join(body))
        if result is None:
            return
        if listing is not self._listing:
            self._entries.clear()
            self._listing = listing
        self._entries[lookup.key] = (
            {"type": "http.response.start", "status": 200, "headers": list(start.get("headers", []))},
            result,
        )
        while len(self._entries) > MAX_ENTRIES:
            self._entries.popitem(last=False)


def traced() -> bool:
    """Whether the SDK's spans go anywhere: a tracer provider is set (``OTEL_*`` configured one, see
    :func:`toolexec.tracing.configure_from_environment`); the SDK imports OpenTelemetry whether or not."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def plain_id(request_id: object) -> bool:
    """An id written the same by every JSON encoder: an integer, or printable ASCII text needing no escape."""
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return True
    return isinstance(request_id, str) and all(" " <= c <= "~" and c not in '"\\' for c in request_id)


def _response(request_id: str | int, result: bytes) -> bytes:
    """The JSON-RPC response to ``request_id`` carrying ``result`` (JSON), as the SDK encodes one."""
    return b'{"jsonrpc":"2.0","id":' + _id(request_id) + b',"result":' + result + b"}"


def _id(request_id: str | int) -> bytes:
    """A request id as the SDK's pydantic encoder writes it (text unescaped but for JSON's own escapes)."""
    return json.dumps(request_id, ensure_ascii=False, separators=(",", ":")).encode()


def _result(request_id: str | int, body: bytes) -> bytes | None:
    """The result JSON inside the SDK's answer ``body`` to ``request_id``; None unless the body is exactly one
    ``message`` event carrying a result for that id."""
    if not body.startswith(EVENT_PREFIX) or not body.endswith(EVENT_SUFFIX):
        return None
    data = body[len(EVENT_PREFIX) : -len(EVENT_SUFFIX)]
    head = b'{"jsonrpc":"2.0","id":' + _id(request_id) + b',"result":'
    if b"\r" in data or b"\n" in data or not data.startswith(head) or not data.endswith(b"}"):
        return None
    result = data[len(head) : -1]
    try:
        parsed = json.loads(result)
    except ValueError:
        return None
    return result if isinstance(parsed, dict) and _response(request_id, result) == data else None
