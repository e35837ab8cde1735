"""``toolexec mcp`` under load, in counts: a burst of calls far past ``max_parallel`` takes no more threads than the calls
running, runs at most ``max_parallel`` tools at once, answers every call with its own result, and leaves nothing.

A call waiting for its slot waits on the event loop (:meth:`toolexec.calls.Calls.reserve`), not in a worker thread;
every thread costs each call's escapee search one more ``/proc`` read and adds to the interpreter lock's traffic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import Project
from tests.executor.test_hostile_mcp import RawStdio
from tests.helpers import wait_until

pytest.importorskip("mcp")

WAIT = 60.0
# Marks its start, then waits (bounded by the call's timeout) until the test lets every call go.
HOLD = (
    "#!/usr/bin/env bash\n# @describe Hold until released.\n# @option --n! Which call.\n"
    'main() {\n    touch "$LLM_TOOL_CACHE_DIR/started-$argc_n"\n'
    '    while [ ! -e "$LLM_TOOL_CACHE_DIR/release" ]; do sleep 0.01; done\n'
    '    printf "%s" "$argc_n" >>"$LLM_OUTPUT"\n}\n'
)


class RawServer(RawStdio):
    """The stdio server under raw JSON-RPC (initialized), with requests sent ahead of their replies."""

    def submit(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> None:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})}
        self.send(json.dumps(message).encode())

    def replies(self, ids: set[int]) -> dict[int, dict[str, Any]]:
        """The replies to ``ids``, in whatever order they come (notifications skipped)."""
        found: dict[int, dict[str, Any]] = {}
        while ids - found.keys():
            reply = self.reply()
            if reply.get("id") in ids:
                found[reply["id"]] = reply
        return found

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))


@pytest.mark.parametrize("max_parallel", [2, 4])
def test_a_burst_of_calls_takes_a_thread_only_for_each_call_running(project: Project, max_parallel: int) -> None:
    project.tool("hold.sh", HOLD)
    project.configure(["hold.sh"], max_parallel=max_parallel, timeout=120)
    cache = project.root / "functions" / "cache" / "hold"
    cache.mkdir(parents=True)
    server = RawServer(project)
    try:
        idle = server.threads()
        calls = 12 * max_parallel
        for n in range(1, calls + 1):
            call = {"name": "hold", "arguments": {"n": str(n)}}
            server.submit(n, "tools/call", call)
        wait_until(lambda: len(list(cache.glob("started-*"))) >= max_parallel, f"{max_parallel} calls to start")
        busy = server.threads()
        started = len(list(cache.glob("started-*")))
        (cache / "release").touch()
        replies = server.replies(set(range(1, calls + 1)))
    finally:
        (cache / "release").touch()
        status = server.close()
    assert started == max_parallel  # the others wait for a slot
    assert busy - idle <= max_parallel, f"{busy - idle} threads more while {max_parallel} calls run and the rest wait"
    texts = {n: (reply["result"].get("isError", False), reply["result"]["content"][0]["text"]) for n, reply in replies.items()}
    assert texts == {n: (False, str(n)) for n in range(1, calls + 1)}
    assert status == 0
    assert len(list(cache.glob("started-*"))) == calls


def test_a_call_cancelled_while_it_waits_for_its_slot_never_runs_and_frees_its_place(project: Project) -> None:
    project.tool("hold.sh", HOLD)
    project.configure(["hold.sh"], max_parallel=1, timeout=120)
    cache = project.root / "functions" / "cache" / "hold"
    cache.mkdir(parents=True)
    server = RawServer(project)
    try:
        for n in (1, 2, 3):
            server.submit(n, "tools/call", {"name": "hold", "arguments": {"n": str(n)}})
        wait_until(lambda: (cache / "started-1").exists(), "the first call to start")
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}).encode())
        server.submit(4, "ping")
        assert server.replies({4})[4]["result"] == {}  # the cancellation has been read
        (cache / "release").touch()
        replies = server.replies({1, 3})
    finally:
        (cache / "release").touch()
        status = server.close()
    assert [replies[n]["result"]["content"][0]["text"] for n in (1, 3)] == ["1", "3"]
    assert sorted(path.name for path in cache.glob("started-*")) == ["started-1", "started-3"]
    assert status == 0


def test_the_stdio_wire_is_read_and_written_by_the_event_loop_when_it_is_a_pipe(project: Project) -> None:
    """A pipe needs no thread per message: serving requests (no call made, no reload) runs on the main thread alone."""
    project.tool("hold.sh", HOLD)
    project.configure(["hold.sh"])
    server = RawServer(project)
    try:
        for n in range(1, 51):
            server.submit(n, "tools/list")
        replies = server.replies(set(range(1, 51)))
        threads = server.threads()
    finally:
        status = server.close()
    assert {len(reply["result"]["tools"]) for reply in replies.values()} == {1}
    assert (threads, status) == (1, 0)


def test_requests_from_a_regular_file_are_read_by_a_thread_and_all_answered(project: Project) -> None:
    """A file (or a terminal) cannot be waited on by the event loop: it is read by a thread of its own, to its end."""
    project.tool("hold.sh", HOLD)
    project.configure(["hold.sh"])
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}]
    lines += [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": n, "method": "tools/list"} for n in range(1, 6)]
    requests = project.root / "requests.jsonl"
    requests.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "toolexec", "--config", str(project.config), "mcp", "--no-reload"],
            stdin=stdin,
            capture_output=True,
            timeout=WAIT,
            cwd=project.root,
        )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(reply["id"] for reply in replies) == [0, 1, 2, 3, 4, 5]
    assert {len(reply["result"]["tools"]) for reply in replies if reply["id"]} == {1}
    assert done.returncode == 0


@pytest.mark.parametrize("summaries", [False, True])
def test_both_protocol_eras_share_a_tools_entry_unless_its_output_is_not_an_object(project: Project, summaries: bool) -> None:
    """Memory at 1,000 tools: the listing holds one ``Tool`` per tool, a second only where a 2026-07-28 client is
    offered more (an output schema that is not an object's)."""
    from tests.executor.test_mcp import inject_metadata
    from toolexec.build import build
    from toolexec.config import load_config
    from toolexec.mcp import Listing

    for name in ("plain", "record", "counts"):
        project.tool(f"{name}.py", f'def run() -> str:\n    """Tool {name}."""\n    return "{name}"\n')
    project.configure(["plain.py", "record.py", "counts.py"])
    record = {"type": "object", "properties": {"n": {"type": "integer"}}}
    counts = {"type": "array", "items": {"type": "integer"}}
    inject_metadata(project, "record", {"output_schema": record})
    inject_metadata(project, "counts", {"output_schema": counts})
    config = load_config(project.config)
    listing = Listing(config, build(config).catalog, summaries=summaries)
    shared = [modern is legacy for modern, legacy in zip(listing.modern_entries, listing.entries, strict=True)]
    if summaries:  # no output schema in either
        assert shared == [True, True, True, True]  # describe_tool's entry too
        return
    assert shared == [True, True, False]
    assert [(e.name, e.output_schema) for e in listing.entries] == [("plain", None), ("record", record), ("counts", None)]
    assert [(e.name, e.output_schema) for e in listing.modern_entries] == [
        ("plain", None),
        ("record", record),
        ("counts", counts),
    ]
