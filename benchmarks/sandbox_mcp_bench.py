"""A confined no-op call against the same call unconfined, over MCP: ``tools/call`` through one ``toolexec mcp``
(stdio, the SDK's client) serving the same tool twice, once under a policy and once not, alternately.

    python benchmarks/sandbox_mcp_bench.py [RUNS]

Per language; medians of each and the median of the adjacent differences. Target: ≤ +3 ms added.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import yaml
from mcp import Client, StdioServerParameters

from toolexec.runtimes.interpreter import which

TOOLS = {
    "python": ("py", 'def run() -> str:\n    """Do nothing."""\n    return "ok"\n'),
    "bash": ("sh", '#!/usr/bin/env bash\n# @describe Do nothing.\nmain() { echo ok; }\neval "$(argc --argc-eval "$0" "$@")"\n'),
    "javascript": ("js", '/**\n * Do nothing.\n */\nexport function run() {\n  return "ok";\n}\n'),
    "typescript": ("ts", '/**\n * Do nothing.\n */\nexport function run(): string {\n  return "ok";\n}\n'),
}
POLICY = {"network": "none", "writes": ["cache"], "memory": "4GiB", "cpu": 60}


def measure(root: Path, runs: int) -> dict[str, tuple[float, float, float]]:
    languages = [name for name in TOOLS if name in ("python", "bash") or which("node") is not None]
    visible, policies = [], {}
    for language in languages:
        suffix, source = TOOLS[language]
        for kind in ("plain", "confined"):
            file = f"{kind}_{language}.{suffix}"
            (root / "functions" / "tools" / file).write_text(source)
            visible.append(file)
        policies[f"confined_{language}"] = POLICY
    (root / "config.yaml").write_text(yaml.safe_dump({"visible_tools": visible, "sandbox_policies": policies}))

    async def served() -> dict[str, tuple[float, float, float]]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "toolexec", "mcp", "--no-reload"], env=dict(os.environ), cwd=str(root)
        )
        found = {}
        async with Client(params, mode="legacy") as client:
            for language in languages:
                times: dict[str, list[float]] = {"plain": [], "confined": []}
                for kind in ("plain", "confined"):  # warm: build, transpile, first spawn
                    assert not (await client.call_tool(f"{kind}_{language}", {})).is_error
                for _ in range(runs):
                    for kind in ("plain", "confined"):
                        started = time.perf_counter()
                        result = await client.call_tool(f"{kind}_{language}", {})
                        times[kind].append((time.perf_counter() - started) * 1000)
                        assert not result.is_error, result
                added = statistics.median(c - p for p, c in zip(times["plain"], times["confined"], strict=True))
                found[language] = (statistics.median(times["plain"]), statistics.median(times["confined"]), added)
        return found

    return anyio.run(served)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 31
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "functions" / "tools").mkdir(parents=True)
        found = measure(root, runs)
    print("| language (MCP stdio) | unconfined | confined | added (median of pairs) | target ≤ +3 ms |")
    print("| --- | --- | --- | --- | --- |")
    for language, (plain, confined, added) in found.items():
        print(f"| {language} | {plain:.1f} ms | {confined:.1f} ms | +{added:.1f} ms | {'met' if added <= 3 else '**not met**'} |")


if __name__ == "__main__":
    main()
