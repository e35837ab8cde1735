"""A confined no-op call against the same call unconfined, side by side, per language (in-process ``Executor.call``).

    python benchmarks/sandbox_bench.py [RUNS]

Each language's no-op tool is called in turn under ``sandbox: off``, under the baseline alone (``sandbox:
declared``, no policy: its own PID namespace and the default limits) and under a policy that confines it
(``sandbox_policies``: no network, writes to its cache, a memory and CPU limit); the medians of each and the
medians of the adjacent differences from ``off`` are printed. Target: ≤ +3 ms added.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from toolexec import Executor
from toolexec.runtimes.interpreter import which

TOOLS = {
    "python": ("noop.py", 'def run() -> str:\n    """Do nothing."""\n    return "ok"\n'),
    "bash": (
        "noop.sh",
        '#!/usr/bin/env bash\n# @describe Do nothing.\nmain() { echo ok; }\neval "$(argc --argc-eval "$0" "$@")"\n',
    ),
    "javascript": ("noop.js", '/**\n * Do nothing.\n */\nexport function run() {\n  return "ok";\n}\n'),
    "typescript": ("noop.ts", '/**\n * Do nothing.\n */\nexport function run(): string {\n  return "ok";\n}\n'),
}
POLICY = {"network": "none", "writes": ["cache"], "memory": "4GiB", "cpu": 60}
MODES = {
    "unconfined": {"sandbox": "off"},
    "confined": {"sandbox_policies": POLICY},
    "allow-listed": {"sandbox_policies": {**POLICY, "network": ["localhost:9"]}},
}


def _executor(root: Path, file: str, mode: str) -> Executor:
    config = root / f"{mode}.yaml"
    settings: dict[str, object] = {
        "off": {"sandbox": "off"},
        "baseline": {"sandbox": "declared"},
        "confined": {"sandbox_policies": {Path(file).stem: POLICY}},
    }[mode]
    config.write_text(yaml.safe_dump({"visible_tools": [file], **settings}))
    return Executor(config)


MODES = ("off", "baseline", "confined")


def measure(language: str, runs: int) -> dict[str, tuple[float, float]]:
    """Per mode: the median call (ms), and the median of its differences from the adjacent ``off`` call."""
    file, source = TOOLS[language]
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "functions" / "tools").mkdir(parents=True)
        (root / "functions" / "tools" / file).write_text(source)
        executors = {mode: _executor(root, file, mode) for mode in MODES}
        name = Path(file).stem
        for executor in executors.values():  # warm: build, transpile, first spawn, the namespace probe
            result = executor.call(name, {})
            assert result.ok, result
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        for _ in range(runs):
            for mode, executor in executors.items():
                start = time.perf_counter()
                executor.call(name, {})
                times[mode].append((time.perf_counter() - start) * 1000)
        for executor in executors.values():
            executor.close()
    return {
        mode: (statistics.median(times[mode]), statistics.median(b - a for a, b in zip(times["off"], times[mode], strict=True)))
        for mode in MODES
    }


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    print("| language | off | baseline (added) | confined (added) | target ≤ +3 ms |")
    print("| --- | --- | --- | --- | --- |")
    for language in TOOLS:
        if language in ("javascript", "typescript") and which("node") is None:
            continue
        found = measure(language, runs)
        (off, _), (base, base_added), (conf, conf_added) = (found[mode] for mode in MODES)
        met = "met" if max(base_added, conf_added) <= 3 else "**not met**"
        print(f"| {language} | {off:.1f} ms | {base:.1f} ms (+{base_added:.1f}) | {conf:.1f} ms (+{conf_added:.1f}) | {met} |")


if __name__ == "__main__":
    main()
