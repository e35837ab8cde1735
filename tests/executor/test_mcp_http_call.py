"""The direct ``tools/call`` path of ``toolexec mcp --http`` (:mod:`toolexec.mcp_http_call`): the same bytes as the
SDK's answer, for warm and cold tools, results, errors and refusals; every other request left to the SDK; the gate's
checks before it; a client that goes away cancels its call.

In-process tests drive the real gate and the SDK's real app (its lifespan entered) with ASGI messages, the SDK's app
counted, so each test knows which path answered; the real server is driven by the SDK's client and by raw HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import Project
from tests.executor.mcp_http_server import WAIT, Server

pytest.importorskip("mcp")

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolexec import mcp_http_call
from toolexec.mcp import ServeOptions, ToolServer
from toolexec.mcp_http_call import DirectCalls

TOKEN = "sesame-sesame-sesame-sesame"
VERSION = "2025-11-25"
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
    (b"mcp-protocol-version", VERSION.encode()),
    (b"authorization", f"Bearer {TOKEN}".encode()),
]
ECHO = '''def run(text: str, times: int = 1) -> str:
    """Say it back.

    Warm: true

    Args:
        text: What to say.
        times: How often.
    """
    return text * times
'''
COLD = ECHO.replace("    Warm: true\n\n", "")
SHAPED = '''from typing import TypedDict


class Weather(TypedDict):
    city: str
    degrees: int


def run(city: str) -> Weather:
    """The weather in a city.

    Args:
        city: Where.
    """
    return {"city": city, "degrees": 21}
'''
FAILING = 'def run(why: str) -> str:\n    """Fail.\n\n    Args:\n        why: The reason.\n    """\n    raise RuntimeError(why)\n'
SLEEPER = '''import os, time


def run(marker: str) -> str:
    """Sleep until killed.

    Args:
        marker: A file to write the pid into.
    """
    with open(marker, "w") as out:
        out.write(str(os.getpid()))
    time.sleep(120)
    return "woke"
'''
TASKED = 'def run() -> str:\n    """Run as a task.\n\n    Task: optional\n    """\n    return "done"\n'


@pytest.fixture
def project_tools(project: Project) -> Project:
    for name, source in (
        ("echo.py", ECHO),
        ("cold.py", COLD),
        ("shaped.py", SHAPED),
        ("failing.py", FAILING),
        ("sleeper.py", SLEEPER),
        ("tasked.py", TASKED),
    ):
        project.tool(name, source)
    project.configure(["echo.py", "cold.py", "shaped.py", "failing.py", "sleeper.py", "tasked.py"])
    return project


class Counting:
    """The SDK's app, counting the requests it is given."""

    def __init__(self, app: Any) -> None:
        self.app, self.calls = app, 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.calls += 1
        await self.app(scope, receive, send)


class Served:
    """The gate and the SDK's app of a :class:`ToolServer`, in this process."""

    def __init__(self, server: ToolServer, gate: Any, sdk: Counting) -> None:
        self.server, self.gate, self.sdk = server, gate, sdk
        self.direct: DirectCalls = gate.direct

    async def post(
        self, body: dict[str, Any] | bytes, headers: list[tuple[bytes, bytes]] = HEADERS, *, leave: anyio.Event | None = None
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One POST through the gate: the status, headers and body sent (``leave``: the client disconnects when set)."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [*headers, (b"content-length", b"%d" % len(raw))]}
        events: list[dict[str, Any]] = []
        done = anyio.Event()
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": raw, "more_body": False}
            async with anyio.create_task_group() as group:

                async def wait(event: anyio.Event) -> None:
                    await event.wait()
                    group.cancel_scope.cancel()

                group.start_soon(wait, done)
                if leave is not None:
                    group.start_soon(wait, leave)
            return {"type": "http.disconnect"}

        async def send(event: dict[str, Any]) -> None:
            events.append(event)
            if event["type"] == "http.response.body" and not event.get("more_body", False):
                done.set()

        await self.gate(scope, receive, send)
        starts = [e for e in events if e["type"] == "http.response.start"]
        if not starts:
            return 0, [], b""
        return starts[0]["status"], list(starts[0]["headers"]), b"".join(e.get("body", b"") for e in events[1:])

    async def both(self, body: dict[str, Any], headers: list[tuple[bytes, bytes]] = HEADERS) -> tuple[Any, Any]:
        """The SDK's answer and the direct path's to the same request (each checked to come from where it says)."""
        direct, self.gate.direct = self.gate.direct, None
        before = self.sdk.calls
        try:
            sdk = await self.post(body, headers)
        finally:
            self.gate.direct = direct
        assert self.sdk.calls == before + 1
        await self.post(body, headers)  # admits these headers, if they were not yet
        before = self.sdk.calls
        answer = await self.post(body, headers)
        assert self.sdk.calls == before, "the SDK answered what the direct path should have"
        return sdk, answer


@contextlib.asynccontextmanager
async def served(project: Project, token: str | None = TOKEN) -> AsyncIterator[Served]:
    server = ToolServer(project.config, ServeOptions(reload=False))
    gate, app = server.http_app("127.0.0.1", token)
    sdk = Counting(gate.app)
    gate.app = sdk
    try:
        async with app.router.lifespan_context(app):
            yield Served(server, gate, sdk)
    finally:
        await server.cancel_all()
        server.close()


def call(name: str, arguments: Any = None, request_id: Any = 7, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def result_of(answer: bytes) -> dict[str, Any]:
    assert answer.startswith(b"event: message\r\ndata: ") and answer.endswith(b"\r\n\r\n"), answer
    return json.loads(answer[len(b"event: message\r\ndata: ") : -4])


CASES = [
    pytest.param(call("echo", {"text": "h\u00e9llo \U0001f600", "times": 2}), id="warm"),
    pytest.param(call("cold", {"text": "x"}, "call-7"), id="cold"),
    pytest.param(call("shaped", {"city": "Oslo"}, 2**53), id="structured"),
    pytest.param(call("failing", {"why": "no luck"}), id="tool-fails"),
    pytest.param(call("echo", {"text": "x", "times": "many"}), id="wrong-type"),
    pytest.param(call("echo", {"txt": "x"}), id="misspelt"),
    pytest.param(call("echo"), id="no-arguments"),
    pytest.param(call("cold", {}, "s"), id="missing-cold"),
]


@pytest.mark.parametrize("body", CASES)
def test_the_direct_answer_is_the_sdks_byte_for_byte(project_tools: Project, body: dict[str, Any]) -> None:
    async def scenario() -> tuple[Any, Any]:
        async with served(project_tools) as running:
            return await running.both(body)

    sdk, direct = anyio.run(scenario)
    assert sdk == direct
    assert sdk[0] == 200


def test_what_the_answers_say(project_tools: Project) -> None:
    """The answers compared above are the right ones (not two equal wrong ones)."""

    async def scenario() -> list[dict[str, Any]]:
        async with served(project_tools) as running:
            found = []
            for body in (
                call("echo", {"text": "ab", "times": 2}),
                call("shaped", {"city": "Oslo"}),
                call("echo", {"text": "x", "times": "many"}),
            ):
                found.append(result_of((await running.both(body))[1][2]))
            found.append(result_of((await running.both(call("failing", {"why": "no luck"})))[1][2]))
            return found

    echoed, shaped, wrong, failed = anyio.run(scenario)
    assert echoed == {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "abab"}], "isError": False}}
    assert shaped["result"] == {
        "content": [{"type": "text", "text": '{"city": "Oslo", "degrees": 21}'}],
        "structuredContent": {"city": "Oslo", "degrees": 21},
        "isError": False,
    }
    assert wrong["result"]["isError"] is True
    assert [block["type"] for block in wrong["result"]["content"]] == ["text"]
    assert "times" in wrong["result"]["content"][0]["text"] and "many" in wrong["result"]["content"][0]["text"]
    assert failed["result"]["isError"] is True and "no luck" in failed["result"]["content"][0]["text"]


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (call("echo", {"text": "x"}, _meta={"progressToken": 1}), HEADERS),
        (call("echo", {"text": "x"}, task={"ttl": 1000}), HEADERS),
        (call("tasked"), HEADERS),
        (call("nosuch", {"text": "x"}), HEADERS),
        (call("echo", ["x"]), HEADERS),
        (call("echo", {"text": "x"}, 'a"quote'), HEADERS),
        (call("echo", {"text": "x"}, "caf\u00e9"), HEADERS),
        (call("echo", {"text": "x"}), [h for h in HEADERS if h[0] != b"mcp-protocol-version"]),
        (call("echo", {"text": "x"}), [*HEADERS, (b"mcp-protocol-version", VERSION.encode())]),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, HEADERS),
    ],
    ids=[
        "progress",
        "task",
        "task-tool",
        "unknown",
        "array-args",
        "odd-id",
        "non-ascii-id",
        "no-version",
        "two-versions",
        "notification",
    ],
)
def test_anything_but_a_plain_call_is_left_to_the_sdk(
    project_tools: Project, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    async def scenario() -> tuple[int, int]:
        async with served(project_tools) as running:
            await running.post(call("echo", {"text": "x"}))  # the usual headers are admitted
            await running.post(body, headers)
            before = running.sdk.calls
            await running.post(body, headers)
            return running.sdk.calls - before, len(running.direct)

    asked, admitted = anyio.run(scenario)
    assert (asked, admitted) == (1, 1)


def test_a_2026_request_is_left_to_the_sdk(project_tools: Project) -> None:
    modern = [
        (b"mcp-protocol-version", b"2026-07-28") if name == b"mcp-protocol-version" else (name, value) for name, value in HEADERS
    ]

    async def scenario() -> int:
        async with served(project_tools) as running:
            for _ in range(3):
                await running.post(call("echo", {"text": "x"}), modern)
            return running.sdk.calls

    assert anyio.run(scenario) == 3


def test_nothing_is_answered_directly_while_traces_go_somewhere(project_tools: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_http_call, "traced", lambda: True)

    async def scenario() -> int:
        async with served(project_tools) as running:
            for _ in range(3):
                await running.post(call("echo", {"text": "x"}))
            return running.sdk.calls

    assert anyio.run(scenario) == 3


def test_the_gates_checks_come_first(project_tools: Project) -> None:
    """Admitted headers open no door: no token, a wrong token, a foreign Origin or Host are refused as before, and
    the tool never runs."""
    marker = project_tools.root / "ran"
    body = call("sleeper", {"marker": str(marker)})

    def swap(name: bytes, value: bytes | None) -> list[tuple[bytes, bytes]]:
        return [(n, v) for n, v in HEADERS if n != name] + ([(name, value)] if value is not None else [])

    async def scenario() -> list[int]:
        async with served(project_tools) as running:
            assert (await running.both(call("echo", {"text": "x"})))[1][0] == 200
            statuses = []
            for headers in (
                swap(b"authorization", None),
                swap(b"authorization", b"Bearer wrong-wrong-wrong-wrong"),
                swap(b"origin", b"http://evil.example"),
                swap(b"host", b"evil.example"),
                swap(b"accept", b"text/event-stream"),
                swap(b"content-type", b"text/plain"),
            ):
                for _ in range(2):
                    statuses.append((await running.post(body, headers))[0])
            return statuses

    assert anyio.run(scenario) == [401, 401, 401, 401, 403, 403, 421, 421, 406, 406, 400, 400]
    assert not marker.exists()


def test_an_admitted_set_of_headers_is_bounded(project_tools: Project) -> None:
    async def scenario() -> int:
        async with served(project_tools) as running:
            for port in range(mcp_http_call.MAX_ADMITTED + 5):
                headers = [(b"host", f"127.0.0.1:{port}".encode()), *HEADERS[1:]]
                await running.post(call("echo", {"text": "x"}), headers)
            return len(running.direct)

    assert anyio.run(scenario) == mcp_http_call.MAX_ADMITTED


def test_a_client_that_goes_away_cancels_its_call(unconfined: None, project_tools: Project, tmp_path: Path) -> None:
    """(Unconfined: the tool writes its own process id, which a PID namespace would make another.)"""
    marker = tmp_path / "pid"

    async def scenario() -> tuple[int, int]:
        async with served(project_tools) as running:
            await running.post(call("echo", {"text": "x"}))  # admitted: the next goes direct
            before = running.sdk.calls
            leave = anyio.Event()
            with anyio.fail_after(WAIT):
                async with anyio.create_task_group() as group:

                    async def ask() -> None:
                        answer.append(await running.post(call("sleeper", {"marker": str(marker)}), leave=leave))

                    answer: list[Any] = []
                    group.start_soon(ask)
                    while not (marker.exists() and marker.read_text()):
                        await anyio.sleep(0.01)
                    leave.set()
            pid = int(marker.read_text())
            with anyio.fail_after(WAIT):
                while _alive(pid):
                    await anyio.sleep(0.01)
            assert answer == [(0, [], b"")]  # nothing sent to a client that left
            return running.sdk.calls - before, running.server.calls.in_flight

    assert anyio.run(scenario) == (0, 0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie not yet reaped by its parent counts as gone
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


# --- the real server, through the SDK's client and raw HTTP ---------------------------------------------------------


@pytest.fixture
def server(project_tools: Project) -> Iterator[Server]:
    running = Server(project_tools, "--token-env", "T", env={"T": TOKEN})
    yield running
    assert running.stop() == 0


@pytest.mark.slow
def test_the_sdks_client_and_raw_http_get_the_same_results_on_both_paths(server: Server) -> None:
    bodies = [param.values[0] for param in CASES]
    base = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}

    with httpx2.Client(timeout=WAIT) as raw:

        def post(body: dict[str, Any], origin: str) -> dict[str, Any]:
            response = raw.post(server.url, json=body, headers={**base, "Origin": origin})
            assert response.status_code == 200, response.text
            return result_of(response.content)

        # Each request first with headers the server has not seen (the SDK answers), then again (answered directly).
        pairs = [(post(body, f"http://localhost:{n}"), post(body, f"http://localhost:{n}")) for n, body in enumerate(bodies, 1)]
    for sdk, direct in pairs:
        assert sdk == direct

    async def through_the_sdk() -> list[dict[str, Any]]:
        found = []
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=WAIT) as http,
            Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client,
        ):
            for body in bodies:
                params = body["params"]
                result = await client.call_tool(params["name"], params.get("arguments"))
                found.append(result.model_dump(by_alias=True, mode="json", exclude_none=True))
        return found

    expected = [
        types.CallToolResult.model_validate(sdk["result"]).model_dump(by_alias=True, mode="json", exclude_none=True)
        for sdk, _ in pairs
    ]
    assert anyio.run(through_the_sdk) == expected
    assert expected[0]["content"] == [{"type": "text", "text": "h\u00e9llo \U0001f600h\u00e9llo \U0001f600"}]
    assert server.proc.poll() is None


@pytest.mark.slow
def test_a_stop_answers_the_direct_calls_in_flight_and_ends_their_processes(
    unconfined: None, project_tools: Project, tmp_path: Path
) -> None:
    """(Unconfined: the tools write their own process ids.)"""
    running = Server(project_tools, "--token-env", "T", env={"T": TOKEN})
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
    }
    markers = [tmp_path / f"pid{n}" for n in range(2)]
    answers: list[dict[str, Any]] = []

    async def scenario() -> None:
        async with httpx2.AsyncClient(headers=headers, timeout=WAIT) as client:
            admitted = await client.post(running.url, json=call("echo", {"text": "x"}))  # the SDK admits these headers
            assert result_of(admitted.content)["result"]["content"] == [{"type": "text", "text": "x"}]

            async def sleep(n: int) -> None:
                reply = await client.post(running.url, json=call("sleeper", {"marker": str(markers[n])}, n))
                answers.append(result_of(reply.content))

            async with anyio.create_task_group() as group:
                for n in range(2):
                    group.start_soon(sleep, n)
                with anyio.fail_after(WAIT):
                    while not all(m.exists() and m.read_text() for m in markers):
                        await anyio.sleep(0.01)
                running.proc.send_signal(signal.SIGTERM)

    try:
        anyio.run(scenario)
    finally:
        status = running.stop()
    assert status == 0
    message = (
        "toolexec mcp is shutting down: the call of 'sleeper' was cancelled and its processes ended; "
        "send it again once the server is back"
    )
    assert sorted(answers, key=lambda a: a["id"]) == [
        {"jsonrpc": "2.0", "id": n, "error": {"code": types.INTERNAL_ERROR, "message": message}} for n in range(2)
    ]
    assert not any(_alive(int(m.read_text())) for m in markers)


# --- OAuth: the token's scopes and subject reach the call path on both paths -----------------------------------------

RESOURCE = "https://tools.example.test/mcp"
PUSH = """#!/usr/bin/env bash
# @describe Push the branch.
# @meta scope repo:write
# @option --branch! the branch
main() { echo "pushed $argc_branch" >> "$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
"""


def test_an_oauth_callers_scopes_and_subject_are_the_same_on_both_paths(project: Project) -> None:
    from tests.executor.oauth_issuer import Issuer

    project.tool("push.sh", PUSH)
    with Issuer() as issuer:
        auth = {"issuer": issuer.url, "resource": RESOURCE, "jwks_uri": issuer.jwks_uri, "required_scopes": ["mcp:tools"]}
        project.configure(["push.sh"], mcp={"auth": auth}, audit_log={"path": "audit.jsonl"})
        allowed = issuer.token(RESOURCE, "mcp:tools repo:write", sub="ada")
        lacking = issuer.token(RESOURCE, "mcp:tools", sub="bob")

        def headers(token: str) -> list[tuple[bytes, bytes]]:
            return [*HEADERS[:4], (b"authorization", f"Bearer {token}".encode())]

        async def scenario() -> tuple[Any, Any, list[int]]:
            async with served(project, token=None) as running:
                sdk, direct = await running.both(call("push", {"branch": "main"}), headers(allowed))
                refused = [(await running.post(call("push", {"branch": "main"}), headers(lacking)))[0] for _ in range(2)]
                return sdk, direct, refused

        sdk, direct, refused = anyio.run(scenario)
    assert sdk == direct
    assert result_of(direct[2])["result"]["content"] == [{"type": "text", "text": "pushed main\n"}]
    assert refused == [403, 403]
    lines = [json.loads(line) for line in (project.root / "audit.jsonl").read_text().splitlines()]
    assert len(lines) == 3  # the SDK's call, the one that admitted the headers, the direct one; none refused
    seen = [{key: line[key] for key in ("tool", "caller", "outcome", "reason")} for line in lines]
    assert seen == [{"tool": "push", "caller": {"surface": "mcp", "subject": "ada"}, "outcome": "ok", "reason": None}] * 3


@pytest.mark.parametrize(
    "extra",
    [
        [(b"host", b"evil.example")],  # a second Host, read first by the SDK
        [(b"origin", b"http://evil.example")],
        [(b"origin", b"http://evil.example"), (b"origin", b"http://127.0.0.1:8000")],
        [(b"content-type", b"text/plain")],
        [(b"mcp-protocol-version", b"2026-07-28")],
        [(b"authorization", b"Bearer wrong-wrong-wrong-wrong")],
    ],
    ids=["second-host", "foreign-origin", "two-origins", "second-content-type", "second-version", "second-token"],
)
def test_headers_repeated_or_added_beside_admitted_ones_open_no_door(
    project_tools: Project, extra: list[tuple[bytes, bytes]]
) -> None:
    """A request carrying the admitted headers and, before them, another value of one of them (a DNS-rebinding
    page's Host or Origin, a second token): the direct path never answers it on the strength of the admitted set;
    whatever the SDK and the gate decide of it, the tool runs only if they answer 200 (and then through them)."""
    marker = project_tools.root / "ran"
    body = call("sleeper", {"marker": str(marker)})

    async def scenario() -> tuple[list[int], int]:
        async with served(project_tools) as running:
            assert (await running.both(call("echo", {"text": "x"})))[1][0] == 200
            statuses = []
            before = running.sdk.calls
            for _ in range(2):
                statuses.append((await running.post(body, [*extra, *HEADERS]))[0])
            return statuses, running.sdk.calls - before

    statuses, asked = anyio.run(scenario)
    assert statuses[0] == statuses[1] and statuses[0] != 200, statuses
    assert not marker.exists()
    assert asked == (0 if statuses[0] == 401 else 2)  # each asked of the SDK (but what the gate refused first)
