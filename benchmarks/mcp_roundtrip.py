"""A ``tools/call`` round trip of a no-op Bash tool through ``toolexec mcp`` (stdio, SDK client) against bare
``bash`` running the same function, side by side; medians. Target: at most 10 ms added."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

NOOP = """#!/usr/bin/env bash
# @describe Do nothing.
main() { :; }
eval "$(argc --argc-eval "$0" "$@")"
"""
RUNS = 60


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="toolexec-bench-mcp-"))
    (root / "functions" / "tools").mkdir(parents=True)
    (root / "functions" / "tools" / "noop.sh").write_text(NOOP)
    (root / "config.yaml").write_text("visible_tools: [noop.sh]\n")
    bare = []
    script = "main() { :; }; main"
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(["bash", "-c", script], check=True)
        bare.append((time.perf_counter() - started) * 1000)

    async def served() -> list[float]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "toolexec", "mcp", "--no-reload"], env=dict(os.environ), cwd=str(root)
        )
        times = []
        async with Client(params, mode="legacy") as client:
            await client.call_tool("noop", {})  # warm: the catalog is built, caches filled
            for _ in range(RUNS):
                started = time.perf_counter()
                result = await client.call_tool("noop", {})
                times.append((time.perf_counter() - started) * 1000)
                assert not result.is_error
        return times

    mcp = anyio.run(served)
    b, m = statistics.median(bare), statistics.median(mcp)
    print(f"bare bash, same function      median {b:6.1f} ms")
    print(f"tools/call via toolexec mcp   median {m:6.1f} ms")
    print(f"added by the MCP path         median {m - b:6.1f} ms  (target <= 10 ms)")


if __name__ == "__main__":
    main()
