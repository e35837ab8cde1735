"""The stdio transport of ``toolexec mcp``: one JSON-RPC message per line each way, and every line answered.

The SDK's own stdio transport drops a line it cannot read without a word, and its writer ends the
server when a message cannot be encoded. Here, as JSON-RPC 2.0 asks:

* a line that is not JSON (malformed, not UTF-8, a lone surrogate, nested past the parser's depth,
  an integer of thousands of digits, over :data:`MAX_LINE_BYTES`) is answered ``-32700`` (parse error)
  with ``"id": null``;
* JSON that is not one message (a batch array, a scalar, a request whose ``id`` is null, a boolean or
  a fraction, a missing ``jsonrpc``) is answered ``-32600`` (invalid request), with the request's id
  when it has a usable one;
* a request read while :data:`MAX_UNANSWERED` requests of the client are still unanswered is refused at once
  (``-32099``, saying so), neither queued nor run: a client that floods or never reads its answers holds a bounded
  amount of the server's memory (its unread answers stop the reading at once; then its own writes block);
* a message that cannot be encoded (text with lone surrogates, say) goes out with such characters
  replaced; what still cannot be sent becomes an error response to its request. The writer never stops.

While serving, descriptor 0 reads from the null device and descriptor 1 writes to stderr, so nothing
else in the process (or a library printing by mistake) can read or write the protocol stream.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import select
import stat
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

MAX_LINE_BYTES = 16 * 1024 * 1024  # as an HTTP request body (toolexec.mcp_http.MAX_BODY_BYTES)
CHUNK = 1 << 16
PARSER_DEPTH = 200  # the SDK's JSON parser (jiter) stops there
FLUSH_SECONDS = 5.0
# Requests read and not yet answered, at most (each holds a task, and a call its record, until answered).
MAX_UNANSWERED = 1024
TOO_MANY_UNANSWERED = -32099  # implementation-defined server error, outside the MCP SDK's and the schema's codes
STREAMS = (
    "subscriptions/listen",
)  # requests answered by a stream that lasts as long as the client listens  # at the end, how long the replies still queued may take to go out
_SURROGATE = re.compile("[\ud800-\udfff]")
# What the end of input cancels rather than waits for: a call may run for long, and its client has gone.
ENDED_BY_EOF = ("tools/call",)
Drained = Callable[[], Awaitable[None]]


class Direct(Protocol):
    """What answers some requests without the SDK (:class:`toolexec.mcp_stdio_call.DirectCalls`)."""

    def take(self, message: types.JSONRPCMessage, unanswered: dict[Any, str]) -> bool:
        """Whether ``message``, just read, is taken (then the SDK never sees it)."""
        ...

    async def run(
        self,
        replies: MemoryObjectSendStream[Any],
        write: Callable[[bytes], bool] | None = None,
        *,
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        """Take requests until :meth:`close`, their answers sent to ``replies`` (or, where ``write`` takes a line,
        written by it from any thread, then a :class:`Sent` of it sent to ``replies``); return once all are answered."""
        ...

    def close(self) -> None:
        """The input has ended: nothing more is taken, and what runs is ended."""
        ...


def error_reply(code: int, message: str, request_id: Any = None) -> types.JSONRPCError:
    """A JSON-RPC error response (``"id": null`` unless the request's id is known)."""
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def refuse(code: int, message: str, request_id: Any = None) -> Refusal:
    return Refusal(error_reply(code, message, request_id))


@dataclass(frozen=True)
class Sent:
    """A response written already (by a call's thread, :meth:`Wire.write_now`): the writer only counts it answered."""

    message: types.JSONRPCMessage


@dataclass(frozen=True)
class Refusal:
    """The answer to a line that is not a message: sent as is, never handed to the server."""

    reply: types.JSONRPCError


def decode(line: bytes) -> types.JSONRPCMessage | Refusal | None:
    """One received line as a message, or the refusal it must get; None for a blank line."""
    line = line.strip()
    if not line:
        return None
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as error:
        return refuse(types.PARSE_ERROR, f"Parse error: the line is not UTF-8 text (byte {error.start})")
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            reason = str(first["msg"]).removeprefix("Invalid JSON: ")
            reason = reason.replace("recursion limit exceeded", f"nested deeper than {PARSER_DEPTH} levels")
            return refuse(types.PARSE_ERROR, f"Parse error: {reason}")
        return _invalid(line, error)
    if isinstance(message, types.JSONRPCNotification) and b'"id"' in line:
        raw = _loads(line)
        if isinstance(raw, dict) and "id" in raw:  # a request with an id MCP does not allow, taken for a notification
            return refuse(
                types.INVALID_REQUEST, f"Invalid Request: id must be a string or an integer, got {json.dumps(raw['id'])[:40]}"
            )
    return message


def _loads(line: bytes) -> Any:
    """The line as Python data (it is JSON the SDK's parser accepted, so within its depth), or None."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _invalid(line: bytes, error: ValidationError) -> Refusal:
    raw = _loads(line)
    if isinstance(raw, list):
        return refuse(types.INVALID_REQUEST, "Invalid Request: batches are not supported; send one message at a time")
    if not isinstance(raw, dict):
        return refuse(types.INVALID_REQUEST, "Invalid Request: a JSON-RPC message is an object")
    request_id = raw.get("id")
    usable = isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"][1:]) or "(message)"
    return refuse(
        types.INVALID_REQUEST,
        f"Invalid Request: not a JSON-RPC 2.0 request, notification or response ({where}: {first['msg']})",
        request_id if usable else None,
    )


def encode(message: types.JSONRPCMessage) -> bytes:
    """One line to send; never raises (see the module's docstring)."""
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
    except Exception:
        pass
    try:
        data = json_safe(message.model_dump(mode="python", by_alias=True, exclude_unset=True))
        return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode() + b"\n"
    except Exception:
        pass
    request_id = getattr(message, "id", None)
    if request_id is None or isinstance(message, types.JSONRPCError):
        return b""  # a notification (or an error) that cannot be encoded is not sent
    reply = error_reply(types.INTERNAL_ERROR, "the response could not be encoded as JSON", request_id)
    return reply.model_dump_json(by_alias=True).encode() + b"\n"


def json_safe(value: Any) -> Any:
    """``value`` as JSON can carry it: lone surrogates replaced by U+FFFD, non-finite numbers as null."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {json_safe(str(key)): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


# --- the transport ---------------------------------------------------------------------------------


def _claim() -> tuple[int, int, Any]:
    """Private copies of descriptors 0 and 1 (the wire), with 0 pointed at the null device and 1 at stderr;
    and how to put them back."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)

    def restore() -> None:
        with contextlib.suppress(OSError):
            os.dup2(wire_out, 1)
            os.dup2(wire_in, 0)

    return wire_in, wire_out, restore


class Channel:
    """Reads and writes one descriptor of the wire without blocking the event loop.

    A pipe or a socket (what an MCP client gives its server) is put in non-blocking mode and waited on by the event
    loop itself: no thread, and no hop to one, per message. Anything else (a terminal shared with a shell, a regular
    file) is left as it is, and read or written by a thread of its own."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        mode = os.fstat(fd).st_mode
        self.polled = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        self.atomic = stat.S_ISFIFO(mode)  # a write of at most PIPE_BUF bytes goes whole or not at all (non-blocking)
        self._flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        if self.polled:
            fcntl.fcntl(fd, fcntl.F_SETFL, self._flags | os.O_NONBLOCK)
        self._thread = anyio.CapacityLimiter(1)  # not the shared pool: a busy pool must never hold up the wire

    async def read(self, size: int) -> bytes:
        """Up to ``size`` bytes; empty at end of file."""
        if not self.polled:
            return await anyio.to_thread.run_sync(os.read, self.fd, size, abandon_on_cancel=True, limiter=self._thread)
        while True:
            try:
                return os.read(self.fd, size)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)

    async def write(self, data: memoryview) -> int:
        """Write some of ``data``; how many bytes went."""
        if not self.polled:
            return await anyio.to_thread.run_sync(os.write, self.fd, data, limiter=self._thread)
        while True:
            try:
                return os.write(self.fd, data)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)

    def restore(self) -> None:
        """The descriptor's flags as they were."""
        with contextlib.suppress(OSError):
            fcntl.fcntl(self.fd, fcntl.F_SETFL, self._flags)


async def _read_lines(
    wire_in: Channel,
    replies: MemoryObjectSendStream[Any],
    messages: MemoryObjectSendStream[Any],
    wire: Wire,
    direct: Direct | None = None,
) -> None:
    """Lines from ``wire_in`` until end of file: messages to the server, error responses to the writer."""
    pending = bytearray()
    skipping = False  # inside a line over MAX_LINE_BYTES: dropped up to its newline (and answered once)
    async with messages, replies:
        while True:
            data = await wire_in.read(CHUNK)
            if not data:
                break
            pending += data
            *lines, rest = pending.split(b"\n")
            for line in lines:
                if skipping:
                    skipping = False
                elif len(line) > MAX_LINE_BYTES:
                    await replies.send(_too_long())
                else:
                    await _hand_on(bytes(line), replies, messages, wire, direct)
            if len(rest) > MAX_LINE_BYTES:
                await replies.send(_too_long())
                skipping, rest = True, bytearray()
            pending = bytearray(rest)
        if pending and not skipping:
            await _hand_on(bytes(pending), replies, messages, wire, direct)
        with anyio.move_on_after(FLUSH_SECONDS):
            await wire.settled()
        if direct is not None:  # the calls the SDK has not seen end as its own do at the end of input
            direct.close()


def _too_many(request_id: Any) -> types.JSONRPCError:
    return error_reply(
        TOO_MANY_UNANSWERED,
        f"too many requests in flight: {MAX_UNANSWERED} of this client's are still unanswered; read their answers "
        "(or wait for them) before sending more",
        request_id,
    )


def _too_long() -> types.JSONRPCError:
    return error_reply(types.PARSE_ERROR, f"Parse error: a message over {MAX_LINE_BYTES} bytes")


async def _hand_on(
    line: bytes, replies: MemoryObjectSendStream[Any], messages: MemoryObjectSendStream[Any], wire: Wire, direct: Direct | None
) -> None:
    decoded = decode(line)
    if isinstance(decoded, Refusal):
        await replies.send(decoded.reply)
    elif isinstance(decoded, types.JSONRPCRequest) and len(wire.unanswered) >= MAX_UNANSWERED:
        await replies.send(_too_many(decoded.id))
    elif decoded is not None:
        taken = direct is not None and direct.take(decoded, wire.unanswered)
        wire.read(decoded)
        if not taken:
            await messages.send(SessionMessage(decoded))


class Wire:
    """What the transport knows of the exchange: which requests still await their answer, and whether a line is
    being written; so a stop can wait until every request read so far is answered on the wire."""

    def __init__(self) -> None:
        self.unanswered: dict[Any, str] = {}  # request id -> method
        self.writing = False  # a line is being written (taken from the queue, not yet all out)
        # Held while a line goes out: by the writer for a whole line, by a call's thread for its one write.
        self.line = threading.Lock()

    def write_now(self, wire_out: Channel, data: bytes) -> bool:
        """Write the line ``data`` at once, from any thread, when it can go whole in one write (a pipe, at most
        PIPE_BUF bytes: all or nothing) and no other line is going out; whether it went. What did not is the
        writer's to send, in its turn."""
        if not wire_out.atomic or len(data) > select.PIPE_BUF or not self.line.acquire(blocking=False):
            return False
        try:
            return os.write(wire_out.fd, data) == len(data)
        except OSError:  # full (or the client has gone: the writer says so, in its turn)
            return False
        finally:
            self.line.release()

    def read(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest) and message.method not in STREAMS:
            self.unanswered[message.id] = message.method
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self.unanswered.pop((message.params or {}).get("requestId"), None)  # a cancelled request gets no answer

    def wrote(self, message: Any) -> None:
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            self.unanswered.pop(message.id, None)

    async def settled(self) -> None:
        """Return once every request read is answered but the calls (which the end of input cancels): a request
        that came before the end of input is answered, however quickly the end followed it."""
        while any(method not in ENDED_BY_EOF for method in self.unanswered.values()):
            await anyio.sleep(0.005)

    async def drained(self, outgoing: MemoryObjectReceiveStream[Any]) -> None:
        """Return once every request read is answered and written."""
        while self.unanswered or self.writing or outgoing.statistics().current_buffer_used:
            await anyio.sleep(0.005)


async def _write_lines(wire_out: Channel, outgoing: MemoryObjectReceiveStream[Any], wire: Wire) -> None:
    """Every message handed to the writer, one line each, in order."""
    async with outgoing:
        async for item in outgoing:
            if isinstance(item, Sent):
                wire.wrote(item.message)
                continue
            wire.writing = True
            message = item.message if isinstance(item, SessionMessage) else item
            view = memoryview(encode(message))
            while not wire.line.acquire(blocking=False):  # a call's thread is writing its line (one write)
                await anyio.sleep(0)
            try:
                while view:
                    written = await wire_out.write(view)
                    view = view[written:]
            finally:
                wire.line.release()
            wire.wrote(message)
            wire.writing = False


@contextlib.asynccontextmanager
async def stdio_transport(
    direct: Direct | None = None,
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any], Drained]]:
    """``(read_stream, write_stream, drained)`` over this process's stdin and stdout: the streams for ``Server.run``,
    and an awaitable function returning once every message handed over so far is written. ``direct`` is offered
    every message read before the SDK (see :class:`Direct`)."""
    fd_in, fd_out, restore = _claim()
    wire_in, wire_out = Channel(fd_in), Channel(fd_out)
    to_server, from_wire = anyio.create_memory_object_stream[Any](0)
    to_wire, outgoing = anyio.create_memory_object_stream[Any](16)
    server_side, reader_side = to_wire.clone(), to_wire.clone()
    direct_side = to_wire.clone() if direct is not None else None
    to_wire.close()
    written = anyio.Event()
    wire = Wire()

    async def write() -> None:
        await _write_lines(wire_out, outgoing, wire)
        written.set()

    try:
        async with anyio.create_task_group() as group:
            reading = anyio.CancelScope()

            async def read() -> None:
                with reading:
                    await _read_lines(wire_in, reader_side, to_server, wire, direct)

            if direct is not None and direct_side is not None:
                await group.start(direct.run, direct_side, lambda data: wire.write_now(wire_out, data))
            group.start_soon(read)
            group.start_soon(write)
            try:
                yield from_wire, server_side, lambda: wire.drained(outgoing)
            finally:
                reading.cancel()
                if direct is not None:
                    direct.close()
                server_side.close()
                with anyio.move_on_after(FLUSH_SECONDS):  # what is queued still goes out, then the writer ends
                    await written.wait()
                group.cancel_scope.cancel()
    finally:
        wire_in.restore()
        wire_out.restore()
        restore()
