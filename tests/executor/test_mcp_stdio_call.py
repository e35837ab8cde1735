"""The direct ``tools/call`` path of ``toolexec mcp`` over stdio (:mod:`toolexec.mcp_stdio_call`): the same bytes as the
SDK's path for every kind of result, the SDK's for everything that is not a plain call, cancellation and the end of
input as the SDK does them, and hostile input (duplicate and huge ids, a request before ``initialize``, a flood) kept
to the SDK's answers.

The server runs as a real process; a launcher wraps :func:`toolexec.mcp_stdio_call.respond_then` to say on stderr which
request ids the direct path answered, so each test also proves which path answered what, and
:meth:`toolexec.mcp_stdio.Wire.write_now` to say which answers went out at once, and from which thread. The same call goes to the
SDK when its params carry an empty ``_meta`` (which changes nothing in its answer).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.executor.test_hostile_mcp import RawStdio
from tests.executor.test_mcp import FAIL, GREET, SHAPE, WAIT
from tests.helpers import alive, wait_until

pytest.importorskip("mcp")

LAUNCHER = """
import sys
import toolexec.mcp_stdio_call as direct

real = direct.respond_then

async def respond_then(server, request_id, *rest):
    print(f"direct {request_id!r}", file=sys.stderr, flush=True)
    return await real(server, request_id, *rest)

direct.respond_then = respond_then

import json, threading
import toolexec.mcp_stdio as stdio

real_write = stdio.Wire.write_now

def write_now(self, wire_out, data):
    went = real_write(self, wire_out, data)
    if went:
        where = "loop" if threading.current_thread() is threading.main_thread() else "call"
        print(f"wrote {json.loads(data)['id']!r} {where}", file=sys.stderr, flush=True)
    return went

stdio.Wire.write_now = write_now
from toolexec.entry import program
raise SystemExit(program())
"""
HOLD = (
    "#!/usr/bin/env bash\n# @describe Hold until released; record its pid.\n# @option --n! Which call.\n"
    'main() {\n    echo $$ > "$LLM_TOOL_CACHE_DIR/.pid-$argc_n"\n'  # written whole, then named: seen only complete
    '    mv "$LLM_TOOL_CACHE_DIR/.pid-$argc_n" "$LLM_TOOL_CACHE_DIR/pid-$argc_n"\n'
    '    while [ ! -e "$LLM_TOOL_CACHE_DIR/release" ]; do sleep 0.01; done\n'
    '    printf "%s" "$argc_n" >>"$LLM_OUTPUT"\n}\n'
)
UNICODE = '''
def run(text: str) -> str:
    """Say it back, with a lone surrogate a tool may print.

    Args:
        text: What to say.
    """
    return text + " caf\\u00e9 \\u2713 " + "\\ud800"
'''
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


@pytest.fixture
def tools(project: Project, unconfined: None) -> Project:
    project.tool("greet.py", GREET)
    project.tool("fail.sh", FAIL)
    project.tool("shape.py", SHAPE)
    project.tool("hold.sh", HOLD)
    project.tool("uni.py", UNICODE)
    project.configure(["greet.py", "fail.sh", "shape.py", "hold.sh", "uni.py"], timeout=120)
    (project.root / "functions" / "cache" / "hold").mkdir(parents=True)
    return project


class Server(RawStdio):
    """``toolexec mcp`` over stdio through the launcher, line by line: the exact bytes of each answer, and which ids
    went direct."""

    def __init__(self, project: Project, init: dict[str, Any] | None = INIT) -> None:
        launcher = project.root / "launcher.py"
        launcher.write_text(LAUNCHER)
        super().__init__(project, [sys.executable, str(launcher)], initialize=False)
        if init is not None:
            assert json.loads(self.exchange(0, "initialize", init))["result"]["protocolVersion"] == init["protocolVersion"]
            self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message: dict[str, Any]) -> None:
        self.send(json.dumps(message).encode())

    def answers(self, ids: set[Any]) -> dict[Any, bytes]:
        """The lines answering ``ids`` (notifications skipped), in whatever order they come."""
        found: dict[Any, bytes] = {}
        while ids - found.keys():
            line = self.line()
            request_id = json.loads(line).get("id")
            if request_id in ids:
                assert request_id not in found, f"two answers to {request_id!r}"
                found[request_id] = line
        return found

    def exchange(self, request_id: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
        """The line answering one request."""
        self.post({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params is not None else {})})
        return self.answers({request_id})[request_id]

    def direct(self, what: str = "direct") -> list[str]:
        """The ids the direct path has answered so far, as ``repr`` writes them (``what="wrote"``: those whose answer
        went out at once, each with the thread that wrote it: ``call``, or ``loop`` for a call refused before it had
        a thread)."""
        log = Path(self.errors.name).read_text()
        return [line.split(" ", 1)[1] for line in log.splitlines() if line.startswith(f"{what} ")]

    def finish(self) -> tuple[int, bytes]:
        """End the input; the exit status and what was still written."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        rest = self.pending + self.proc.stdout.read()
        status = self.proc.wait(timeout=WAIT)
        self.proc.stdout.close()
        self.errors.close()
        return status, rest


CALLS = [
    ("greet", {"name": "Ada", "times": 2}),  # text
    ("greet", {"name": "Ada", "times": "twice"}),  # invalid arguments: an error result
    ("greet", {}),  # a required argument missing
    ("fail", {}),  # the tool fails
    ("shape", {"n": 2}),  # structured output
    ("shape", {"n": -1}),  # output breaking its declared shape
    ("uni", {"text": "\u00e9\U0001f600"}),  # non-ASCII both ways, a lone surrogate out
]


@pytest.mark.parametrize("request_id", [7, "call-7", 2**62, 10**30, -1, '\u00e9 \\ " id'])
def test_a_plain_call_is_answered_direct_with_the_sdks_exact_bytes(tools: Project, request_id: Any) -> None:
    server = Server(tools)
    try:
        for name, arguments in CALLS:
            direct = server.exchange(request_id, "tools/call", {"name": name, "arguments": arguments})
            through_sdk = server.exchange(request_id, "tools/call", {"name": name, "arguments": arguments, "_meta": {}})
            assert direct == through_sdk, (name, arguments)
            assert json.loads(direct)["id"] == request_id
        answered_direct = server.direct()
    finally:
        status, rest = server.finish()
    written = server.direct("wrote")  # (once the server has ended: a thread says so after its answer has gone)
    assert answered_direct == [repr(request_id)] * len(CALLS)
    # each answer written by the call's own thread, no hop back to the event loop (but the calls refused before any
    # thread: their arguments are invalid)
    assert written == [f"{request_id!r} {where}" for where in ("call", "loop", "loop", "call", "call", "call", "call")]
    assert (status, rest) == (0, b"")


def test_an_answer_past_one_pipe_write_goes_out_through_the_event_loop_whole(tools: Project) -> None:
    """An answer longer than one atomic pipe write (PIPE_BUF bytes) is not written by its call's thread (which could
    write part of it): the event loop writes it, whole, byte for byte the SDK's; a short one right after it goes out
    at once again."""
    import select

    server = Server(tools)
    try:
        big = {"name": "Ada", "times": select.PIPE_BUF // 5}  # ("hello Ada " each: twice PIPE_BUF)
        direct = server.exchange(1, "tools/call", {"name": "greet", "arguments": big})
        through_sdk = server.exchange(2, "tools/call", {"name": "greet", "arguments": big, "_meta": {}})
        small = json.loads(server.exchange(3, "tools/call", {"name": "greet", "arguments": {"name": "Ada"}}))
        answered_direct = server.direct()
    finally:
        status, rest = server.finish()
    written = server.direct("wrote")
    assert len(direct) > select.PIPE_BUF and json.loads(direct)["id"] == 1
    assert direct.replace(b'"id":1', b'"id":2', 1) == through_sdk
    assert small["result"]["content"][0]["text"] == "hello Ada"
    assert (answered_direct, written) == (["1", "3"], ["3 call"])
    assert (status, rest) == (0, b"")


def test_what_is_not_a_plain_call_goes_to_the_sdk(tools: Project) -> None:
    server = Server(tools)
    try:
        server.exchange(1, "ping")
        server.exchange(2, "tools/list")
        unknown = json.loads(server.exchange(3, "tools/call", {"name": "nope", "arguments": {}}))
        progress = json.loads(
            server.exchange(4, "tools/call", {"name": "greet", "arguments": {"name": "A"}, "_meta": {"progressToken": 1}})
        )
        no_params = json.loads(server.exchange(5, "tools/call"))
        bad_name = json.loads(server.exchange(6, "tools/call", {"name": 5, "arguments": {}}))
        extra = json.loads(server.exchange(7, "tools/call", {"name": "greet", "arguments": {"name": "A"}, "task": {}}))
        plain = json.loads(server.exchange(8, "tools/call", {"name": "greet", "arguments": {"name": "A"}}))
        answered_direct = server.direct()
    finally:
        status, _ = server.finish()
    assert unknown["error"]["code"] == -32602
    assert progress["result"]["content"][0]["text"] == "hello A"
    assert no_params["error"]["code"] == -32602 and bad_name["error"]["code"] == -32602
    assert "id" in extra and plain["result"]["content"][0]["text"] == "hello A"
    assert answered_direct == ["8"]
    assert status == 0


def test_before_initialize_and_for_a_client_that_can_be_asked_the_sdk_answers(tools: Project) -> None:
    server = Server(tools, init=None)
    try:
        early = json.loads(server.exchange(1, "tools/call", {"name": "greet", "arguments": {"name": "A"}}))
        assert json.loads(server.exchange(2, "initialize", {**INIT, "capabilities": {"elicitation": {}}}))["result"]
        server.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        asked = json.loads(server.exchange(3, "tools/call", {"name": "greet", "arguments": {"name": "A"}}))
        answered_direct = server.direct()
    finally:
        status, _ = server.finish()
    assert early["error"] == {"code": -32602, "message": "Invalid request parameters", "data": ""}
    assert asked["result"]["content"][0]["text"] == "hello A"
    assert answered_direct == []
    assert status == 0


def _hold(server: Server, request_id: Any, n: int) -> None:
    server.post(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "hold", "arguments": {"n": str(n)}}}
    )


def test_a_cancelled_direct_call_ends_its_tree_and_is_never_answered(tools: Project) -> None:
    cache = tools.root / "functions" / "cache" / "hold"
    server = Server(tools)
    try:
        _hold(server, 1, 1)
        _hold(server, "2", 2)
        wait_until(lambda: (cache / "pid-1").exists() and (cache / "pid-2").exists(), "both calls to start")
        pids = [int((cache / f"pid-{n}").read_text()) for n in (1, 2)]
        # a stringified id correlates with an integer one, as in the SDK's dispatcher
        server.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "1"}})
        wait_until(lambda: not alive(pids[0]), "the cancelled call's tool to end")
        assert alive(pids[1])
        (cache / "release").touch()
        answers = server.answers({"2"})
        pong = json.loads(server.exchange(3, "ping"))
        answered_direct = server.direct()
    finally:
        (cache / "release").touch()
        status, rest = server.finish()
    assert json.loads(answers["2"])["result"]["content"][0]["text"] == "2"
    assert pong["result"] == {}
    assert sorted(answered_direct) == ["'2'", "1"]
    assert (status, rest) == (0, b"")  # nothing was ever sent for the cancelled call


def test_the_end_of_input_cancels_direct_calls_and_answers_them_as_the_sdk_does(tools: Project) -> None:
    cache = tools.root / "functions" / "cache" / "hold"
    server = Server(tools)
    _hold(server, 1, 1)  # direct
    server.post(
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hold", "arguments": {"n": "2"}, "_meta": {}}}
    )  # the SDK's
    wait_until(lambda: (cache / "pid-1").exists() and (cache / "pid-2").exists(), "both calls to start")
    pids = [int((cache / f"pid-{n}").read_text()) for n in (1, 2)]
    status, rest = server.finish()
    answers = sorted((json.loads(line) for line in rest.splitlines()), key=lambda answer: answer["id"])
    closed = {"code": -32000, "message": "Connection closed"}
    assert answers == [{"jsonrpc": "2.0", "id": n, "error": closed} for n in (1, 2)]
    assert status == 0
    assert not any(alive(pid) for pid in pids)
    assert server.direct() == ["1"]


def test_a_duplicate_id_in_flight_goes_to_the_sdk_and_both_are_answered(tools: Project) -> None:
    cache = tools.root / "functions" / "cache" / "hold"
    server = Server(tools)
    try:
        _hold(server, 5, 1)
        wait_until(lambda: (cache / "pid-1").exists(), "the first call to start")
        _hold(server, 5, 2)
        wait_until(lambda: (cache / "pid-2").exists(), "the second call to start")
        (cache / "release").touch()
        lines = [json.loads(server.line()) for _ in range(2)]
        answered_direct = server.direct()
    finally:
        (cache / "release").touch()
        status, _ = server.finish()
    assert sorted(line["result"]["content"][0]["text"] for line in lines) == ["1", "2"]
    assert {line["id"] for line in lines} == {5}
    assert answered_direct == ["5"]  # the first only
    assert status == 0


def test_a_flood_of_calls_is_answered_each_once_under_max_parallel(tools: Project) -> None:
    tools.configure(["greet.py"], max_parallel=2)
    server = Server(tools)
    calls = 300
    try:
        lines = b"".join(
            json.dumps(
                {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": str(n)}}}
            ).encode()
            + b"\n"
            for n in range(calls)
        )
        assert server.proc.stdin is not None
        server.proc.stdin.write(lines)
        server.proc.stdin.flush()
        answers = server.answers(set(range(calls)))
        answered_direct = server.direct()
    finally:
        status, rest = server.finish()
    assert {n: json.loads(line)["result"]["content"][0]["text"] for n, line in answers.items()} == {
        n: f"hello {n}" for n in range(calls)
    }
    assert sorted(int(n) for n in answered_direct) == list(range(calls))
    assert (status, rest) == (0, b"")
