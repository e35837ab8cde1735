"""A confined no-op call against the same call unconfined, side by side, per language (in-process ``Executor.call``).

    python benchmarks/sandbox_bench.py [RUNS]

Each language's no-op tool is called in turn under ``sandbox: off``, under a policy that confines it
(``sandbox_policies``: no network, writes to its cache, a memory and CPU limit, so ``prlimit`` runs too) and
under the same policy with a network allow-list (the call's proxy and the forwarder that starts the tool);
the medians of each and the medians of the adjacent differences are printed. Target: ≤ +3 ms added (the
allow-list adds a Python start inside the sandbox on top: see ``runtimes/netproxy.py``).
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
    settings = dict(MODES[mode])
    if "sandbox_policies" in settings:
        settings["sandbox_policies"] = {Path(file).stem: settings["sandbox_policies"]}
    config.write_text(yaml.safe_dump({"visible_tools": [file], **settings}))
    return Executor(config)


def measure(language: str, runs: int) -> dict[str, tuple[float, float]]:
    """Per mode, the median (ms) of its calls and the median of its differences with the adjacent unconfined call."""
    file, source = TOOLS[language]
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "functions" / "tools").mkdir(parents=True)
        (root / "functions" / "tools" / file).write_text(source)
        executors = {mode: _executor(root, file, mode) for mode in MODES}
        name = Path(file).stem
        for executor in executors.values():  # warm: build, transpile, first spawn
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
    plain = times["unconfined"]
    return {
        mode: (statistics.median(found), statistics.median([b - a for a, b in zip(plain, found, strict=True)]))
        for mode, found in times.items()
    }


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    print("| language | unconfined | confined | added (median of pairs) | allow-listed | added (median of pairs) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for language in TOOLS:
        if language in ("javascript", "typescript") and which("node") is None:
            continue
        found = measure(language, runs)
        cells = [f"{found['unconfined'][0]:.1f} ms"]
        for mode in ("confined", "allow-listed"):
            median, added = found[mode]
            cells += [f"{median:.1f} ms", f"+{added:.1f} ms"]
        print(f"| {language} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
