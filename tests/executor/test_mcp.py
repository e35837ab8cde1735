"""``toolexec mcp`` driven by real clients: the SDK's own ``Client`` over stdio and HTTP in both protocol eras,
raw JSON-RPC for exit codes, and the MCP Inspector's command-line mode as a second, independent client."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import REPO, Project
from tests.helpers import alive

pytest.importorskip("mcp")

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

ERAS = ["legacy", "2026-07-28"]
WAIT = 30.0  # the bound of every wait; none is a synchronisation by sleeping

GREET = '''
def run(name: str, times: int = 1) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
        times: How many times.
    """
    return " ".join([f"hello {name}"] * times)
'''
FAIL = """#!/usr/bin/env bash
# @describe Always fails.
main() {
    echo "the disk is on fire" >&2
    exit 3
}
eval "$(argc --argc-eval "$0" "$@")"
"""
SHAPE = '''
def run(n: int) -> dict:
    """Return a count; n < 0 returns a string count, breaking the declared shape."""
    return {"count": n if n >= 0 else "many", "unit": "items"}
'''
NAMESPACED = """#!/usr/bin/env bash
# @describe A tool whose name MCP does not allow as is.
main() { echo "namespaced" >> "$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
"""
SLEEPER = '''
import os, subprocess, time

def run(pid_file: str) -> str:
    """Sleep with a grandchild sleeping too; record the pids (tool, grandchild, server)."""
    child = subprocess.Popen(["sleep", "300"])
    with open(pid_file + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid} {os.getppid()}")
    os.rename(pid_file + ".tmp", pid_file)
    time.sleep(300)
    return "woke"
'''
PROGRESS = {
    "prog_py.py": '''
import json, os

def run() -> str:
    """Report progress."""
    with open(os.environ["LLM_PROGRESS"], "a") as out:
        out.write(json.dumps({"progress": 1, "total": 2, "message": "half"}) + "\\n")
        out.flush()
        out.write(json.dumps({"progress": 2, "total": 2, "message": "done"}) + "\\n")
    return "ok"
''',
    "prog_sh.sh": """#!/usr/bin/env bash
# @describe Report progress.
main() {
    echo '{"progress": 1, "total": 2, "message": "half"}' >> "$LLM_PROGRESS"
    echo '{"progress": 2, "total": 2, "message": "done"}' >> "$LLM_PROGRESS"
    echo ok >> "$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
""",
    "prog_js.js": """import { appendFileSync } from "node:fs";

/**
 * Report progress.
 */
export function run() {
  appendFileSync(process.env.LLM_PROGRESS, JSON.stringify({ progress: 1, total: 2, message: "half" }) + "\\n");
  appendFileSync(process.env.LLM_PROGRESS, JSON.stringify({ progress: 2, total: 2, message: "done" }) + "\\n");
  return "ok";
}
""",
    "prog_ts.ts": """import { appendFileSync } from "node:fs";

/**
 * Report progress.
 */
export function run(): string {
  const report = (progress: number, message: string) =>
    appendFileSync(process.env.LLM_PROGRESS as string, JSON.stringify({ progress, total: 2, message }) + "\\n");
  report(1, "half");
  report(2, "done");
  return "ok";
}
""",
}
SHAPE_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}, "unit": {"type": "string"}},
    "required": ["count", "unit"],
}


def inject_metadata(project: Project, name: str, metadata: dict[str, Any]) -> None:
    """Build, then give one tool metadata in the stored catalog (the build reuses unchanged files' declarations),
    so these tests do not depend on how a compiler reads metadata from source."""
    from toolexec.build import build
    from toolexec.catalog import Catalog
    from toolexec.catalog_store import save_catalog
    from toolexec.config import load_config
    from toolexec.records import ToolDeclaration

    config = load_config(project.config)
    stored = build(config).catalog
    entries = []
    for entry in stored.entries:
        if entry.name == name and entry.declaration is not None:
            data = entry.declaration.to_dict()
            data["metadata"].update(metadata)
            entry = entry.replace(declaration=ToolDeclaration.from_dict(data))
        entries.append(entry)
    save_catalog(config, Catalog(fingerprint=stored.fingerprint, entries=tuple(entries)), stored)


@pytest.fixture
def tools(project: Project) -> Project:
    project.tool("greet.py", GREET)
    project.tool("fail.sh", FAIL)
    project.tool("shape.py", SHAPE)
    project.tool("ns:tool.sh", NAMESPACED)
    project.tool("sleeper.py", SLEEPER)
    for file, source in PROGRESS.items():
        project.tool(file, source)
    project.configure(["greet.py", "fail.sh", "shape.py", "ns:tool.sh", "sleeper.py", *PROGRESS])
    inject_metadata(
        project,
        "shape",
        {
            "title": "Shape",
            "output_schema": SHAPE_SCHEMA,
            "annotations": {"read_only": True, "destructive": False, "idempotent": True, "open_world": False},
        },
    )
    return project


def server_params(project: Project, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolexec", "--config", str(project.config), "mcp", *extra],
        env=dict(os.environ),
        cwd=str(project.root),
    )


@asynccontextmanager
async def stdio(project: Project, era: str, *extra: str, errlog: Any = None, **client: Any) -> AsyncIterator[Client]:
    transport = stdio_client(server_params(project, *extra), errlog=errlog or sys.stderr)
    async with Client(transport, mode=era, **client) as connected:
        yield connected


class HttpServer:
    """``toolexec mcp --http 127.0.0.1:0`` in a child process; ``url`` once it listens."""

    def __init__(self, project: Project, *extra: str, token: str | None = "s3cret") -> None:
        env = {**os.environ, **({"MCP_TOKEN": token} if token else {})}
        args = ["--token-env", "MCP_TOKEN"] if token else []
        self.log = project.root / "http.log"
        self.errors = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolexec", "--config", str(project.config), "mcp", "--http", "127.0.0.1:0", *args, *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.errors,
            env=env,
        )
        self.token = token
        found = wait_until(lambda: re.search(r"serving (http://\S+)", self.log.read_text()))
        self.url = found.group(1)

    def client(self, **headers: str) -> httpx2.AsyncClient:
        base = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx2.AsyncClient(headers={**base, **headers}, timeout=httpx2.Timeout(WAIT))

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            self.errors.close()


@pytest.fixture
def http(tools: Project) -> Any:
    server = HttpServer(tools, "--page-size", "3")
    yield server
    assert server.stop() == 0


def wait_until(check: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Poll ``check`` until it returns something true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"still waiting after {timeout}s")


async def await_until(check: Callable[[], Any], timeout: float = WAIT) -> Any:
    with anyio.fail_after(timeout):
        while not (value := check()):
            await anyio.sleep(0.01)
    return value


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def all_tools(client: Client) -> tuple[list[types.Tool], int]:
    tools, cursor, pages = [], None, 0
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return tools, pages


NAMES = ["greet", "fail", "shape", "ns_tool", "sleeper", "prog_py", "prog_sh", "prog_js", "prog_ts"]


async def check_listing(client: Client) -> None:
    listed, pages = await all_tools(client)
    assert [t.name for t in listed] == NAMES
    assert pages == 3
    shape = next(t for t in listed if t.name == "shape")
    assert shape.title == "Shape"
    assert shape.output_schema == SHAPE_SCHEMA
    assert shape.annotations == types.ToolAnnotations(
        title="Shape", read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    greet = next(t for t in listed if t.name == "greet")
    assert greet.annotations is None and greet.output_schema is None
    assert greet.input_schema["required"] == ["name"]
    with pytest.raises(MCPError) as refused:
        await client.list_tools(cursor="not-a-cursor")
    assert refused.value.code == types.INVALID_PARAMS
    assert "invalid cursor 'not-a-cursor'" in str(refused.value)


async def check_calls(client: Client) -> None:
    ok = await client.call_tool("greet", {"name": "Ada", "times": 2})
    assert (ok.is_error, text(ok)) == (False, "hello Ada hello Ada")

    invalid = await client.call_tool("greet", {"name": "Ada", "times": "twice"})
    assert (invalid.is_error, text(invalid)) == (
        True,
        "invalid arguments for tool 'greet':\n- parameter 'times': expected an integer, got a string \"twice\"",
    )

    failed = await client.call_tool("fail", {})
    assert failed.is_error
    assert text(failed) == "Tool call 'fail' exited with code 3: the disk is on fire"

    mapped = await client.call_tool("ns_tool", {})
    assert (mapped.is_error, text(mapped)) == (False, "namespaced\n")

    shaped = await client.call_tool("shape", {"n": 2})
    assert (shaped.is_error, shaped.structured_content, json.loads(text(shaped))) == (
        False,
        {"count": 2, "unit": "items"},
        {"count": 2, "unit": "items"},
    )
    broken = await client.call_tool("shape", {"n": -1})
    assert broken.is_error
    assert text(broken) == (
        "Tool call 'shape' returned output that does not conform to its declared output schema: "
        "at .count: 'many' is not of type 'integer'"
    )

    with pytest.raises(MCPError) as unknown:
        await client.call_tool("nope", {})
    assert unknown.value.code == types.INVALID_PARAMS
    assert "unknown tool 'nope'" in str(unknown.value)


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_stdio_list_and_calls(tools: Project, era: str) -> None:
    async def scenario() -> None:
        async with stdio(tools, era, "--page-size", "3") as client:
            assert client.protocol_version == ("2025-11-25" if era == "legacy" else era)
            await check_listing(client)
            await check_calls(client)

    anyio.run(scenario)


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_http_list_and_calls(http: HttpServer, era: str) -> None:
    async def scenario() -> None:
        async with http.client() as session, Client(streamable_http_client(http.url, http_client=session), mode=era) as client:
            await check_listing(client)
            await check_calls(client)

    anyio.run(scenario)


@pytest.mark.slow
def test_http_refuses_a_missing_token_and_a_foreign_origin(http: HttpServer) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx2.Client(timeout=WAIT) as plain:
        missing = plain.post(http.url, json=initialize, headers=accept)
        wrong = plain.post(http.url, json=initialize, headers={**accept, "Authorization": "Bearer nope"})
        foreign = plain.post(
            http.url, json=initialize, headers={**accept, "Authorization": "Bearer s3cret", "Origin": "http://evil.example"}
        )
        good = plain.post(http.url, json=initialize, headers={**accept, "Authorization": "Bearer s3cret"})
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, 'Bearer realm="toolexec"')
    assert wrong.status_code == 401
    assert foreign.status_code == 403
    assert good.status_code == 200


def test_http_refuses_an_unset_token_variable_and_token_options_on_stdio(tools: Project) -> None:
    from tests.conftest import toolexec

    unset = toolexec("--config", str(tools.config), "mcp", "--http", "0", "--token-env", "NO_SUCH_TOKEN_VARIABLE")
    assert (unset.returncode, unset.stderr) == (
        2,
        "toolexec: the bearer token variable NO_SUCH_TOKEN_VARIABLE is not set (named by --token-env); export it\n",
    )
    both = toolexec("--config", str(tools.config), "mcp", "--http", "0", "--token-env", "X", "--no-token")
    assert (both.returncode, both.stderr) == (2, "toolexec: --no-token and --token-env contradict each other: give one of them\n")
    stdio = toolexec("--config", str(tools.config), "mcp", "--no-token")
    assert (stdio.returncode, stdio.stderr) == (2, "toolexec: --no-token applies to --http only; stdio needs no token\n")


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_progress_from_every_language(tools: Project, era: str) -> None:
    async def scenario() -> dict[str, list[tuple[float, float | None, str | None]]]:
        seen: dict[str, list[tuple[float, float | None, str | None]]] = {}
        async with stdio(tools, era) as client:
            for name in ("prog_py", "prog_sh", "prog_js", "prog_ts"):
                got = seen[name] = []

                async def record(progress: float, total: float | None, message: str | None, got: list = got) -> None:
                    got.append((progress, total, message))

                result = await client.call_tool(name, {}, progress_callback=record)
                assert (result.is_error, text(result).strip()) == (False, "ok"), text(result)
        return seen

    seen = anyio.run(scenario)
    assert seen == {key: [(1.0, 2.0, "half"), (2.0, 2.0, "done")] for key in seen}
    assert list(seen) == ["prog_py", "prog_sh", "prog_js", "prog_ts"]


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_a_tool_sees_llm_progress_only_while_the_client_listens(project: Project, era: str) -> None:
    project.tool(
        "channel.sh",
        """#!/usr/bin/env bash
# @describe Tell where progress would go.
main() { echo "${LLM_PROGRESS:-unset}" >> "$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
""",
    )
    project.configure(["channel.sh"])

    async def scenario() -> tuple[str, str]:
        async def ignore(progress: float, total: float | None, message: str | None) -> None:
            pass

        async with stdio(project, era) as client:
            listened = await client.call_tool("channel", {}, progress_callback=ignore)
            unheard = await client.call_tool("channel", {})
        return text(listened).strip(), text(unheard).strip()

    listened, unheard = anyio.run(scenario)
    assert re.fullmatch(r"/dev/fd/\d+", listened), listened
    assert unheard == "unset"


def read_pids(path: Path) -> list[int]:
    return [int(p) for p in wait_until(lambda: path.exists() and path.read_text()).split()]


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_a_client_timeout_kills_the_tools_tree(tools: Project, era: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"

    async def scenario() -> None:
        async with stdio(tools, era) as client:
            with pytest.raises(MCPError) as timed_out:
                await client.call_tool("sleeper", {"pid_file": str(pid_file)}, read_timeout_seconds=3)
            assert timed_out.value.code == types.REQUEST_TIMEOUT
            tool, grandchild, _ = read_pids(pid_file)
            await await_until(lambda: not alive(tool) and not alive(grandchild))
            after = await client.call_tool("greet", {"name": "again"})  # the server still serves
            assert text(after) == "hello again"

    anyio.run(scenario)


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_tools_added_changed_and_broken_while_serving(tools: Project, era: str, tmp_path: Path) -> None:
    errlog = (tmp_path / "server.err").open("w")
    changes: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes.append("changed")

    async def scenario() -> None:
        async with stdio(tools, era, errlog=errlog, message_handler=on_message) as client, anyio.create_task_group() as group:
            if era != "legacy":

                async def listen() -> None:
                    async with client.listen(tools_list_changed=True) as subscription:
                        listening.set()
                        async for _ in subscription:
                            changes.append("changed")

                listening = anyio.Event()
                group.start_soon(listen)
                await listening.wait()
            assert [t.name for t in (await client.list_tools()).tools] == NAMES

            tools.tool("late.py", 'def run() -> str:\n    """Arrived late."""\n    return "late"\n')
            tools.configure([*[p for p in _visible(tools)], "late.py"])
            await await_until(lambda: changes)
            assert [t.name for t in (await client.list_tools()).tools] == [*NAMES, "late"]
            assert text(await client.call_tool("late", {})) == "late"

            changes.clear()
            tools.tool("greet.py", 'def run(name: str) -> str:\n    """Greet."""\n    return (\n')
            await await_until(lambda: "greet.py" in (tmp_path / "server.err").read_text())
            assert changes == []  # the broken edit keeps serving the old version: nothing changed for clients
            still = await client.call_tool("greet", {"name": "Ada"})
            problem = "tools/greet.py:1:1: syntax error: unexpected text near 'def run(name: str) -> str:'"  # no server path
            note = f"greet: the file no longer builds ({problem}); ran its last good version"
            assert (still.is_error, text(still)) == (False, f"hello Ada\n[toolexec note: {note}]")
            group.cancel_scope.cancel()

    anyio.run(scenario)
    errlog.close()
    logged = (tmp_path / "server.err").read_text()
    assert re.search(r"toolexec mcp: \S*greet\.py:\d+:\d+: ", logged), logged


def _visible(project: Project) -> list[str]:
    import yaml

    return list(yaml.safe_load(project.config.read_text())["visible_tools"])


def raw_server(project: Project) -> subprocess.Popen[bytes]:
    """The stdio server under raw JSON-RPC, to see its exit status."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolexec", "--config", str(project.config), "mcp", "--no-reload"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=project.root,
    )
    assert proc.stdin is not None
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    for message in messages:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    return proc


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
@pytest.mark.slow
@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_stdin_eof_or_sigterm_cancels_calls_in_flight_and_exits_0(tools: Project, how: str, tmp_path: Path) -> None:
    proc = raw_server(tools)
    assert proc.stdin is not None and proc.stdout is not None
    call = {"name": "sleeper", "arguments": {"pid_file": str(tmp_path / "pids")}}
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}).encode() + b"\n")
    proc.stdin.flush()
    tool, grandchild, server = read_pids(tmp_path / "pids")
    assert server == proc.pid
    if how == "eof":
        proc.stdin.close()
    else:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=WAIT) == 0
    assert not alive(tool) and not alive(grandchild)
    replies = [json.loads(line) for line in proc.stdout.read().splitlines()]
    # The initialize result; the call ended by the shutdown is never a success.
    assert [r.get("id") for r in replies][:1] == [1]
    assert not [r for r in replies if r.get("id") == 2 and r.get("result", {}).get("isError") is False]
    if how == "sigterm":
        proc.stdin.close()
    proc.stdout.close()


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
@pytest.mark.slow
def test_no_process_is_left_after_the_client_disconnects(tools: Project, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"

    async def scenario() -> list[int]:
        async with stdio(tools, "legacy") as client, anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("sleeper", {"pid_file": str(pid_file)}))
            pids = await anyio.to_thread.run_sync(read_pids, pid_file)
            group.cancel_scope.cancel()
        return pids

    tool, grandchild, server = anyio.run(scenario)
    wait_until(lambda: not alive(server) and not alive(tool) and not alive(grandchild))


@pytest.mark.slow
def test_summaries_catalog_and_describe_tool(tools: Project) -> None:
    async def scenario() -> None:
        async with stdio(tools, "legacy", "--catalog", "summaries") as client:
            listed, _ = await all_tools(client)
            assert [t.name for t in listed] == [*NAMES, "describe_tool"]
            greet = listed[0]
            assert (greet.description, greet.input_schema) == (
                "Greet someone. (call describe_tool for its parameters)",
                {"type": "object"},
            )
            spec = await client.call_tool("describe_tool", {"name": "shape"})
            assert spec.structured_content == {
                "name": "shape",
                "title": "Shape",
                "summary": "Return a count; n < 0 returns a string count, breaking the declared shape.",
                "description": "Return a count; n < 0 returns a string count, breaking the declared shape.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                },
                "outputSchema": SHAPE_SCHEMA,
                "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
                "tags": [],
                "examples": [],
                "errors": [],
            }
            missing = await client.call_tool("describe_tool", {"name": "gret"})
            assert (missing.is_error, text(missing)) == (
                True,
                "no tool named 'gret'; did you mean 'greet'?; pass a name from tools/list",
            )
            assert text(await client.call_tool("greet", {"name": "Ada"})) == "hello Ada"

    anyio.run(scenario)


def rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any]:
    """Send one JSON-RPC request to a raw server and return its reply (notifications on the way are skipped).

    Its stdout is read unbuffered: two lines that arrive together must not leave the second in a buffer that
    select cannot see."""
    import select

    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    pending = proc.__dict__.setdefault("unread", bytearray())  # read past the last line returned
    deadline = time.monotonic() + WAIT
    while True:
        while b"\n" not in pending:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no reply to {message['method']} within {WAIT}s"
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            assert chunk, "the server closed its stdout"
            pending += chunk
        line, _, rest = pending.partition(b"\n")
        pending[:] = rest
        reply = json.loads(line)
        if reply.get("id") == message["id"]:
            return reply


NAMED = """#!/usr/bin/env bash
# @describe A tool named {name}.
main() {{ :; }}
eval "$(argc --argc-eval "$0" "$@")"
"""
MODULE = """export const tool = {{
  name: "{name}",
  description: "A tool named {name}.",
  args: {{ type: "object", properties: {{ q: {{ type: "string" }} }} }},
  run: async (input) => input.q,
}};
"""


def test_tools_list_is_what_declarations_format_mcp_prints(project: Project) -> None:
    """One source of truth: the server lists exactly the objects ``toolexec declarations --format mcp`` prints,
    names made MCP-safe over the whole catalog (a disabled ``ns_tool`` still pushes ``ns:tool`` to ``ns_tool_2``)."""
    from tests.conftest import toolexec

    project.tool("shape.py", SHAPE)
    for file in ("ns:tool.sh", "ns_tool.sh"):
        project.tool(file, NAMED.format(name=file[:-3]))
    for file, name in (("web_search.js", "web.search"), ("abc.js", "a.b:c")):  # a file name stops at its first '.'
        project.tool(file, MODULE.format(name=name))
    visible = ["shape.py", "ns:tool.sh", "ns_tool.sh", "web_search.js", "abc.js"]
    project.configure(visible, enabled_tools=["shape", "ns:tool", "web.search", "a.b:c"])
    inject_metadata(
        project,
        "shape",
        {
            "title": "Shape",
            "output_schema": SHAPE_SCHEMA,
            "annotations": {"read_only": True, "destructive": False, "idempotent": True, "open_world": None},
        },
    )
    inject_metadata(
        project, "web.search", {"annotations": {"read_only": None, "destructive": None, "idempotent": None, "open_world": True}}
    )
    printed = toolexec("--config", str(project.config), "declarations", "--format", "mcp")
    assert printed.returncode == 0, printed.stderr
    declared = json.loads(printed.stdout)
    assert [d["name"] for d in declared] == ["shape", "ns_tool_2", "web.search", "a.b_c"]
    assert declared[0] == {
        "name": "shape",
        "title": "Shape",
        "description": "Return a count; n < 0 returns a string count, breaking the declared shape.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "outputSchema": SHAPE_SCHEMA,
        "annotations": {"title": "Shape", "readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
    }
    assert declared[2]["annotations"] == {"openWorldHint": True}

    proc = raw_server(project)
    try:
        listed = rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert listed["result"]["tools"] == declared
        called = rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ns_tool_2", "arguments": {}}})
        assert called["result"]["isError"] is False
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        assert proc.wait(timeout=WAIT) == 0
        proc.stdout.close()


INSPECTOR = REPO / ".venv" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


@pytest.mark.slow
@pytest.mark.skipif(not INSPECTOR.exists(), reason="the MCP Inspector is installed by `make .venv/.test`")
def test_the_mcp_inspector_lists_calls_and_sees_an_error(tools: Project) -> None:
    base = [str(INSPECTOR), "--cli", sys.executable, "-m", "toolexec", "mcp", "--no-reload"]  # config.yaml in the cwd

    def inspect(*args: str, status: int = 0) -> Any:
        done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=120, cwd=tools.root)
        assert done.returncode == status, done.stderr
        return json.loads(done.stdout)

    listed = inspect("--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == NAMES
    called = inspect("--method", "tools/call", "--tool-name", "greet", "--tool-arg", "name=Ada")
    assert called == {"content": [{"type": "text", "text": "hello Ada"}], "isError": False}
    failed = inspect("--method", "tools/call", "--tool-name", "fail", status=5)  # the Inspector's status for isError
    assert failed == {
        "content": [{"type": "text", "text": "Tool call 'fail' exited with code 3: the disk is on fire"}],
        "isError": True,
    }


def test_a_one_shot_run_imports_no_mcp_machinery(tools: Project) -> None:
    code = (
        "import sys\n"
        "from toolexec.cli import main\n"
        f"main(['--config', {str(tools.config)!r}, 'run', 'greet', '{{\"name\": \"x\"}}'])\n"
        "heavy = sorted(m for m in ('mcp', 'mcp_types', 'pydantic', 'watchfiles', 'anyio', 'starlette', 'uvicorn') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout == "hello x[]\n", done.stderr


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_with_hot_reload_on_the_server_exits_promptly(tools: Project, how: str) -> None:
    """The file watcher stops with the server: the SDK client's close (stdin EOF) or a SIGTERM ends it within 0.5 s,
    not after the watcher's own 5 s timeout (the one timing in this suite: it is the promise)."""
    server: list[int] = []

    async def session() -> float:
        async with stdio(tools, "legacy") as client:
            assert (await client.call_tool("greet", {"name": "x"})).is_error is False
            server.append(_server_pid(tools))
            if how == "sigterm":
                os.kill(server[0], signal.SIGTERM)
                await await_until(lambda: not alive(server[0]))
            started = time.monotonic()
        return time.monotonic() - started

    # The best of three sessions: a loaded machine can stall any one close, while a server that waits for its
    # watcher (or for the interpreter's slow teardown) takes 1-5 s on every attempt.
    closings = []
    for _ in range(3):
        server.clear()
        closings.append(anyio.run(session))
        assert not alive(server[0])
        if closings[-1] <= 0.5:
            break
    assert min(closings) <= 0.5, f"closing the session took {', '.join(f'{c:.2f}' for c in closings)} s"


def _server_pid(project: Project) -> int:
    """The pid of the one `toolexec mcp` serving ``project`` (a child of this process)."""
    import psutil

    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            argv = child.cmdline()
        except psutil.Error:  # ended (a zombie: an earlier test's process not yet reaped) or gone meanwhile
            continue
        if "mcp" in argv and str(project.config) in argv:
            found.append(child.pid)
    assert len(found) == 1, found
    return found[0]
