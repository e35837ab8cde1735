"""The HTTP front of ``toolexec mcp --http``: who may call, and what a client may cost before it is answered.

Every client is treated as hostile, authenticated or not:

* **A bearer token on every address.** The variable named by ``--token-env`` (or ``mcp.token_env``)
  holds it; without one, a token is generated once into a 0600 file in the user's runtime (or state)
  folder, and stderr says where. Loopback is no exception: every local account can reach it.
  ``--no-token`` serves without one, with a warning.
* **Bounded before authentication.** Request headers must arrive within :data:`HEADER_SECONDS` and
  fit in :data:`MAX_HEADER_BYTES`; a declared body over :data:`MAX_BODY_BYTES` is refused (413)
  before the token is looked at, and a body is only read, with a size and time bound, once the
  token matched. Connections are capped (:func:`connection_cap`); when the cap is reached the oldest
  connection that has no request in progress makes room, so idle or half-open connections can never
  starve a client that has something to ask.
* A body that is not one JSON-RPC message gets the answer stdio gives it (:func:`toolexec.mcp_stdio.decode`):
  ``-32700`` or ``-32600``, where the SDK would take a request whose ``id`` is null for a notification.
* ``tools/list``, whose answer depends on the tools served and the headers alone, is answered again as the SDK
  answered it (:mod:`toolexec.mcp_http_memo`), without a session made per request; a plain ``tools/call`` is
  answered by the call path directly, as the SDK would answer it (:mod:`toolexec.mcp_http_call`).
* ``TCP_NODELAY`` on every accepted connection: without it a keep-alive reply waits ~40 ms for Nagle's
  algorithm (the listening socket is made here, so asyncio does not set it); what a reply writes in one turn of the
  event loop leaves in one segment (:class:`Coalescing`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import resource
import secrets
import socket
import stat
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import h11
import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolexec.config import Config
from toolexec.errors import BadRequest
from toolexec.mcp_auth import OAuthGuard, metadata_routes, scopes_supported, tool_scopes, verifier
from toolexec.mcp_http_call import DirectCalls
from toolexec.mcp_http_memo import ListMemo
from toolexec.mcp_stdio import Refusal, decode, encode

HEADER_SECONDS = 10.0  # from a connection's first byte (or its previous reply) to a request's last header
BODY_SECONDS = 30.0  # to send a request's body once its headers are in
KEEP_ALIVE_SECONDS = 5  # an idle keep-alive connection is closed after this long
MAX_HEADER_BYTES = 32 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024  # arguments travel in the body: a file's contents for a write tool, say
TOKEN_FILE = "mcp-token"

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def log(message: str) -> None:
    """A diagnostic line on stderr."""
    print(f"toolexec mcp: {message}", file=sys.stderr, flush=True)


def parse_bind(value: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (``[::1]:8080`` for IPv6) → (host, port); the host defaults to 127.0.0.1."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise BadRequest(f"--http expects [HOST:]PORT such as 8080 or 127.0.0.1:8080, got {value!r}")
    return host, int(port)


# --- the token ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    """The bearer token clients must send, and where it came from (for the log line)."""

    value: str
    origin: str


def resolve_token(config: Config, token_env: str | None, *, no_token: bool, host: str) -> Token | None:
    """The bearer token: from the variable named by --token-env or mcp.token_env (refused when named but unset),
    else the generated one (:func:`token_file`); None only with ``--no-token``, which is logged as a warning."""
    if no_token:
        if token_env:
            raise BadRequest("--no-token and --token-env contradict each other: give one of them")
        log(
            f"WARNING: serving {host} without a bearer token (--no-token): anyone who can reach it "
            + ("(every account on this machine) " if _loopback(host) else "")
            + "calls the tools as you"
        )
        return None
    name = token_env or config.mcp.token_env
    if name:
        value = os.environ.get(name, "")
        if not value.strip():
            raise BadRequest(
                f"the bearer token variable {name} is not set (named by {'--token-env' if token_env else 'mcp.token_env'}); export it"
            )
        return Token(value.strip(), f"the environment variable {name}")
    path = token_file()
    value, made = _read_or_make(path)
    log(
        f"{'generated a bearer token in' if made else 'the bearer token is in'} {path}: clients send "
        f'"Authorization: Bearer <its content>" (set your own with --token-env NAME or mcp.token_env; --no-token serves without one)'
    )
    return Token(value, str(path))


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1")


def token_file() -> Path:
    """Where the generated token lives: ``$XDG_RUNTIME_DIR/toolexec/mcp-token`` when that folder is the user's own
    (mode 0700), else ``$XDG_STATE_HOME/toolexec/mcp-token`` (``~/.local/state/toolexec/mcp-token``)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        with contextlib.suppress(OSError):
            info = os.stat(runtime)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
                return Path(runtime) / "toolexec" / TOKEN_FILE
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "toolexec" / TOKEN_FILE


def _read_or_make(path: Path) -> tuple[str, bool]:
    """The token in ``path`` (which must be the user's own 0600 regular file in a 0700 folder), or a new one."""
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise BadRequest(
            f"{folder} must be a folder of your own that only you can open (chmod 700 {folder}) to keep the MCP token in"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        value = secrets.token_urlsafe(32)
        temporary = folder / f".{TOKEN_FILE}.{os.getpid()}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(value + "\n")
        os.replace(temporary, path)
        return value, True
    except OSError as error:
        raise BadRequest(f"cannot read the MCP token file {path}: {error.strerror}; remove it to make a new one") from None
    with os.fdopen(fd) as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise BadRequest(f"the MCP token file {path} must be a file of your own with mode 600 (chmod 600 {path})")
        value = file.read(4096).strip()
    if len(value) < 16:
        raise BadRequest(f"the MCP token file {path} holds no token of 16 characters or more; remove it to make a new one")
    return value, False


# --- the ASGI gate -----------------------------------------------------------------------------


class StaticToken:
    """The gate's authentication step with one bearer token (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self.expected = f"Bearer {token}".encode()

    def wrap(self, app: Any) -> Any:
        return app

    async def admit(self, scope: dict[str, Any], send: Send) -> bool:
        """True when the request carries the token; otherwise it is refused with RFC 6750's challenge."""
        given = [value for name, value in scope.get("headers") or [] if name == b"authorization"]
        if len(given) == 1 and hmac.compare_digest(given[0], self.expected):
            return True
        challenge = b'Bearer realm="toolexec"' + (b', error="invalid_token"' if given else b"")
        await _refuse(send, 401, "unauthorized: send Authorization: Bearer <token>", [(b"www-authenticate", challenge)])
        return False

    async def admit_body(self, scope: dict[str, Any], body: bytes, send: Send) -> bool:
        return True  # the one token grants every tool


class Guard(Protocol):
    """Who may call: :class:`StaticToken`, or :class:`toolexec.mcp_auth.OAuthGuard` under ``mcp.auth``."""

    def wrap(self, app: Any) -> Any: ...
    async def admit(self, scope: dict[str, Any], send: Send) -> bool: ...
    async def admit_body(self, scope: dict[str, Any], body: bytes, send: Send) -> bool: ...


# Answered without a token, for GET (and HEAD) only: liveness and readiness, and the OAuth metadata (RFC 9728; also
# under the resource's path, /.well-known/oauth-protected-resource/mcp).
HEALTH_PATH = "/healthz"
METADATA_PREFIX = "/.well-known/oauth-protected-resource"


def _public(scope: dict[str, Any]) -> bool:
    path = scope.get("path", "")
    if scope.get("method") not in ("GET", "HEAD"):
        return False
    under = path.startswith(METADATA_PREFIX + "/") and "/." not in path[len(METADATA_PREFIX) :] and "//" not in path
    return path in (HEALTH_PATH, METADATA_PREFIX) or under


class Gate:
    """ASGI middleware in front of the MCP app: body size by its declared length, then the caller (a token, see
    :class:`Guard`), then the body itself, read with a size and time bound before the app sees it."""

    def __init__(
        self,
        app: Any,
        guard: Guard | None,
        *,
        max_body: int = MAX_BODY_BYTES,
        memo: ListMemo | None = None,
        direct: DirectCalls | None = None,
    ) -> None:
        self.guard = guard
        self.memo = memo  # tools/list answered again as the SDK answered it (toolexec.mcp_http_memo)
        self.direct = direct  # tools/call answered without the SDK's session (toolexec.mcp_http_call)
        self.app = guard.wrap(app) if guard is not None else app
        self.public = app  # what needs no token (see _public)
        self.max_body = max_body

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers") or []
        lengths = [value for name, value in headers if name == b"content-length"]
        if any(not value.strip().isdigit() for value in lengths) or len(set(lengths)) > 1:
            await _refuse(send, 400, "bad request: Content-Length must be one whole number")
            return
        if lengths and int(lengths[0]) > self.max_body:
            await _refuse(send, 413, f"request body over {self.max_body} bytes")
            return
        if _public(scope):
            await self.public(scope, receive, send)
            return
        if self.guard is not None and not await self.guard.admit(scope, send):
            return
        body = await self._body(receive, send)
        if body is None:
            return
        message = decode(body) if scope.get("method") == "POST" else None
        if isinstance(message, Refusal):  # answered as over stdio: the SDK takes some of these for notifications
            await _refuse(send, 400, "", body=encode(message.reply))
            return
        if self.guard is not None and not await self.guard.admit_body(scope, body, send):
            return
        memo = self.memo
        lookup = memo.key(scope, message) if memo is not None else None
        if memo is not None and lookup is not None and await memo.answer(lookup, send):
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if memo is not None and lookup is not None:
            await memo.run(lookup, self.app, scope, replay, send)
            return
        direct = self.direct
        plan = direct.plan(scope, message) if direct is not None and lookup is None else None
        if direct is not None and plan is not None:
            if not direct.admitted(plan):
                await direct.run_sdk(plan, self.app, scope, replay, send)
                return

            async def answer(scope: dict[str, Any], receive: Receive, send: Send) -> None:
                await direct.answer(plan, scope, receive, send)

            await (self.guard.wrap(answer) if self.guard is not None else answer)(scope, receive, send)
            return
        await self.app(scope, replay, send)

    async def _body(self, receive: Receive, send: Send) -> bytes | None:
        """The whole request body, or None once the client was answered (413, 408) or went away."""
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(BODY_SECONDS) as waited:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    await _refuse(send, 413, f"request body over {self.max_body} bytes")
                    return None
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
        if waited.cancelled_caught:
            await _refuse(send, 408, f"the request body did not arrive within {BODY_SECONDS:g} s")
        return None


def guard_and_routes(server: Any, token: str | None, client_secret: str | None) -> tuple[Guard | None, list[Any]]:
    """Who may call ``server`` (a :class:`~toolexec.mcp.ToolServer`), and the routes that answer without a token."""

    async def healthz(request: Request) -> Response:
        status, body = health(server)
        return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store"})

    routes = [Route("/healthz", endpoint=healthz, methods=["GET"])]
    auth = server.config.mcp.auth
    if auth is None:
        return (StaticToken(token) if token is not None else None), routes
    guard = OAuthGuard(auth, verifier(auth, client_secret), lambda name: tool_scopes(server.listing, name))
    return guard, [*routes, *metadata_routes(auth, lambda: scopes_supported(auth, server.listing))]


def health(server: Any) -> tuple[int, dict[str, Any]]:
    """``GET /healthz`` of a :class:`~toolexec.mcp.ToolServer`: 200 while serving (503 once stopping), and whether its
    catalog is fresh; nothing a client without a token should not see (no tool names, no paths)."""
    body = {
        "status": "stopping" if server.stopping else "ok",
        "ready": not server.stopping,
        "tools": len(server.listing.tools),
        "catalog": {
            "fresh": server.stale is None,
            "watching": server.options.reload,
            "built_seconds_ago": round(time.time() - server.built, 1),
            **({"problem": server.stale} if server.stale else {}),
        },
    }
    return (503 if server.stopping else 200), body


async def _refuse(
    send: Send, status: int, message: str, extra: list[tuple[bytes, bytes]] | None = None, *, body: bytes | None = None
) -> None:
    body = body if body is not None else json.dumps({"error": message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
        (b"connection", b"close"),  # the body is left unread: the connection cannot carry another request
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# --- connections ---------------------------------------------------------------------------------


def connection_cap() -> int:
    """How many connections are kept open at once: half the descriptors the process may open (the other half left
    to the calls' pipes and files), at most 4,096. The soft limit is not raised: the tools would inherit it, and
    some programs close every descriptor up to it."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = 8192 if soft == resource.RLIM_INFINITY else soft
    return max(16, min(4096, limit // 2))


class Coalescing:
    """A connection's transport whose writes within one turn of the event loop leave in one ``send()``.

    uvicorn writes a response's head, each body chunk and the chunked encoding's end separately; with
    ``TCP_NODELAY`` each would be a TCP segment of its own, which the client wakes up for (three for every MCP
    answer). Joined, a small answer is one segment. Everything else is the transport's own."""

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def flush(self) -> None:
        """Send what was written since the last flush."""
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for request headers, ``TCP_NODELAY``, and a connection cap that
    closes the oldest idle connection to make room for a new one."""

    cap = 1024  # set by :func:`serve` from :func:`connection_cap`

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(Coalescing(transport, self.loop))  # type: ignore[arg-type]  # a transport to uvicorn
        self.header_timer: Any = None
        self.opened = self.loop.time()
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._await_headers()
        self._make_room()

    def data_received(self, data: bytes) -> None:
        self._await_headers()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE and self.header_timer is not None:
            self.header_timer.cancel()  # the headers are in: the app's own bounds take over
            self.header_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        """Start the header deadline when the connection waits for a request and none is running."""
        if self.header_timer is None and self.conn.their_state is h11.IDLE:
            self.header_timer = self.loop.call_later(HEADER_SECONDS, self._headers_late)

    def _headers_late(self) -> None:
        self.header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def _idle(self) -> bool:
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def _make_room(self) -> None:
        """Past the cap, close the oldest connection without a request in progress (this one, if all are busy)."""
        if len(self.connections) <= self.cap:
            return
        open_ = [c for c in self.connections if isinstance(c, BoundedH11Protocol) and not c.transport.is_closing()]
        if len(open_) <= self.cap:
            return
        idle = [c for c in open_ if c is not self and c._idle()]
        victim = min(idle, key=lambda c: c.opened) if idle else self
        victim.transport.close()


def uvicorn_config(app: Any) -> Any:
    """uvicorn's settings for the MCP app: the bounded protocol, its caps, no signal handling of its own."""
    cap = connection_cap()
    BoundedH11Protocol.cap = cap
    return uvicorn.Config(
        app,
        http=BoundedH11Protocol,
        log_level="error",  # what a hostile client can provoke (bad requests) is not worth a line each
        lifespan="on",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=5,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        # asyncio accepts up to `backlog` connections in a row before any is handed to the protocol (which makes
        # room): with at most cap + backlog open, the descriptors never run out at accept() time.
        backlog=max(16, min(2048, cap // 4)),
        # No limit_concurrency: uvicorn counts every connection, idle, half-open or closing, and answers 503 past
        # it, which would refuse the very client that has a request. The cap above makes room instead.
    )


def quiet_loop_errors() -> None:
    """Errors the event loop reports itself (a failed accept(), say) as one line each, at most one a second:
    what a flood of hostile connections provokes must not become a flood of tracebacks."""
    loop = asyncio.get_running_loop()
    last = -1.0

    def report(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        nonlocal last
        if loop.time() - last >= 1.0:
            last = loop.time()
            error = context.get("exception")
            log(f"{context.get('message', 'event loop error')}{f': {error}' if error else ''}")

    loop.set_exception_handler(report)


def listen(host: str, port: int) -> socket.socket:
    """The listening socket (made here so the port is known, and printed, before serving)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=1024)
    except OSError as error:
        raise BadRequest(f"--http cannot listen on {host}:{port}: {error.strerror}") from None
