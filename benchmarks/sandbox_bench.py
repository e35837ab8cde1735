"""A confined no-op call against the same call unconfined, side by side, per language (in-process ``Executor.call``).

    python benchmarks/sandbox_bench.py [RUNS]

Each language's no-op tool is called alternately under ``sandbox: off`` and under a policy that confines it
(``sandbox_policies``: no network, writes to its cache, a memory and CPU limit, so ``prlimit`` runs too);
the medians of each and the median of the adjacent differences are printed. Target: ≤ +3 ms added.
The rows "(fallback)" confine the same call where bwrap cannot start (``TOOLEXEC_BWRAP`` naming nothing):
Landlock, seccomp and rlimits applied by a launcher (one more Python start per call).
"""

from __future__ import annotations

import os
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


def _executor(root: Path, file: str, confined: bool) -> Executor:
    config = root / ("confined.yaml" if confined else "plain.yaml")
    settings = {"sandbox_policies": {Path(file).stem: POLICY}} if confined else {"sandbox": "off"}
    config.write_text(yaml.safe_dump({"visible_tools": [file], **settings}))
    return Executor(config)


def measure(language: str, runs: int, fallback: bool = False) -> tuple[float, float, float]:
    """Medians (ms) of the unconfined call, the confined call (by the fallback: Landlock), and of the adjacent
    differences."""
    if fallback:
        os.environ["TOOLEXEC_BWRAP"] = "/nonexistent/bwrap"
    try:
        return _measure(language, runs)
    finally:
        os.environ.pop("TOOLEXEC_BWRAP", None)


def _measure(language: str, runs: int) -> tuple[float, float, float]:
    file, source = TOOLS[language]
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "functions" / "tools").mkdir(parents=True)
        (root / "functions" / "tools" / file).write_text(source)
        plain, confined = _executor(root, file, False), _executor(root, file, True)
        name = Path(file).stem
        for executor in (plain, confined):  # warm: build, transpile, first spawn
            result = executor.call(name, {})
            assert result.ok, result
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(runs):
            for flag, executor in ((False, plain), (True, confined)):
                start = time.perf_counter()
                executor.call(name, {})
                times[flag].append((time.perf_counter() - start) * 1000)
        plain.close()
        confined.close()
    differences = [b - a for a, b in zip(times[False], times[True], strict=True)]
    return statistics.median(times[False]), statistics.median(times[True]), statistics.median(differences)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    print("| language | unconfined | confined | added (median of pairs) | target ≤ +3 ms |")
    print("| --- | --- | --- | --- | --- |")
    for language in TOOLS:
        if language in ("javascript", "typescript") and which("node") is None:
            continue
        for fallback in (False, True):
            plain, confined, added = measure(language, runs, fallback)
            row = f"{language} (fallback)" if fallback else language
            print(f"| {row} | {plain:.1f} ms | {confined:.1f} ms | +{added:.1f} ms | {'met' if added <= 3 else '**not met**'} |")


if __name__ == "__main__":
    main()
