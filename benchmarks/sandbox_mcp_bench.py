"""A confined no-op call against the same call unconfined, over MCP: ``tools/call`` through ``toolexec mcp`` (stdio,
the SDK's client): one server under ``sandbox: off``, one serving the same tool with no policy (the baseline) and
under a policy, called alternately.

    python benchmarks/sandbox_mcp_bench.py [RUNS]

Per language; medians of each and the median of the adjacent differences. Target: ≤ +3 ms added.

``toolexec mcp`` is long-lived: from a tool's second call on, each baseline and confined call starts in a sandbox set
up ahead (runtimes/sandbox_spare.py), made once the call before it is over, in the think time (:data:`THINK`) that
follows every call of every mode, as a model's would.
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


MODES = ("off", "baseline", "confined")
THINK = 0.03  # a model's think time after every call of every mode: a spare is made in it, off every call's path


def measure(root: Path, runs: int) -> dict[str, dict[str, tuple[float, float]]]:
    """Per language, per mode: the median ``tools/call`` (ms) and the median of its differences from the adjacent
    ``off`` call. Two servers: one under ``sandbox: off``, one under ``declared`` serving the tool undeclared (the
    baseline) and under a policy (confined); their calls alternate."""
    languages = [name for name in TOOLS if name in ("python", "bash") or which("node") is not None]
    visible, policies = [], {}
    for language in languages:
        suffix, source = TOOLS[language]
        for kind in ("plain", "confined"):
            file = f"{kind}_{language}.{suffix}"
            (root / "functions" / "tools" / file).write_text(source)
            visible.append(file)
        policies[f"confined_{language}"] = POLICY
    (root / "off.yaml").write_text(yaml.safe_dump({"visible_tools": visible, "sandbox": "off"}))
    (root / "declared.yaml").write_text(yaml.safe_dump({"visible_tools": visible, "sandbox_policies": policies}))

    def server(config: str) -> StdioServerParameters:
        argv = ["-m", "toolexec", "--config", str(root / config), "mcp", "--no-reload"]
        return StdioServerParameters(command=sys.executable, args=argv, env=dict(os.environ), cwd=str(root))

    async def served() -> dict[str, dict[str, tuple[float, float]]]:
        found = {}
        async with Client(server("off.yaml"), mode="legacy") as off, Client(server("declared.yaml"), mode="legacy") as on:
            calls = {"off": (off, "plain"), "baseline": (on, "plain"), "confined": (on, "confined")}
            for language in languages:
                times: dict[str, list[float]] = {mode: [] for mode in MODES}
                for client, kind in calls.values():  # warm: build, transpile, first spawn
                    assert not (await client.call_tool(f"{kind}_{language}", {})).is_error
                for _ in range(runs):
                    for mode, (client, kind) in calls.items():
                        started = time.perf_counter()
                        result = await client.call_tool(f"{kind}_{language}", {})
                        times[mode].append((time.perf_counter() - started) * 1000)
                        assert not result.is_error, result
                        await anyio.sleep(THINK)
                found[language] = {
                    mode: (
                        statistics.median(times[mode]),
                        statistics.median(b - a for a, b in zip(times["off"], times[mode], strict=True)),
                    )
                    for mode in MODES
                }
        return found

    return anyio.run(served)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 31
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "functions" / "tools").mkdir(parents=True)
        found = measure(root, runs)
    print("| language (MCP stdio) | off | baseline (added) | confined (added) | target ≤ +3 ms |")
    print("| --- | --- | --- | --- | --- |")
    for language, modes in found.items():
        (off, _), (base, base_added), (conf, conf_added) = (modes[mode] for mode in MODES)
        met = "met" if max(base_added, conf_added) <= 3 else "**not met**"
        print(f"| {language} | {off:.1f} ms | {base:.1f} ms ({base_added:+.1f}) | {conf:.1f} ms ({conf_added:+.1f}) | {met} |")


if __name__ == "__main__":
    main()
