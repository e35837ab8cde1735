"""OAuth 2.1 for ``toolexec mcp --http`` (``mcp.auth``): a resource server as the MCP authorization spec defines it.

Built on the SDK's own pieces: tokens are checked by a :class:`~mcp.server.auth.provider.TokenVerifier` through the
SDK's :class:`~mcp.server.auth.middleware.bearer_auth.BearerAuthBackend`, the principal reaches the handlers through
its :class:`~mcp.server.auth.middleware.auth_context.AuthContextMiddleware`, and the protected-resource metadata
(RFC 9728) is its :class:`~mcp.shared.auth.ProtectedResourceMetadata`. Two verifiers:

* :class:`JwtVerifier`: a signed JWT (RFC 9068) checked with PyJWT against the issuer's JWKS: signature (asymmetric
  algorithms only), ``iss``, ``aud``, ``exp`` (and ``nbf``/``iat`` when present), 30 s of clock skew allowed.
  Unknown key ids refetch the key set at most once a minute, so forged tokens cannot make the server hammer the
  issuer.
* :class:`IntrospectionVerifier`: an opaque token asked of the issuer's RFC 7662 endpoint (``active``, ``iss``,
  ``aud`` checked as for a JWT). An active answer is reused for ``cache_seconds`` (never past the token's ``exp``),
  keyed by the token's SHA-256, so a busy client does not cost the issuer a request per call; a refusal is not
  cached (a token made active later is accepted at once).

Refusals follow RFC 6750 §3 and the MCP spec: no or a bad token is 401 with ``WWW-Authenticate: Bearer
resource_metadata="…"`` (and ``error="invalid_token"`` when a token was sent); a token without a scope the server
(``required_scopes``) or the called tool (its ``Scope:``) needs is 403 ``error="insufficient_scope"`` naming the
scopes, so a client can step up. Every refusal is checked before the request body is read (the tool's scope
right after it, before anything runs).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, get_access_token
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from toolexec.calls import missing_scopes
from toolexec.errors import BadRequest
from toolexec.mcp_settings import McpAuth

__all__ = [
    "METADATA_PATH",
    "IntrospectionVerifier",
    "JwtVerifier",
    "OAuthGuard",
    "client_secret",
    "granted_scopes",
    "metadata_routes",
    "scopes_supported",
    "tool_scopes",
    "verifier",
]

METADATA_PATH = "/.well-known/oauth-protected-resource"
# Signature algorithms a JWKS can verify; never "none" and never HMAC (a public key is no shared secret).
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
LEEWAY_SECONDS = 30
REFETCH_SECONDS = 60.0  # an unknown key id refetches the JWKS at most this often
FETCH_SECONDS = 10.0  # a JWKS or introspection request's bound
MAX_TOKEN_BYTES = 16 * 1024
MAX_CACHED_TOKENS = 4096  # introspected answers kept at once; the oldest go first

Send = Callable[[dict[str, Any]], Any]


def log(message: str) -> None:
    """A diagnostic line on stderr (the server's log; never sent to a client)."""
    print(f"toolexec mcp: {message}", file=sys.stderr, flush=True)


class _Throttled:
    """Refusal reasons logged at most once a second: a flood of bad tokens is not a flood of lines."""

    def __init__(self) -> None:
        self.last = -1.0

    def __call__(self, message: str) -> None:
        now = time.monotonic()
        if now - self.last >= 1.0:
            self.last = now
            log(message)


def _scopes(claims: dict[str, Any]) -> list[str]:
    """The scopes a token grants: ``scope`` (RFC 9068/8693, space-separated) or ``scp`` (a list, as Azure AD writes)."""
    given = claims.get("scope", claims.get("scp", ""))
    if isinstance(given, str):
        return given.split()
    return [s for s in given if isinstance(s, str)] if isinstance(given, list) else []


def _access_token(token: str, claims: dict[str, Any], audience: str) -> AccessToken:
    exp = claims.get("exp")
    return AccessToken(
        token=token,
        client_id=str(claims.get("client_id") or claims.get("azp") or claims.get("sub") or ""),
        scopes=_scopes(claims),
        expires_at=int(exp) if isinstance(exp, int | float) else None,
        resource=audience,
        subject=str(claims["sub"]) if claims.get("sub") is not None else None,
        claims=claims,
    )


class JwtVerifier:
    """A :class:`~mcp.server.auth.provider.TokenVerifier` for JWT access tokens signed with a key of the issuer's JWKS."""

    def __init__(self, auth: McpAuth) -> None:
        assert auth.jwks_uri is not None
        self.auth = auth
        self.client = jwt.PyJWKClient(auth.jwks_uri, cache_jwk_set=True, lifespan=300, timeout=int(FETCH_SECONDS))
        self._lock = threading.Lock()
        self._refetched = -REFETCH_SECONDS
        self.refused = _Throttled()

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's principal and scopes, or None (the reason goes to the server log)."""
        if len(token) > MAX_TOKEN_BYTES:
            return None
        return await anyio.to_thread.run_sync(self._verify, token)

    def _verify(self, token: str) -> AccessToken | None:
        try:
            key = self._key(token)
            claims = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                audience=self.auth.audience,
                issuer=self.auth.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
            return _access_token(token, claims, self.auth.audience)
        except jwt.PyJWTError as error:
            self.refused(f"refused a bearer token: {error}")
            return None
        except Exception as error:  # a hostile token must never become a 500: whatever it provokes is a refusal
            self.refused(f"refused a bearer token: {type(error).__name__}: {error}")
            return None

    def _key(self, token: str) -> Any:
        """The signing key the token's ``kid`` names (the only key of the set when it names none)."""
        kid = jwt.get_unverified_header(token).get("kid")
        with self._lock:
            keys = self.client.get_signing_keys()
            found = _find(keys, kid)
            if found is None and time.monotonic() - self._refetched >= REFETCH_SECONDS:
                self._refetched = time.monotonic()
                found = _find(self.client.get_signing_keys(refresh=True), kid)
        if found is None:
            raise jwt.InvalidKeyError(f"the issuer's key set has no key {kid!r}")
        return found.key


def _find(keys: list[Any], kid: Any) -> Any:
    if kid is None:
        return keys[0] if len(keys) == 1 else None
    return next((key for key in keys if key.key_id == kid), None)


class IntrospectionVerifier:
    """A :class:`~mcp.server.auth.provider.TokenVerifier` asking the issuer's RFC 7662 endpoint about each token."""

    def __init__(self, auth: McpAuth, client_secret: str | None) -> None:
        assert auth.introspection is not None
        self.auth = auth
        self.endpoint = auth.introspection
        self.secret = client_secret
        self.refused = _Throttled()
        self._cache: dict[bytes, tuple[float, AccessToken]] = {}  # token digest -> (valid until, time.time(); answer)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's principal and scopes, or None (the reason goes to the server log)."""
        if len(token) > MAX_TOKEN_BYTES:
            return None
        digest = hashlib.sha256(token.encode()).digest()
        cached = self._cache.get(digest)
        if cached is not None:
            if time.time() < cached[0]:
                return cached[1]
            del self._cache[digest]
        access = await self._introspect(token)
        if access is not None:
            self._remember(digest, access)
        return access

    def _remember(self, digest: bytes, access: AccessToken) -> None:
        until = time.time() + self.endpoint.cache_seconds
        if access.expires_at is not None:
            until = min(until, access.expires_at)  # the SDK's bearer backend refuses it from then on
        if until <= time.time():
            return
        while len(self._cache) >= MAX_CACHED_TOKENS:
            del self._cache[next(iter(self._cache))]
        self._cache[digest] = (until, access)

    async def _introspect(self, token: str) -> AccessToken | None:
        basic = httpx2.BasicAuth(self.endpoint.client_id, self.secret or "") if self.endpoint.client_id else None
        try:
            async with httpx2.AsyncClient(timeout=FETCH_SECONDS, follow_redirects=False, auth=basic) as client:
                answer = await client.post(self.endpoint.url, data={"token": token})
            claims = answer.json() if answer.status_code == 200 else None
        except (httpx2.HTTPError, ValueError) as error:
            self.refused(f"the introspection endpoint could not be asked about a token: {error}")
            return None
        problem = self._problem(claims)
        if problem is not None:
            self.refused(f"refused a bearer token: {problem}")
            return None
        assert isinstance(claims, dict)
        try:
            return _access_token(token, claims, self.auth.audience)
        except ValueError as error:  # claims of the wrong types (pydantic's ValidationError is a ValueError)
            self.refused(f"refused a bearer token: its introspected claims do not fit: {error}")
            return None

    def _problem(self, claims: Any) -> str | None:
        if not isinstance(claims, dict):
            return "the introspection endpoint did not answer with a JSON object"
        if claims.get("active") is not True:
            return "the token is not active"
        if claims.get("iss", self.auth.issuer) != self.auth.issuer:
            return f"issued by {claims.get('iss')!r}, not {self.auth.issuer!r}"
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.auth.audience not in audiences:
            return f"issued for {audience!r}, not {self.auth.audience!r}"
        exp = claims.get("exp")
        if isinstance(exp, int | float) and exp + LEEWAY_SECONDS < time.time():
            return "the token has expired"
        return None


def granted_scopes() -> frozenset[str] | None:
    """The scopes of the caller's OAuth access token (``mcp.auth``); None without one (stdio, a static token)."""
    token = get_access_token()
    return frozenset(token.scopes) if token is not None else None


def client_secret(auth: McpAuth) -> str | None:
    """The introspection client's secret, read once from its variable (which no tool then inherits)."""
    name = auth.introspection.client_secret_env if auth.introspection is not None else None
    if name is None:
        return None
    value = os.environ.pop(name, "").strip()
    if not value:
        raise BadRequest(
            f"the introspection client secret variable {name} is not set (named by mcp.auth.introspection); export it"
        )
    return value


def tool_scopes(listing: Any, mcp_name: str) -> tuple[str, ...] | None:
    """The OAuth scopes the tool a listing offers as ``mcp_name`` declares (None: no such tool)."""
    tool = listing.by_mcp_name.get(mcp_name)
    return tool.metadata.scopes if tool is not None else None


def scopes_supported(auth: McpAuth, listing: Any) -> list[str]:
    """Every scope the server (``required_scopes``) or a tool the listing offers names (RFC 9728 metadata)."""
    declared = [scope for tool in listing.tools for scope in tool.metadata.scopes]
    return list(dict.fromkeys([*auth.required_scopes, *declared]))


def verifier(auth: McpAuth, client_secret: str | None = None) -> JwtVerifier | IntrospectionVerifier:
    """The verifier ``mcp.auth`` asks for."""
    return JwtVerifier(auth) if auth.jwks_uri is not None else IntrospectionVerifier(auth, client_secret)


def metadata_url(auth: McpAuth) -> str:
    """Where this server's protected-resource metadata is (RFC 9728 §3.1: the well-known path before the resource's)."""
    parts = urlsplit(auth.resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{path}"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


class OAuthGuard:
    """The gate's authentication step under ``mcp.auth``: the SDK's bearer backend, then the scopes."""

    def __init__(self, auth: McpAuth, token_verifier: Any, scopes_for: Callable[[str], Iterable[str] | None]) -> None:
        self.auth = auth
        self.backend = BearerAuthBackend(token_verifier)  # the audience is the verifier's to check
        self.scopes_for = scopes_for  # an MCP tool name -> the scopes its script declares (None: no such tool)
        self.metadata = metadata_url(auth)

    def wrap(self, app: Any) -> Any:
        """The app as the handlers need it: the caller's token in the SDK's auth context."""
        return AuthContextMiddleware(app)

    async def admit(self, scope: dict[str, Any], send: Send) -> bool:
        """Authenticate the request (before its body is read); False once it was refused (401, or 403 for scopes)."""
        conn = HTTPConnection(scope)
        given = [value for name, value in scope.get("headers") or [] if name == b"authorization"]
        found = await self.backend.authenticate(conn) if len(given) == 1 else None
        if found is None:
            sent = len(given) > 0
            description = "the access token is invalid, expired, or not issued for this server" if sent else ""
            await self.refuse(send, 401, "invalid_token" if sent else None, description)
            return False
        credentials, user = found
        scope["auth"], scope["user"] = credentials, user
        missing = missing_scopes(self.auth.required_scopes, credentials.scopes)
        if missing:
            await self.refuse(send, 403, "insufficient_scope", f"this server needs the scope {' '.join(missing)}", missing)
            return False
        return True

    async def admit_body(self, scope: dict[str, Any], body: bytes, send: Send) -> bool:
        """A ``tools/call`` of a tool whose scopes the token lacks is refused with 403 before anything runs."""
        name = _called_tool(body)
        needed = list(self.scopes_for(name) or ()) if name is not None else []
        missing = missing_scopes(needed, scope["auth"].scopes) if needed else ()
        if not missing:
            return True
        wanted = [*self.auth.required_scopes, *needed]
        await self.refuse(send, 403, "insufficient_scope", f"tool {name!r} needs the scope {' '.join(missing)}", wanted)
        return False

    async def refuse(
        self, send: Send, status: int, error: str | None, description: str, scopes: Iterable[str] | None = None
    ) -> None:
        """A refusal as RFC 6750 §3 and the MCP spec shape it (the body is left unread: the connection closes)."""
        parts = [f'resource_metadata="{self.metadata}"']
        wanted = " ".join(dict.fromkeys(scopes or self.auth.required_scopes))
        if wanted:
            parts.append(f'scope="{_quoted(wanted)}"')
        if error is not None:
            parts += [f'error="{error}"', f'error_description="{_quoted(description)}"']
        body = json.dumps(
            {"error": error or "unauthorized", "error_description": description or "send Authorization: Bearer <access token>"}
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", f"Bearer {', '.join(parts)}".encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _called_tool(body: bytes) -> str | None:
    """The tool a JSON-RPC ``tools/call`` names (None for any other message)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) else None


def metadata_routes(auth: McpAuth, scopes_supported: Callable[[], list[str]]) -> list[Route]:
    """``GET /.well-known/oauth-protected-resource`` (and the same under the resource's path, RFC 9728 §3.1):
    this server's resource, its authorization server and every scope it or its tools use."""

    async def handle(request: Request) -> Response:
        metadata = ProtectedResourceMetadata(
            resource=AnyHttpUrl(auth.resource),
            authorization_servers=[AnyHttpUrl(auth.issuer)],
            scopes_supported=scopes_supported() or None,
            resource_name="toolexec",
        ).model_dump(mode="json", exclude_none=True)
        # The URLs as configured: pydantic adds a "/" to a path-less one, and an issuer is compared as a string.
        metadata.update(resource=auth.resource, authorization_servers=[auth.issuer])
        return JSONResponse(metadata, headers={"Cache-Control": "public, max-age=300", "Access-Control-Allow-Origin": "*"})

    paths = dict.fromkeys([METADATA_PATH, urlsplit(metadata_url(auth)).path])
    return [Route(path, endpoint=handle, methods=["GET", "HEAD"]) for path in paths]
