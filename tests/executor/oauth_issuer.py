"""A local OAuth authorization server for tests: keys generated here, its JWKS and an RFC 7662 introspection
endpoint served on 127.0.0.1 by a thread, and tokens signed (or made opaque) on demand."""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm


class Issuer:
    """``with Issuer() as issuer``: ``issuer.url`` (the ``iss``), ``issuer.jwks_uri``, ``issuer.introspection``;
    :meth:`token` signs a JWT access token; :meth:`opaque` makes an opaque one the introspection endpoint knows."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-key-1"
        self.opaque_tokens: dict[str, dict[str, Any]] = {}
        self.jwks_fetches = 0
        self.introspections: list[str] = []  # the Authorization header of each introspection request
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _json(self, status: int, value: Any) -> None:
                body = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/jwks.json":
                    issuer.jwks_fetches += 1
                    self._json(200, issuer.jwks())
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                if self.path != "/introspect":
                    self._json(404, {"error": "not_found"})
                    return
                issuer.introspections.append(self.headers.get("Authorization", ""))
                token = form.get("token", [""])[0]
                self._json(200, issuer.opaque_tokens.get(token, {"active": False}))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.jwks_uri = f"{self.url}/jwks.json"
        self.introspection = f"{self.url}/introspect"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Issuer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def jwks(self) -> dict[str, Any]:
        public = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def claims(self, audience: str, scope: str = "", **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": self.url, "aud": audience, "sub": "alice", "client_id": "agent", "iat": now, "exp": now + 300}
        if scope:
            claims["scope"] = scope
        claims.update(changes)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, audience: str, scope: str = "", *, key: Any = None, kid: str | None = None, **changes: Any) -> str:
        """A JWT access token signed with the issuer's key (or ``key``), claims changed by ``changes``."""
        return jwt.encode(
            self.claims(audience, scope, **changes), key or self.key, algorithm="RS256", headers={"kid": kid or self.kid}
        )

    def opaque(self, audience: str, scope: str = "", *, active: bool = True, **changes: Any) -> str:
        """An opaque token; introspection answers with its claims (``active`` as given)."""
        token = secrets.token_urlsafe(24)
        self.opaque_tokens[token] = {"active": active, **self.claims(audience, scope, **changes)}
        return token
