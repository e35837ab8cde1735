"""``toolexec mcp`` against hostile clients and tools: every request gets an answer, no line kills the server,
no client (authenticated or not) can exhaust it, and no local user calls it without the token.

Raw JSON-RPC and raw sockets where the wire itself is what is tested; the SDK's ``Client`` where a real
client's view is.
"""

from __future__ import annotations

import json
import os
import re
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import Project
from tests.executor.test_mcp import WAIT, inject_metadata, read_pids, stdio, text, wait_until
from tests.helpers import alive

pytest.importorskip("mcp")

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.slow

ECHO = '''
def run(text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    return text
'''
SLEEPER = '''
import os, subprocess, time

def run(pid_file: str) -> str:
    """Sleep with a grandchild; record the pids (tool, grandchild).

    Args:
        pid_file: Where to write them.
    """
    child = subprocess.Popen(["sleep", "300"])
    with open(pid_file + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.rename(pid_file + ".tmp", pid_file)
    time.sleep(300)
    return "woke"
'''
# Every kind of line a hostile or careless tool can write to LLM_PROGRESS; only the ones marked good count.
HOSTILE_PROGRESS = r'''
import json, os

def run(lines: int = 0, done_file: str = "") -> str:
    """Write hostile progress lines, then a good one; or, with lines > 0, that many good lines as fast as it can.

    Args:
        lines: How many good lines to flood with (0: the hostile set).
        done_file: Created once every line is written.
    """
    with open(os.environ["LLM_PROGRESS"], "wb") as out:
        if lines:
            for n in range(1, lines + 1):
                out.write(b'{"progress": %d, "total": %d, "message": "step %d of many, padded to take some room"}\n' % (n, lines, n))
        else:
            name = os.fsdecode(b"report-\xff.txt")  # a file name that is not UTF-8: json.dumps writes \udcff
            out.write(json.dumps({"progress": 1, "total": 4, "message": f"reading {name}"}).encode() + b"\n")
            out.write(b"{" * 40000 + b"\n")
            out.write(b'{"progress": Infinity}\n{"progress": NaN, "total": 2}\n{"progress": 2, "total": -Infinity}\n')
            out.write(b'{"progress": 1e999}\n{"progress": ' + b"9" * 5000 + b"}\n")
            out.write(b'{"progress": 2, "message": "caf\xe9 \xed\xa0\x80"}\n')
            out.write(b'{"progress": 3, "message": "' + b"x" * 70000 + b'"}\n')
            out.write(b'[{"progress": 3}]\n{"progress": true}\n{"progress": "3"}\n\n{"progress": 3, "total": "ten"}\n')
            out.write(b'{"progress": 4, "total": 4, "message": "' + "\u00e9\u2713".encode() + b'"}')
        out.flush()
    if done_file:
        open(done_file, "w").close()
    return "ok"
'''
# What the client must see of HOSTILE_PROGRESS, in order.
EXPECTED_PROGRESS = [
    (1.0, 4.0, "reading report-\ufffd.txt"),
    (2.0, None, "caf\ufffd \ufffd\ufffd\ufffd"),
    (3.0, None, None),
    (4.0, 4.0, "\u00e9\u2713"),
]


@pytest.fixture
def tools(project: Project) -> Project:
    project.tool("echo.py", ECHO)
    project.tool("sleeper.py", SLEEPER)
    project.tool("noisy.py", HOSTILE_PROGRESS)
    project.configure(["echo.py", "sleeper.py", "noisy.py"])
    return project


# --- stdio: every line answered ----------------------------------------------------------------------


class RawStdio:
    """The stdio server under raw JSON-RPC: what exactly it answers to each line."""

    def __init__(self, project: Project, program: list[str] | None = None, *, initialize: bool = True) -> None:
        """``program``: what runs toolexec (``python -m toolexec``); ``initialize``: whether to do the handshake."""
        self.errors = (project.root / "stdio.err").open("w+")
        self.pending = b""
        self.proc = subprocess.Popen(
            [*(program or [sys.executable, "-m", "toolexec"]), "--config", str(project.config), "mcp", "--no-reload"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            cwd=project.root,
        )
        if initialize:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
            assert self.request(1, "initialize", init)["id"] == 1
            self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        """The next line the server wrote, parsed."""
        return json.loads(self.line())

    def line(self) -> bytes:
        """The next line the server wrote, as it is (read unbuffered: select must see what is still to come)."""
        assert self.proc.stdout is not None
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.proc.stdout], [], [], WAIT)
            assert ready, f"no answer within {WAIT}s"
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            assert chunk, "the server closed its stdout"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})}
        self.send(json.dumps(message).encode())
        while True:
            reply = self.reply()
            if reply.get("id") == request_id:
                return reply

    def close(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        status = self.proc.wait(timeout=WAIT)
        self.proc.stdout.close()
        self.errors.seek(0)
        self.log = self.errors.read()
        self.errors.close()
        return status


def parse_error(message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {message}"}}


def invalid(message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": f"Invalid Request: {message}"}}


CALL = b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": %s}}'
UNANSWERABLE = [
    (
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {',
        parse_error("EOF while parsing an object at line 1 column 63"),
    ),
    (b'{"jsonrpc": "2.0", "id": 3 "method": "tools/list"}', parse_error("expected `,` or `}` at line 1 column 28")),
    (CALL % (b'{"text": "' + b"\xc3\x28" + b'"}'), parse_error("the line is not UTF-8 text (byte 102)")),
    (CALL % b'{"\\udc41": 1}', parse_error("lone leading surrogate in hex escape at line 1 column 100")),
    (CALL % (b'{"text": ' + b"[" * 240 + b"]" * 240 + b"}"), parse_error("nested deeper than 200 levels at line 1 column 300")),
    (CALL % (b'{"n": -' + b"1" * 6000 + b"}"), parse_error("number out of range at line 1 column 4401")),
    (b"[]", invalid("batches are not supported; send one message at a time")),
    (b'[{"jsonrpc": "2.0", "id": 4, "method": "ping"}]', invalid("batches are not supported; send one message at a time")),
    (b'"tools/list"', invalid("a JSON-RPC message is an object")),
    (b"null", invalid("a JSON-RPC message is an object")),
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', invalid("id must be a string or an integer, got null")),
    (b'{"jsonrpc": "2.0", "id": false, "method": "ping"}', invalid("id must be a string or an integer, got false")),
    (b'{"jsonrpc": "2.0", "id": 2.5, "method": "ping"}', invalid("id must be a string or an integer, got 2.5")),
    (
        b'{"id": 17, "method": "ping"}',
        invalid("not a JSON-RPC 2.0 request, notification or response (jsonrpc: Field required)", 17),
    ),
    (
        b'{"jsonrpc": "1.0", "id": "a", "method": "ping"}',
        invalid("not a JSON-RPC 2.0 request, notification or response (jsonrpc: Input should be '2.0')", "a"),
    ),
]


def test_every_line_the_stdio_server_cannot_take_is_answered_and_it_keeps_serving(tools: Project) -> None:
    server = RawStdio(tools)
    try:
        for line, expected in UNANSWERABLE:
            server.send(line)
            assert server.reply() == expected, line[:120]
        server.send(b"x" * (16 * 1024 * 1024 + 10) + b'"}')  # longer than any message may be, without a newline yet
        server.send(b"")
        assert server.reply() == parse_error(f"a message over {16 * 1024 * 1024} bytes")
        server.send(b"   ")  # a blank line is no message: nothing to answer
        echoed = server.request(5, "tools/call", {"name": "echo", "arguments": {"text": "still here \u2713"}})
        assert echoed["result"] == {"content": [{"type": "text", "text": "still here \u2713"}], "isError": False}
    finally:
        assert server.close() == 0
    assert "Traceback" not in server.log


ODD_OUTPUT = r'''
def run(kind: str) -> str:
    """Print JSON that the declared output shape cannot take as is.

    Args:
        kind: Which.
    """
    return {
        "surrogate": '{"name": "a\\udcffb"}',
        "nan": '{"name": "x", "size": NaN}',
        "huge": '{"name": "x", "size": 1e400}',
        "digits": '{"name": "x", "size": ' + "9" * 5000 + "}",
        "deep": '{"name": "x", "more": ' + "[" * 30000 + "]" * 30000 + "}",
    }[kind]
'''
OUTPUT_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
NOT_JSON = "Tool call 'odd' declared an output schema but its output is not JSON ({}): {}"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_structured_output_no_json_writer_can_send_is_made_safe_or_refused(project: Project, transport: str) -> None:
    """A tool's output goes through the same checks as its progress before it reaches the protocol writer."""
    project.tool("odd.py", ODD_OUTPUT)
    project.configure(["odd.py"])
    inject_metadata(project, "odd", {"output_schema": OUTPUT_SCHEMA})

    async def calls(client: Client) -> dict[str, tuple[bool, str, Any]]:
        results = {}
        for kind in ("surrogate", "nan", "huge", "digits", "deep"):
            result = await client.call_tool("odd", {"kind": kind})
            results[kind] = (result.is_error, text(result), result.structured_content)
        return results

    async def scenario() -> dict[str, tuple[bool, str, Any]]:
        if transport == "stdio":
            async with stdio(project, "legacy") as client:
                return await calls(client)
        server = Http(project, "--token-env", "T", env={"T": "sesame-sesame-sesame"})
        try:
            async with (
                httpx2.AsyncClient(
                    headers={"Authorization": "Bearer sesame-sesame-sesame"}, timeout=httpx2.Timeout(WAIT)
                ) as session,
                Client(streamable_http_client(server.url, http_client=session), mode="legacy") as client,
            ):
                return await calls(client)
        finally:
            assert server.stop() == 0
            assert "Traceback" not in server.log()

    results = anyio.run(scenario)
    assert results == {
        "surrogate": (False, '{"name": "a\ufffdb"}', {"name": "a\ufffdb"}),
        "nan": (True, NOT_JSON.format("NaN is not a JSON number", '{"name": "x", "size": NaN}'), None),
        "huge": (
            True,
            NOT_JSON.format("1e400 is too large for a JSON number (it would be infinite)", '{"name": "x", "size": 1e400}'),
            None,
        ),
        "digits": (True, NOT_JSON.format("an integer of more than 4300 digits", '{"name": "x", "size": ' + "9" * 178), None),
        "deep": (True, NOT_JSON.format("nested more than 100 levels deep", '{"name": "x", "more": ' + "[" * 178), None),
    }


def test_the_stdio_writer_sends_what_json_can_carry_and_never_stops() -> None:
    """Defence in depth behind the checks above: a message the SDK cannot encode still goes out, made safe."""
    from toolexec.mcp_stdio import encode

    reply = types.JSONRPCResponse(jsonrpc="2.0", id=7, result={"text": "a\udcffb", "n": float("nan"), "k\ud800": [1]})
    assert json.loads(encode(reply)) == {"jsonrpc": "2.0", "id": 7, "result": {"text": "a\ufffdb", "n": None, "k\ufffd": [1]}}
    note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"data": "\udc00"})
    assert json.loads(encode(note))["params"] == {"data": "\ufffd"}


@pytest.mark.parametrize("method", ["ping", "tools/call"])
def test_a_client_that_floods_and_never_reads_holds_a_bounded_part_of_the_server(tools: Project, method: str) -> None:
    """Past MAX_UNANSWERED requests in flight each is refused at once; once the refusals fill the client's unread pipe,
    the server stops reading: the client's writes block, whatever it goes on sending. Then every request read is
    answered exactly once (served or refused), and the server keeps serving."""
    from toolexec.mcp_stdio import MAX_UNANSWERED, TOO_MANY_UNANSWERED

    server = RawStdio(tools)
    params = {"name": "echo", "arguments": {"text": "x"}} if method == "tools/call" else None
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": n, "method": method, **({"params": params} if params else {})}).encode() + b"\n"
        for n in range(2, 30_000)
    ]
    from toolexec.mcp_stdio import CHUNK

    shortest_answer = len(b'{"jsonrpc":"2.0","id":2,"result":{}}')  # no answer the server writes is shorter
    shortest_line = min(len(line) for line in lines)
    pipe = 1 << 16  # Linux's default pipe capacity, each way
    # in flight, answers queued and one being sent, answers in the unread pipe, lines in the reader's chunk and the pipe
    bound = MAX_UNANSWERED + 16 + 1 + pipe // shortest_answer + (CHUNK + pipe) // shortest_line
    assert len(lines) > 2 * bound
    assert server.proc.stdin is not None
    fd = server.proc.stdin.fileno()
    os.set_blocking(fd, False)
    sent = 0
    try:
        while sent < len(lines):  # each line is one write under PIPE_BUF: written whole or not at all
            try:
                os.write(fd, lines[sent])
                sent += 1
            except BlockingIOError:
                _, writable, _ = select.select([], [fd], [], 3.0)
                if not writable:  # the server has stopped reading
                    break
        os.set_blocking(fd, True)
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < sent:
            reply = server.reply()
            assert reply["id"] not in answers, f"two answers to {reply['id']}"
            answers[reply["id"]] = reply
        still = server.request(1, "tools/call", {"name": "echo", "arguments": {"text": "still here"}})
    finally:
        status = server.close()
    assert sent <= bound, f"the server read {sent} requests without its answers being read"
    assert set(answers) == set(range(2, 2 + sent))
    refused = {n for n, reply in answers.items() if "error" in reply}
    assert refused, "no request was refused"
    assert all(answers[n]["error"]["code"] == TOO_MANY_UNANSWERED for n in refused)
    assert f"{MAX_UNANSWERED} of this client's are still unanswered" in answers[min(refused)]["error"]["message"]
    assert len(answers) - len(refused) >= MAX_UNANSWERED  # the first ones were all served
    assert still["result"]["content"][0]["text"] == "still here"
    assert status == 0
    assert "Traceback" not in server.log


# --- progress: hostile lines, and a flood -----------------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_hostile_progress_lines_never_reach_the_client_unvalidated(tools: Project, era: str) -> None:
    async def scenario() -> list[tuple[float, float | None, str | None]]:
        seen: list[tuple[float, float | None, str | None]] = []

        async def record(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        async with stdio(tools, era) as client:
            result = await client.call_tool("noisy", {}, progress_callback=record)
            assert (result.is_error, text(result)) == (False, "ok")
            again = await client.call_tool("echo", {"text": "alive"})  # the server outlived every line
            assert text(again) == "alive"
        return seen

    assert anyio.run(scenario) == EXPECTED_PROGRESS  # fewer good lines than may wait: none was coalesced away


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]


def test_a_progress_flood_to_a_client_that_does_not_read_stays_bounded(tools: Project, tmp_path: Path) -> None:
    """The client reads nothing while the tool writes 300,000 lines: the server keeps only the newest few events
    (its memory stays flat), and once the client reads, the last line is the last progress it gets."""
    lines, done = 300_000, tmp_path / "done"
    server = RawStdio(tools)
    try:
        assert server.request(2, "ping")["result"] == {}
        before = rss_kib(server.proc.pid)
        call = {"name": "noisy", "arguments": {"lines": lines, "done_file": str(done)}, "_meta": {"progressToken": "p"}}
        server.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}).encode())
        wait_until(done.exists, timeout=120)
        grown = rss_kib(server.proc.pid) - before
        progress = []
        while (reply := server.reply()).get("id") != 3:
            progress.append(reply["params"]["progress"])
        assert reply["result"]["content"] == [{"type": "text", "text": "ok"}]
    finally:
        assert server.close() == 0
    assert grown < 40_000, f"the server grew by {grown} KiB while the client did not read"
    assert progress[-1] == lines
    assert len(progress) < lines // 10, len(progress)  # coalesced: a reader that lags skips to the newest
    assert progress == sorted(progress)


def test_the_python_api_survives_hostile_progress(tools: Project) -> None:
    from toolexec import Executor
    from toolexec.runtimes.process import CallControl

    events: list[dict[str, Any]] = []
    control = CallControl(on_event=lambda event: events.append(event) if event["event"] == "progress" else None)
    result = Executor(tools.config).call("noisy", {}, cancel=control)
    assert (result.ok, result.output) == (True, "ok")
    seen = [(e["progress"], e.get("total"), e.get("message")) for e in events]
    assert seen == [(int(p), int(t) if t else None, m) for p, t, m in EXPECTED_PROGRESS]


# --- HTTP: the token, bounds before authentication, shutdown --------------------------------------------


class Http:
    """``toolexec mcp --http 127.0.0.1:0`` with what a test gives it; ``url`` once it listens."""

    def __init__(self, project: Project, *extra: str, env: dict[str, str] | None = None, nofile: int | None = None) -> None:
        self.log_file = project.root / "http.log"
        self.errors = self.log_file.open("w")

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "toolexec",
                "--config",
                str(project.config),
                "mcp",
                "--no-reload",
                "--http",
                "127.0.0.1:0",
                *extra,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.errors,
            env={**os.environ, **(env or {})},
            preexec_fn=limit,
        )
        found = wait_until(lambda: re.search(r"serving (http://127\.0\.0\.1:(\d+)/mcp)", self.log_file.read_text()))
        self.url, self.port = found.group(1), int(found.group(2))

    def log(self) -> str:
        return self.log_file.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            self.errors.close()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(url: str, token: str | None) -> int:
    with httpx2.Client(timeout=WAIT) as plain:
        return plain.post(
            url, json=INITIALIZE, headers={**ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {})}
        ).status_code


async def listed_names(url: str, token: str) -> list[str]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(WAIT)) as session,
        Client(streamable_http_client(url, http_client=session), mode="legacy") as client,
    ):
        return [t.name for t in (await client.list_tools()).tools]


GENERATED = (
    'clients send "Authorization: Bearer <its content>" (set your own with --token-env NAME or mcp.token_env; '
    "--no-token serves without one)"
)


def test_without_a_configured_token_one_is_generated_kept_private_and_required(tools: Project, tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    token_file = runtime / "toolexec" / "mcp-token"
    server = Http(tools, env={"XDG_RUNTIME_DIR": str(runtime)})
    try:
        assert f"toolexec mcp: generated a bearer token in {token_file}: {GENERATED}\n" in server.log()
        assert (token_file.stat().st_mode & 0o777, token_file.parent.stat().st_mode & 0o777) == (0o600, 0o700)
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert (post(server.url, None), post(server.url, token[:-1])) == (401, 401)
        assert anyio.run(listed_names, server.url, token) == ["echo", "sleeper", "noisy"]
    finally:
        assert server.stop() == 0
    again = Http(tools, env={"XDG_RUNTIME_DIR": str(runtime)})  # a restart keeps the token clients were given
    try:
        assert f"toolexec mcp: the bearer token is in {token_file}: {GENERATED}\n" in again.log()
        assert post(again.url, token) == 200
    finally:
        assert again.stop() == 0


def test_a_token_file_others_could_read_is_refused(tools: Project) -> None:
    from tests.conftest import toolexec

    state = Path(os.environ["XDG_STATE_HOME"]) / "toolexec"
    state.mkdir(mode=0o700)
    (state / "mcp-token").write_text("a-token-that-others-can-read\n")
    (state / "mcp-token").chmod(0o644)
    done = toolexec("--config", str(tools.config), "mcp", "--no-reload", "--http", "127.0.0.1:0")
    path = state / "mcp-token"
    assert (done.returncode, done.stderr) == (
        2,
        f"toolexec: the MCP token file {path} must be a file of your own with mode 600 (chmod 600 {path})\n",
    )


def test_no_token_is_an_explicit_choice_and_says_so(tools: Project) -> None:
    server = Http(tools, "--no-token")
    try:
        assert (
            "toolexec mcp: WARNING: serving 127.0.0.1 without a bearer token (--no-token): anyone who can reach it "
            "(every account on this machine) calls the tools as you\n" in server.log()
        )
        assert post(server.url, None) == 200
    finally:
        assert server.stop() == 0


def test_idle_and_half_open_connections_never_starve_a_client_with_a_request(tools: Project) -> None:
    """With 256 descriptors the server keeps at most 128 connections; 300 idle or half-open ones make it close the
    oldest idle ones, and the call that comes after them is served at once."""
    server = Http(tools, "--token-env", "T", env={"T": "sesame-sesame-sesame"}, nofile=256)
    sockets: list[socket.socket] = []
    try:
        for n in range(300):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
            if n % 2:
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")  # headers never finished
            sockets.append(sock)
        assert anyio.run(listed_names, server.url, "sesame-sesame-sesame") == ["echo", "sleeper", "noisy"]
        closed, _, _ = select.select(sockets, [], [], 0)
        assert len(closed) >= 300 - 128
        assert all(sock.recv(1) == b"" for sock in closed)  # closed, not answered
    finally:
        for sock in sockets:
            sock.close()
        assert server.stop() == 0
    assert "Traceback" not in server.log() and "Too many open files" not in server.log()


def test_a_client_sending_its_headers_slowly_is_cut_off(tools: Project) -> None:
    from toolexec.mcp_http import HEADER_SECONDS

    server = Http(tools, "--no-token")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            start = time.monotonic()
            cut = False
            while time.monotonic() - start < 2 * HEADER_SECONDS and not cut:
                try:
                    sock.sendall(b"a")  # a byte a second: each arrives long before any per-read timeout
                except OSError:
                    cut = True
                if select.select([sock], [], [], 1.0)[0]:
                    cut = sock.recv(1) == b""
            assert cut, f"still connected after {2 * HEADER_SECONDS} s of trickled headers"
            assert time.monotonic() - start >= HEADER_SECONDS - 1
        assert post(server.url, None) == 200
    finally:
        assert server.stop() == 0


def http_status(sock: socket.socket) -> int:
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(4096)
        assert chunk, "closed without an answer"
        head += chunk
    return int(head.split(b" ", 2)[1])


def test_an_oversize_body_is_refused_with_413_before_authentication(tools: Project) -> None:
    from toolexec.mcp_http import MAX_BODY_BYTES

    server = Http(tools, "--token-env", "T", env={"T": "sesame-sesame-sesame"})
    request = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:  # declared: no token needed
            sock.sendall(request + b"Content-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1))
            assert http_status(sock) == 413
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:  # streamed: refused mid-way
            sock.sendall(request + b"Authorization: Bearer sesame-sesame-sesame\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20))
            with pytest.raises(OSError):  # the server answers and closes long before the 40th MiB
                for _ in range(40):
                    sock.sendall(chunk)
            assert http_status(sock) == 413
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as sock:  # no token: not even read
            sock.sendall(request + b"Transfer-Encoding: chunked\r\n\r\n" + chunk)
            assert http_status(sock) == 401
        assert post(server.url, "sesame-sesame-sesame") == 200
    finally:
        assert server.stop() == 0
    assert "Traceback" not in server.log()


def test_a_body_that_is_not_one_request_is_answered_as_over_stdio(tools: Project) -> None:
    """The SDK's HTTP transport takes a request whose id is null or a boolean for a notification (202, no answer)
    and calls a batch invalid params: every such body gets the answer stdio gives it."""
    server = Http(tools, "--token-env", "T", env={"T": "sesame-sesame-sesame"})
    headers = {**ACCEPT, "Authorization": "Bearer sesame-sesame-sesame", "MCP-Protocol-Version": "2025-11-25"}
    try:
        with httpx2.Client(timeout=WAIT) as client:
            answers = [client.post(server.url, content=line, headers=headers) for line, _ in UNANSWERABLE]
            assert client.post(server.url, json=INITIALIZE, headers=headers).status_code == 200
    finally:
        assert server.stop() == 0
    assert [(a.status_code, a.json()) for a in answers] == [(400, expected) for _, expected in UNANSWERABLE]


def test_keep_alive_requests_are_not_held_back_by_nagle(tools: Project) -> None:
    """TCP_NODELAY on accepted connections: without it each reply waits ~40 ms for the client's delayed ACK."""
    server = Http(tools, "--token-env", "T", env={"T": "sesame-sesame-sesame"})
    headers = {**ACCEPT, "Authorization": "Bearer sesame-sesame-sesame", "MCP-Protocol-Version": "2025-11-25"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    try:
        with httpx2.Client(timeout=WAIT) as client:
            assert client.post(server.url, json=INITIALIZE, headers=headers).status_code == 200
            times = []
            for _ in range(20):
                start = time.perf_counter()
                reply = client.post(server.url, json=listing, headers=headers)
                times.append(time.perf_counter() - start)
                assert reply.status_code == 200
    finally:
        assert server.stop() == 0
    assert statistics.median(times) < 0.030, times  # Nagle with delayed ACKs costs 40 ms or more a reply


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
def test_sigterm_answers_every_call_in_flight_ends_their_trees_and_exits_0_quietly(tools: Project, tmp_path: Path) -> None:
    server = Http(tools, "--token-env", "T", env={"T": "sesame-sesame-sesame"})
    answers: list[str] = []

    async def call(client: Client, n: int) -> None:
        try:
            await client.call_tool("sleeper", {"pid_file": str(tmp_path / f"pids{n}")})
        except MCPError as error:
            answers.append(f"{error.code}: {error}")

    async def scenario() -> list[list[int]]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer sesame-sesame-sesame"}, timeout=httpx2.Timeout(WAIT)) as session,
            Client(streamable_http_client(server.url, http_client=session), mode="legacy") as client,
            anyio.create_task_group() as group,
        ):
            for n in range(3):
                group.start_soon(call, client, n)
            pids = [await anyio.to_thread.run_sync(read_pids, tmp_path / f"pids{n}") for n in range(3)]
            server.proc.send_signal(signal.SIGTERM)
        return pids

    try:
        pids = anyio.run(scenario)
    finally:
        status = server.stop()
    assert status == 0
    message = (
        "toolexec mcp is shutting down: the call of 'sleeper' was cancelled and its processes ended; "
        "send it again once the server is back"
    )
    assert answers == [f"{types.INTERNAL_ERROR}: {message}"] * 3
    assert not any(alive(pid) for tree in pids for pid in tree)
    assert "Traceback" not in server.log(), server.log()


# --- hot reload ------------------------------------------------------------------------------------------


def test_a_broken_tool_stays_served_when_visible_tools_changes(tools: Project, tmp_path: Path) -> None:
    """An edit breaks ``echo``; then visible_tools gains a tool. ``echo`` keeps its last good version (listed and
    called as before) while it stays visible, and its compile error is in the server's log."""
    errlog = (tmp_path / "server.err").open("w")

    async def scenario() -> None:
        async with stdio(tools, "legacy", errlog=errlog) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["echo", "sleeper", "noisy"]
            tools.tool("echo.py", 'def run(text: str) -> str:\n    """Say it back."""\n    return (\n')
            await await_until(lambda: "echo.py" in (tmp_path / "server.err").read_text())
            tools.tool("late.py", 'def run() -> str:\n    """Arrived late."""\n    return "late"\n')
            tools.configure(["echo.py", "sleeper.py", "noisy.py", "late.py"])
            await await_until(lambda: client_lists(client, "late"))
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == ["echo", "sleeper", "noisy", "late"]
            assert listed[0].input_schema["properties"] == {"text": {"type": "string", "description": "What to say."}}
            still = await client.call_tool("echo", {"text": "the last good version"})
            assert still.is_error is False
            assert re.fullmatch(
                r"the last good version\n\[toolexec note: echo: the file no longer builds \(\S*echo\.py:1:1: .*\); "
                r"ran its last good version\]",
                text(still),
            ), text(still)

    names: list[str] = []

    async def client_lists(client: Client, name: str) -> bool:
        names[:] = [t.name for t in (await client.list_tools()).tools]
        return name in names

    async def await_until(check: Any) -> None:
        with anyio.fail_after(WAIT):
            while True:
                outcome = check()
                if hasattr(outcome, "__await__"):
                    outcome = await outcome
                if outcome:
                    return
                await anyio.sleep(0.05)

    anyio.run(scenario)
    errlog.close()
    assert re.search(r"toolexec mcp: \S*echo\.py:\d+:\d+: ", (tmp_path / "server.err").read_text())


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
def test_sigterm_on_stdio_answers_the_calls_in_flight_before_exiting(tools: Project, tmp_path: Path) -> None:
    server = RawStdio(tools)
    for n in (2, 3):
        call = {"name": "sleeper", "arguments": {"pid_file": str(tmp_path / f"pids{n}")}}
        server.send(json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call}).encode())
    pids = [read_pids(tmp_path / f"pids{n}") for n in (2, 3)]
    server.proc.send_signal(signal.SIGTERM)
    replies = sorted((server.reply(), server.reply()), key=lambda reply: reply["id"])
    assert server.close() == 0
    message = (
        "toolexec mcp is shutting down: the call of 'sleeper' was cancelled and its processes ended; "
        "send it again once the server is back"
    )
    assert replies == [{"jsonrpc": "2.0", "id": n, "error": {"code": types.INTERNAL_ERROR, "message": message}} for n in (2, 3)]
    assert not any(alive(pid) for tree in pids for pid in tree)
    assert "Traceback" not in server.log
