"""``toolexec mcp --http`` as an OAuth 2.1 resource server (``mcp.auth``), against a local issuer started here:
tokens accepted and refused with the spec's 401/403 challenges, the protected-resource metadata, per-tool scopes
(HTTP 403 before the call, and the call path's own refusal), ``/healthz`` without a token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Project, toolexec
from tests.executor.mcp_http_server import ACCEPT, INITIALIZE, WAIT, Server
from tests.executor.oauth_issuer import Issuer

pytest.importorskip("mcp")

import anyio
import httpx2
import mcp_types as types
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

RESOURCE = "https://tools.example.test/mcp"
METADATA = "https://tools.example.test/.well-known/oauth-protected-resource/mcp"
GREET = 'def run(name: str) -> str:\n    """Greet someone."""\n    return f"hello {name}"\n'
PUSH = """#!/usr/bin/env bash
# @describe Push the branch.
# @meta scope repo:write
# @option --branch! the branch
main() { echo "pushed $argc_branch" >> "$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
"""


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    with Issuer() as running:
        yield running


def configure(project: Project, auth: dict[str, Any]) -> None:
    project.tool("greet.py", GREET)
    project.tool("push.sh", PUSH)
    project.configure(["greet.py", "push.sh"], mcp={"auth": auth})


@pytest.fixture
def served(project: Project, issuer: Issuer) -> Iterator[Server]:
    configure(
        project,
        {"issuer": issuer.url, "resource": RESOURCE, "jwks_uri": issuer.jwks_uri, "required_scopes": ["mcp:tools"]},
    )
    server = Server(project)
    yield server
    assert server.stop() == 0


def post(server: Server, token: str | None, message: dict[str, Any] = INITIALIZE) -> httpx2.Response:
    headers = {**ACCEPT, **({"Authorization": f"Bearer {token}"} if token is not None else {})}
    with httpx2.Client(timeout=WAIT) as client:
        return client.post(server.url, json=message, headers=headers)


def challenge(error: str | None = None, description: str = "", scope: str = "mcp:tools") -> str:
    parts = [f'resource_metadata="{METADATA}"', f'scope="{scope}"']
    if error:
        parts += [f'error="{error}"', f'error_description="{description}"']
    return "Bearer " + ", ".join(parts)


INVALID = "the access token is invalid, expired, or not issued for this server"


@pytest.mark.slow
def test_a_token_of_the_issuer_is_accepted_and_every_other_refused_with_the_specs_401(served: Server, issuer: Issuer) -> None:
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    refused = {
        "expired": issuer.token(RESOURCE, "mcp:tools", exp=now - 120, iat=now - 600),
        "not yet valid": issuer.token(RESOURCE, "mcp:tools", nbf=now + 600),
        "wrong audience": issuer.token("https://other.example.test/mcp", "mcp:tools"),
        "wrong issuer": issuer.token(RESOURCE, "mcp:tools", iss="https://evil.example.test"),
        "bad signature": issuer.token(RESOURCE, "mcp:tools", key=other_key),
        "unknown key": issuer.token(RESOURCE, "mcp:tools", key=other_key, kid="other-key"),
        "no expiry": issuer.token(RESOURCE, "mcp:tools", exp=None),
        "unsigned": _unsigned(issuer.claims(RESOURCE, "mcp:tools")),
        "HMAC keyed with the public key": _hmac_with_public_key(issuer),
        "garbage header": "eyJhbGciOi.eyJzdWIiOiJ4In0.c2ln",
        "not a JWT": "s3cret",
    }
    answers = {why: post(served, token) for why, token in refused.items()}
    assert {why: (a.status_code, a.headers["www-authenticate"]) for why, a in answers.items()} == {
        why: (401, challenge("invalid_token", INVALID)) for why in refused
    }
    assert {a.json()["error"] for a in answers.values()} == {"invalid_token"}
    missing = post(served, None)
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, challenge())
    no_scope = post(served, issuer.token(RESOURCE, "profile"))
    assert (no_scope.status_code, no_scope.headers["www-authenticate"]) == (
        403,
        challenge("insufficient_scope", "this server needs the scope mcp:tools"),
    )
    assert post(served, issuer.token(RESOURCE, "mcp:tools")).status_code == 200
    # The first fetch, and one refetch for the first unknown key id (a rotation); others wait a minute.
    for n in range(3):
        assert post(served, issuer.token(RESOURCE, "mcp:tools", key=other_key, kid=f"forged-{n}")).status_code == 401
    assert issuer.jwks_fetches == 2
    log = served.log.read_text()
    assert "refused a bearer token: Signature has expired" in log  # the reason is the server's, not the client's


def _part(value: dict[str, Any] | bytes) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unsigned(claims: dict[str, Any]) -> str:
    return f"{_part({'alg': 'none', 'typ': 'JWT'})}.{_part(claims)}."


def _hmac_with_public_key(issuer: Issuer) -> str:
    """The algorithm-confusion attack: HS256 keyed with the issuer's public key, which anyone can fetch."""
    from cryptography.hazmat.primitives import serialization

    pem = issuer.key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signed = f"{_part({'alg': 'HS256', 'typ': 'JWT', 'kid': issuer.kid})}.{_part(issuer.claims(RESOURCE, 'mcp:tools'))}"
    return f"{signed}.{_part(hmac.new(pem, signed.encode(), hashlib.sha256).digest())}"


def test_the_protected_resource_metadata_and_healthz_need_no_token(served: Server, issuer: Issuer) -> None:
    with httpx2.Client(timeout=WAIT) as client:
        root = client.get(f"{served.base}/.well-known/oauth-protected-resource")
        under = client.get(f"{served.base}/.well-known/oauth-protected-resource/mcp")
        health = client.get(f"{served.base}/healthz")
        post_metadata = client.post(f"{served.base}/.well-known/oauth-protected-resource", json={})
    expected = {
        "resource": RESOURCE,
        "authorization_servers": [issuer.url],
        "scopes_supported": ["mcp:tools", "repo:write"],
        "bearer_methods_supported": ["header"],
        "resource_name": "toolexec",
    }
    assert (root.status_code, root.json()) == (200, expected)
    assert (under.status_code, under.json()) == (200, expected)
    assert post_metadata.status_code == 401  # only GET is public
    body = health.json()
    assert (health.status_code, body["status"], body["ready"], body["tools"], body["catalog"]["fresh"]) == (
        200,
        "ok",
        True,
        2,
        True,
    )


@pytest.mark.slow
def test_a_tool_whose_scope_the_token_lacks_is_listed_and_refused_with_403(served: Server, issuer: Issuer) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "push", "arguments": {"branch": "main"}}}
    lacking = post(served, issuer.token(RESOURCE, "mcp:tools"), call)
    assert (lacking.status_code, lacking.headers["www-authenticate"], lacking.json()) == (
        403,
        challenge("insufficient_scope", "tool 'push' needs the scope repo:write", "mcp:tools repo:write"),
        {"error": "insufficient_scope", "error_description": "tool 'push' needs the scope repo:write"},
    )

    async def session(scope: str) -> tuple[list[types.Tool], str, str]:
        headers = {"Authorization": f"Bearer {issuer.token(RESOURCE, scope)}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=WAIT) as http,
            Client(streamable_http_client(served.url, http_client=http), mode="2026-07-28") as client,
        ):
            listed = (await client.list_tools()).tools
            greeted = await client.call_tool("greet", {"name": "Ada"})
            pushed = await client.call_tool("push", {"branch": "main"})
            texts = ["".join(c.text for c in r.content if isinstance(c, types.TextContent)) for r in (greeted, pushed)]
            return listed, texts[0], texts[1]

    listed, greeted, pushed = anyio.run(session, "mcp:tools repo:write")
    assert [(t.name, (t.meta or {}).get("toolexec/scopes")) for t in listed] == [("greet", None), ("push", ["repo:write"])]
    assert (greeted, pushed) == ("hello Ada", "pushed main\n")


def test_the_call_path_refuses_a_tool_whose_scope_a_token_lacks(project: Project) -> None:
    from toolexec.records import ToolCall

    project.tool("push.sh", PUSH)
    with project.executor(["push.sh"]) as executor:
        lacking = executor.calls.run(ToolCall(name="push", arguments={"branch": "x"}, scopes=frozenset({"mcp:tools"})))
        granted = executor.calls.run(ToolCall(name="push", arguments={"branch": "x"}, scopes=frozenset({"repo:write"})))
        unchecked = executor.calls.run(ToolCall(name="push", arguments={"branch": "x"}))
    assert (lacking.ok, lacking.status, lacking.reason, lacking.error) == (
        False,
        "refused",
        "insufficient_scope",
        "tool 'push' needs the OAuth scope repo:write, which your access token does not grant; "
        "ask the authorization server for a token with it",
    )
    assert (granted.output, unchecked.output) == ("pushed x\n", "pushed x\n")


@pytest.mark.slow
def test_opaque_tokens_are_introspected(project: Project, issuer: Issuer) -> None:
    configure(
        project,
        {
            "issuer": issuer.url,
            "resource": RESOURCE,
            "introspection": {"url": issuer.introspection, "client_id": "toolexec", "client_secret_env": "INTROSPECT_SECRET"},
        },
    )
    server = Server(project, env={"INTROSPECT_SECRET": "shh"})
    try:
        good = post(server, issuer.opaque(RESOURCE))
        inactive = post(server, issuer.opaque(RESOURCE, active=False))
        foreign = post(server, issuer.opaque("https://other.example.test/mcp"))
        expired = post(server, issuer.opaque(RESOURCE, exp=int(time.time()) - 120))
    finally:
        assert server.stop() == 0
    assert good.status_code == 200
    assert [r.status_code for r in (inactive, foreign, expired)] == [401, 401, 401]
    assert set(issuer.introspections) == {"Basic " + base64.b64encode(b"toolexec:shh").decode()}


@pytest.mark.slow
def test_an_active_introspection_answer_is_reused_until_it_may_no_longer_be(project: Project, issuer: Issuer) -> None:
    """The issuer is asked once per token while the answer holds: a busy client costs it one request, not one per
    call; a token about to expire is asked about again once its exp has passed, and a
    refused token is asked about every time (it may be made active)."""
    introspection = {"url": issuer.introspection}
    configure(project, {"issuer": issuer.url, "resource": RESOURCE, "introspection": introspection})
    server = Server(project)
    try:
        busy = issuer.opaque(RESOURCE)
        statuses = [post(server, busy).status_code for _ in range(3)]
        asked_busy = len(issuer.introspections)
        expiring = issuer.opaque(RESOURCE, exp=int(time.time()) + 2)
        first = post(server, expiring).status_code
        time.sleep(3.1)
        later = post(server, expiring).status_code
        inactive = issuer.opaque(RESOURCE, active=False)
        refused = [post(server, inactive).status_code for _ in range(2)]
    finally:
        assert server.stop() == 0
    assert (statuses, asked_busy) == ([200, 200, 200], 1)
    assert (first, later, refused) == (200, 401, [401, 401])
    assert len(issuer.introspections) == 1 + 2 + 2


@pytest.mark.slow
def test_introspection_cache_seconds_zero_asks_about_every_request(project: Project, issuer: Issuer) -> None:
    introspection = {"url": issuer.introspection, "cache_seconds": 0}
    configure(project, {"issuer": issuer.url, "resource": RESOURCE, "introspection": introspection})
    server = Server(project)
    try:
        token = issuer.opaque(RESOURCE)
        statuses = [post(server, token).status_code for _ in range(3)]
    finally:
        assert server.stop() == 0
    assert (statuses, len(issuer.introspections)) == ([200, 200, 200], 3)


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        (
            {
                "issuer": "https://i.example.test",
                "resource": RESOURCE,
                "introspection": {"url": "https://i.example.test/i", "cache_seconds": -1},
            },
            "key 'mcp.auth.introspection.cache_seconds': expected a number of seconds from 0 to 3600, got -1",
        ),
        ({"resource": RESOURCE, "jwks_uri": "https://i.example.test/jwks"}, "key 'mcp.auth.issuer': is required with mcp.auth"),
        (
            {"issuer": "https://i.example.test", "resource": RESOURCE},
            "key 'mcp.auth': give one of jwks_uri (the issuer's signing keys, for JWT access tokens) or introspection",
        ),
        (
            {"issuer": "http://i.example.test", "resource": RESOURCE, "jwks_uri": "https://i.example.test/jwks"},
            "key 'mcp.auth.issuer': expected https:// (plain http only to a loopback address), got 'http://i.example.test'",
        ),
        (
            {"issuer": "https://i.example.test", "resource": RESOURCE, "jwks_uri": "x", "required_scopes": ['a"b']},
            "key 'mcp.auth.jwks_uri': expected an absolute https:// URL without a #fragment, got 'x'",
        ),
        (
            {"issuer": "https://i.example.test", "resourse": RESOURCE},
            "key 'mcp.auth.resourse': unknown setting; did you mean 'resource'?",
        ),
    ],
)
def test_a_wrong_auth_setting_is_a_clear_error(project: Project, auth: dict[str, Any], message: str) -> None:
    project.tool("greet.py", GREET)
    project.configure(["greet.py"], mcp={"auth": auth})
    done = toolexec("--config", str(project.config), "mcp", "--http", "0")
    assert done.returncode == 2
    assert message in done.stderr, done.stderr


def test_oauth_and_a_static_token_exclude_each_other(project: Project, issuer: Issuer) -> None:
    auth = {"issuer": issuer.url, "resource": RESOURCE, "jwks_uri": issuer.jwks_uri}
    configure(project, auth)
    flag = toolexec("--config", str(project.config), "mcp", "--http", "0", "--no-token")
    assert (flag.returncode, flag.stderr) == (2, "toolexec: --no-token does not apply under mcp.auth (OAuth): drop it\n")
    project.configure(["greet.py"], mcp={"auth": auth, "token_env": "T"})
    both = toolexec("--config", str(project.config), "mcp", "--http", "0")
    assert both.returncode == 2
    assert "key 'mcp.token_env': a static token and OAuth (mcp.auth) exclude each other: keep one" in both.stderr
