"""``tools/call`` over stdio without the SDK's dispatcher, runner and per-request session.

Through the SDK, every request read crosses a memory stream into its dispatcher, gets a dispatch context, a
session, a request context, an OpenTelemetry middleware frame and the runner's checks, and its answer crosses
another stream back: on a warm tool's call that costs more than the call itself. :class:`DirectCalls` answers a
plain ``tools/call`` as the transport reads it instead: the ONE call path (:meth:`toolexec.mcp.ToolServer.answer_call`
→ :class:`toolexec.calls.Calls`: approval, caps, ``max_parallel``, audit, tracing) and the same bytes on the wire
(:func:`toolexec.mcp_direct.respond`). Every case but the plain one goes to the SDK, unchanged:

* **Which requests.** A ``tools/call`` whose params are plain (:func:`toolexec.mcp_direct.plain_params`: no progress
  token, no task, a served tool), on a connection the SDK has accepted the ``initialize`` handshake of, at a
  handshake-era version, from a client that did not declare elicitation (a tool's question is asked through the
  SDK's session), while OpenTelemetry traces go nowhere (the SDK's span is then wanted), whose id is not one still
  unanswered (a duplicate id is the SDK's). How many are in flight is the transport's bound
  (:data:`toolexec.mcp_stdio.MAX_UNANSWERED`).
* **Cancellation as the SDK's dispatcher does it.** ``notifications/cancelled`` naming a direct call's id (a
  stringified integer id correlates, as :func:`mcp.shared.dispatcher.coerce_request_id` says) cancels it: its process
  tree is ended and nothing is sent for it; the notification still reaches the SDK. When the input ends, every direct
  call still running is cancelled and answered ``-32000`` "Connection closed", as the SDK answers its own.
* Everything else (requests before ``initialize``, ping, logging, list, tasks, the 2026-07-28 revision, errors of
  shape) is read by the SDK exactly as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.dispatcher import coerce_request_id
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from toolexec.mcp_direct import METHOD, direct_params_type, plain_params, respond_then
from toolexec.mcp_http_memo import traced
from toolexec.mcp_stdio import Sent, encode

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

    from toolexec.mcp import ToolServer

__all__ = ["DirectCalls"]

CLOSED_WRITE_SECONDS = 2.0  # how long the "Connection closed" answer of a call ended by the end of input may wait


class _InFlight:
    """One direct call: its cancel scope, whether the client cancelled it (then nothing is sent), and whether its
    answer was written by its thread (then the end of input sends no "Connection closed" for it)."""

    __slots__ = ("cancelled", "ended", "lock", "scope", "written")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.cancelled = False
        self.ended = False  # the end of input came: the call's thread writes nothing
        self.written = False
        self.lock = threading.Lock()  # (cancelled, ended and written: the loop's and the call's thread's)


class DirectCalls:
    """The direct ``tools/call`` path of one stdio connection (see the module): :meth:`take` is offered every message
    the transport reads, in order; :meth:`run` (in the transport's task group) holds the calls until :meth:`close`."""

    def __init__(self, server: ToolServer) -> None:
        self.server = server
        self.params_type = direct_params_type(server)
        self._in_flight: dict[types.RequestId, _InFlight] = {}
        self._group: anyio.abc.TaskGroup | None = None
        self._replies: MemoryObjectSendStream[Any] | None = None
        self._write: Callable[[bytes], bool] | None = None
        self._ended = anyio.Event()

    def __len__(self) -> int:
        """How many direct calls are in flight."""
        return len(self._in_flight)

    async def run(
        self,
        replies: MemoryObjectSendStream[Any],
        write: Callable[[bytes], bool] | None = None,
        *,
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        """Serve direct calls, their answers sent to ``replies`` (closed at the end), until :meth:`close`; then cancel
        those still running (each answered "Connection closed") and return once they have all ended. ``write``: what
        writes an answer's line from the call's thread when it can (:meth:`toolexec.mcp_stdio.Wire.write_now`): then
        only a :class:`~toolexec.mcp_stdio.Sent` of it goes to ``replies``, and no hop to the event loop is on the
        call's way out."""
        async with replies, anyio.create_task_group() as group:
            self._group, self._replies, self._write = group, replies, write
            task_status.started()
            try:
                await self._ended.wait()
            finally:
                self._group = None
                group.cancel_scope.cancel()

    def close(self) -> None:
        """The input has ended (or the transport stops): no more direct calls; those running are cancelled (and their
        threads write nothing: each is answered "Connection closed")."""
        for entry in list(self._in_flight.values()):
            with entry.lock:
                entry.ended = True
        self._ended.set()

    def take(self, message: types.JSONRPCMessage, unanswered: dict[Any, str]) -> bool:
        """Whether ``message`` (just read; ``unanswered``: the ids of the requests read and not yet answered, this one
        not among them yet) is a plain call now running here; False: the SDK reads it. A cancellation of a direct
        call cancels it (and is still the SDK's to read)."""
        if isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/cancelled" and self._in_flight:
                self._cancel((message.params or {}).get("requestId"))
            return False
        if not isinstance(message, types.JSONRPCRequest) or message.method != METHOD:
            return False
        group, params_type = self._group, self.params_type
        if group is None or params_type is None:
            return False
        session = self._session()
        if session is None:
            return False
        version = session.protocol_version
        request_id = message.id
        key = coerce_request_id(request_id)
        if key in self._in_flight or request_id in unanswered or key in unanswered or str(key) in unanswered:
            return False  # a duplicate id: the SDK's (it answers each, and a cancellation finds the latest)
        if traced():
            return False
        params = plain_params(self.server, params_type, message.params, version)
        if params is None:
            return False
        entry = _InFlight()
        self._in_flight[key] = entry
        group.start_soon(self._answer, request_id, key, entry, params, version, session)
        return True

    def _session(self) -> ServerSession | None:
        """The handshake-era session whose ``initialize`` the SDK accepted, when its client cannot be asked anything;
        else None."""
        sessions = self.server.legacy_sessions
        if not sessions:
            return None
        session = sessions[0]
        params = session.client_params
        if params is None or session.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        if params.capabilities.elicitation is not None:  # a tool's question goes through the SDK's session
            return None
        return session

    def _cancel(self, request_id: Any) -> None:
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return
        entry = self._in_flight.get(coerce_request_id(request_id))
        if entry is not None:
            with entry.lock:
                entry.cancelled = True
            entry.scope.cancel()

    async def _answer(
        self,
        request_id: types.RequestId,
        key: types.RequestId,
        entry: _InFlight,
        params: types.CallToolRequestParams,
        version: str,
        session: ServerSession,
    ) -> None:
        from toolexec.mcp import Requester, caller  # noqa: PLC0415 - toolexec.mcp imports this module

        replies = self._replies
        assert replies is not None
        info = session.client_params.client_info if session.client_params is not None else None
        requester = Requester(
            caller=caller(f"{info.name} {info.version}".strip() if info is not None else None, None, False),
            modern=False,
            authorization=None,
        )
        sending = False
        try:
            with entry.scope:
                try:
                    message = await respond_then(self.server, request_id, params, version, requester, self._deliver(entry))
                finally:
                    if self._in_flight.get(key) is entry:
                        del self._in_flight[key]
                if not entry.cancelled:
                    sending = True
                    await replies.send(message)
        except anyio.get_cancelled_exc_class():
            # The end of input: answered as the SDK answers its own calls then (unless the client cancelled it, or
            # its answer may already be on its way, or out).
            with entry.lock:
                entry.ended = True
                written = entry.written
            if not sending and not entry.cancelled and not written:
                closed = types.JSONRPCError(
                    jsonrpc="2.0", id=request_id, error=types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed")
                )
                with anyio.move_on_after(CLOSED_WRITE_SECONDS, shield=True):
                    await replies.send(closed)
            raise

    def _deliver(self, entry: _InFlight) -> Callable[[types.JSONRPCResponse | types.JSONRPCError], Any]:
        """What the call's thread does with its response: writes it when it can (a :class:`Sent` of it is then what
        the event loop passes on), else hands it back. Nothing is written for a call the client cancelled, or once
        the input has ended (its "Connection closed" is the SDK's answer)."""
        write = self._write

        def deliver(message: types.JSONRPCResponse | types.JSONRPCError) -> Any:
            if write is None:
                return message
            line = encode(message)
            with entry.lock:
                if entry.cancelled or entry.ended or not line:
                    return message
                entry.written = write(line)
            return Sent(message) if entry.written else message

        return deliver
