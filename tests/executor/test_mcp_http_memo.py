"""The ``tools/list`` memo of ``toolexec mcp --http`` (:mod:`toolexec.mcp_http_memo`): answered again exactly as the
SDK answered it, the request's id spliced in; never for a request the SDK would answer otherwise; emptied by a
reload; bounded. Unit tests with a counting ASGI app, and the real server's answers compared byte for byte."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from typing import Any

import anyio
import pytest

from tests.conftest import Project
from tests.executor.mcp_http_server import WAIT, Server, wait_for

pytest.importorskip("mcp")

import mcp_types as types
from opentelemetry import trace

from toolexec import mcp_http_memo
from toolexec.mcp_http_memo import MAX_ENTRIES, ListMemo

VERSION = b"2025-11-25"
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
    (b"mcp-protocol-version", VERSION),
]
RESULT = b'{"tools":[{"name":"echo","inputSchema":{"type":"object"}}],"ttlMs":0}'
SSE_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform")],
}


def request(request_id: Any = 1, method: str = "tools/list", params: dict[str, Any] | None = None) -> types.JSONRPCRequest:
    return types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)


def scope(headers: list[tuple[bytes, bytes]] = HEADERS, method: str = "POST", path: str = "/mcp") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "headers": headers}


class Sdk:
    """An ASGI app standing for the SDK: answers what it is given (an SSE event with RESULT, by default), counting."""

    def __init__(self, status: int = 200, result: bytes = RESULT, chunks: int = 2) -> None:
        self.status, self.result, self.chunks, self.calls = status, result, chunks, 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.calls += 1
        body = json.loads((await receive())["body"])
        data = b'{"jsonrpc":"2.0","id":' + json.dumps(body["id"]).encode() + b',"result":' + self.result + b"}"
        event = b"event: message\r\ndata: " + data + b"\r\n\r\n"
        await send({**SSE_START, "status": self.status})
        cut = len(event) // self.chunks
        for n in range(self.chunks):  # sse-starlette writes an event, then an empty last chunk
            part = event[n * cut : (n + 1) * cut if n < self.chunks - 1 else None]
            await send({"type": "http.response.body", "body": part, "more_body": n < self.chunks - 1})


def ask(memo: ListMemo, app: Sdk, message: types.JSONRPCRequest, headers: list[tuple[bytes, bytes]] = HEADERS) -> bytes:
    """One request through the memo (as the gate sends it): the body the client got."""
    sent: list[dict[str, Any]] = []
    the_scope = scope(headers)
    body = message.model_dump_json(by_alias=True, exclude_unset=True).encode()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(event: dict[str, Any]) -> None:
        sent.append(event)

    async def go() -> None:
        lookup = memo.key(the_scope, message)
        assert lookup is not None
        if not await memo.answer(lookup, send):
            await memo.run(lookup, app, the_scope, receive, send)

    anyio.run(go)
    assert sent[0]["type"] == "http.response.start"
    return b"".join(event.get("body", b"") for event in sent[1:])


def event(request_id: Any, result: bytes = RESULT) -> bytes:
    return (
        b'event: message\r\ndata: {"jsonrpc":"2.0","id":'
        + json.dumps(request_id).encode()
        + b',"result":'
        + result
        + b"}\r\n\r\n"
    )


def test_the_second_request_is_answered_from_the_memo_with_its_own_id() -> None:
    served = object()
    memo, sdk = ListMemo("/mcp", lambda: served), Sdk()
    assert ask(memo, sdk, request(1)) == event(1)
    assert ask(memo, sdk, request("call-2")) == event("call-2")
    assert ask(memo, sdk, request(2**62)) == event(2**62)
    assert sdk.calls == 1


@pytest.mark.parametrize(
    ("the_scope", "message"),
    [
        (scope(method="GET"), request()),
        (scope(path="/other"), request()),
        (scope(), request(method="tools/call", params={"name": "echo"})),
        (scope(), request(params={"_meta": {"progressToken": 1}})),
        (scope(), request(params={"cursor": 5})),
        (scope(), request('a"quote')),  # ids an encoder may write differently
        (scope(), request("caf\u00e9")),
        (scope([h for h in HEADERS if h[0] != b"mcp-protocol-version"]), request()),
        (scope([*HEADERS[:3], (b"mcp-protocol-version", b"2026-07-28")]), request()),
        (scope([*HEADERS, (b"mcp-protocol-version", VERSION)]), request()),
        (scope(), types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")),
    ],
)
def test_anything_but_a_plain_handshake_era_tools_list_is_left_to_the_sdk(the_scope: dict[str, Any], message: Any) -> None:
    assert ListMemo("/mcp", object).key(the_scope, message) is None


def test_every_header_the_sdk_checks_is_part_of_the_key() -> None:
    served = object()
    memo, sdk = ListMemo("/mcp", lambda: served), Sdk()
    ask(memo, sdk, request())
    for name, value in ((b"host", b"evil.example"), (b"origin", b"http://evil.example"), (b"accept", b"text/event-stream")):
        changed = [(n, v) for n, v in HEADERS if n != name] + [(name, value)]
        ask(memo, sdk, request(), changed)
    ask(memo, sdk, request(params={"cursor": "eyJvZmZzZXQiOiAxfQ"}))
    assert sdk.calls == 5


@pytest.mark.parametrize(
    "sdk",
    [
        Sdk(status=406),
        Sdk(result=b'{"tools":[]}, "extra": 1'),  # not the one response this memo understands
        Sdk(chunks=1, result=RESULT + b"\r\n\r\nevent: message\r\ndata: {}"),
    ],
)
def test_an_answer_that_is_not_one_plain_result_is_never_kept(sdk: Sdk) -> None:
    memo = ListMemo("/mcp", object)
    ask(memo, sdk, request())
    ask(memo, sdk, request())
    assert sdk.calls == 2


def test_an_error_answer_is_never_kept() -> None:
    class Refusing(Sdk):
        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            self.calls += 1
            data = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"invalid cursor"}}'
            await send(SSE_START)
            await send({"type": "http.response.body", "body": b"event: message\r\ndata: " + data + b"\r\n\r\n"})

    served = object()
    memo, sdk = ListMemo("/mcp", lambda: served), Refusing()
    ask(memo, sdk, request(params={"cursor": "bad"}))
    ask(memo, sdk, request(params={"cursor": "bad"}))
    assert sdk.calls == 2


def test_a_new_listing_empties_the_memo() -> None:
    served = [object()]
    memo, sdk = ListMemo("/mcp", lambda: served[0]), Sdk()
    second_page = request(params={"cursor": "eyJvZmZzZXQiOiAxfQ"})
    ask(memo, sdk, request())
    ask(memo, sdk, second_page)
    served[0] = object()  # a reload
    ask(memo, sdk, request())
    ask(memo, sdk, request())
    ask(memo, sdk, second_page)  # kept for the old listing: asked again
    assert sdk.calls == 4


def test_the_memo_holds_a_bounded_number_of_answers() -> None:
    served = object()
    memo, sdk = ListMemo("/mcp", lambda: served), Sdk()
    for port in range(MAX_ENTRIES * 2):
        ask(memo, sdk, request(), [(b"host", f"127.0.0.1:{port}".encode()), *HEADERS[1:]])
    assert len(memo) == MAX_ENTRIES
    ask(memo, sdk, request(), [(b"host", f"127.0.0.1:{MAX_ENTRIES * 2 - 1}".encode()), *HEADERS[1:]])
    assert sdk.calls == MAX_ENTRIES * 2  # the newest is kept


def test_nothing_is_memoised_while_traces_go_somewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_http_memo.trace, "get_tracer_provider", lambda: trace.NoOpTracerProvider())
    assert ListMemo("/mcp", object).key(scope(), request()) is None


# --- the real server: the SDK's answer and the memo's, byte for byte ------------------------------------------------


ECHO = 'def run(text: str) -> str:\n    """Say it back.\n\n    Args:\n        text: What to say.\n    """\n    return text\n'


def post(connection: http.client.HTTPConnection, body: dict[str, Any], **headers: str) -> tuple[int, dict[str, str], bytes]:
    sent = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
        **headers,
    }
    connection.request("POST", "/mcp", body=json.dumps(body), headers={k: v for k, v in sent.items() if v})
    response = connection.getresponse()
    answer = response.read()
    return response.status, {k.lower(): v for k, v in response.getheaders() if k.lower() != "date"}, answer


@pytest.mark.slow
def test_the_server_answers_a_repeated_tools_list_exactly_as_the_sdk_did(project: Project) -> None:
    project.tool("echo.py", ECHO)
    project.configure(["echo.py"])
    server = Server(project, "--token-env", "T", env={"T": "sesame-sesame-sesame"})
    token = "Bearer sesame-sesame-sesame"
    try:
        url = urllib.parse.urlsplit(server.url)
        connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=WAIT)
        first = post(connection, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, Authorization=token)
        again = [post(connection, {"jsonrpc": "2.0", "id": n, "method": "tools/list"}, Authorization=token) for n in ("b", 3)]
        assert first[0] == 200 and first[1]["content-type"] == "text/event-stream"
        for n, answer in zip(("b", 3), again, strict=True):
            assert answer[:2] == first[:2]
            assert answer[2] == first[2].replace(b'"id":1,', b'"id":' + json.dumps(n).encode() + b",", 1)
        # Refusals the memo must not hide: no token, a foreign Host, an Accept the SDK refuses.
        assert post(connection, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"})[0] == 401
        connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=WAIT)
        assert (
            post(connection, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, Authorization=token, Host="evil.example")[0]
            == 421
        )
        assert (
            post(
                connection, {"jsonrpc": "2.0", "id": 6, "method": "tools/list"}, Authorization=token, Accept="text/event-stream"
            )[0]
            == 406
        )
        # An edit reloads the tools: the next answer is the new listing.
        project.tool("echo.py", ECHO.replace("Say it back.", "Echo the text."))

        def described() -> bool:
            status, _, answer = post(connection, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, Authorization=token)
            return status == 200 and b"Echo the text." in answer

        wait_for(described)
        connection.close()
    finally:
        assert server.stop() == 0
