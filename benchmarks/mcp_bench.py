"""MCP figures: ``tools/call`` through ``toolexec mcp`` (stdio), its memory with 1,000 tools, calls/s.

A bare JSON-RPC client over the server's stdin and stdout (newline-delimited, as the MCP
stdio transport is), so the figures include no client SDK of ours.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from harness import RUNS, median_ms, paired_ms, spawn


class StdioServer:
    """``toolexec mcp`` as a child process, spoken to in JSON-RPC."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.next_id = 0
        self.request(
            "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
        )
        self.notify("notifications/initialized")

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def notify(self, method: str) -> None:
        self.send({"jsonrpc": "2.0", "method": method})

    def submit(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def receive(self, wanted: set[int]) -> dict[int, dict[str, Any]]:
        """Read until every id in ``wanted`` has its response (notifications are skipped)."""
        assert self.process.stdout is not None
        found: dict[int, dict[str, Any]] = {}
        while wanted - found.keys():
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the MCP server closed its output")
            message = json.loads(line)
            if message.get("id") in wanted:
                if "error" in message:
                    raise RuntimeError(f"MCP error: {message['error']}")
                found[message["id"]] = message["result"]
        return found

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        key = self.submit(method, params)
        return self.receive({key})[key]

    def peak_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def measure(b: Any) -> list[Any]:
    """The three MCP rows (see run.py's mcp_rows)."""
    from run import Row, added_row, ms

    rows = []
    server = StdioServer(b.cli(b.small, "mcp"), b.env)
    try:
        call = {"name": "noop_sh", "arguments": {"text": "x"}}
        paired = paired_ms(lambda: server.request("tools/call", call), spawn(["bash", "-c", 'printf "%s" x'], env=b.env))
        rows.append(added_row("`tools/call` through `toolexec mcp` (stdio), no-op Bash tool", paired, "`bash -c`", 10))
        calls = 100
        for _ in range(2):  # the second round is measured
            start = time.perf_counter()
            server.receive({server.submit("tools/call", call) for _ in range(calls)})
            elapsed = time.perf_counter() - start
        rows.append(
            Row(
                "calls/s through the MCP server (stdio)",
                f"{calls / elapsed:.0f} calls/s",
                note=f"{calls} tools/call requests in flight at once",
            )
        )
    finally:
        server.close()
    server = StdioServer(b.cli(b.big, "mcp"), b.env)
    try:
        listed, cursor = 0, None
        while True:
            page = server.request("tools/list", {"cursor": cursor} if cursor else {})
            listed += len(page["tools"])
            cursor = page.get("nextCursor")
            if not cursor:
                break
        server.request("tools/call", {"name": "noop_sh", "arguments": {"text": "x"}})
        first = median_ms(lambda: server.request("tools/list", {}), runs=RUNS)
        rows.append(
            Row(
                "peak memory, MCP server with 1,000 tools (list all, call one)",
                f"{server.peak_kib() / 1024:.1f} MiB",
                note=f"{listed} tools listed; a tools/list page takes {ms(first)}",
            )
        )
    finally:
        server.close()
    return rows
