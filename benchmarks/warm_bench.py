"""Warm tools (docs/performance.md) against what they replace, side by side in one run (in-process ``Executor.call``).

    python benchmarks/warm_bench.py [RUNS]

* a warm Python no-op call against starting Python at all (``python -c pass``): target ≤ 0.2×;
* a tool that imports a heavy set (numpy and pandas where the tool's Python has them, else a heavy set of the
  standard library) called warm against the same tool called cold: target ≥ 20× faster.

Each pair runs alternately; the medians and the median ratio of adjacent pairs are printed.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from toolexec import Executor
from toolexec.runtimes.interpreter import which

NOOP = 'def run() -> str:\n    """Do nothing."""\n    return "ok"\n'
STDLIB_HEAVY = (
    "asyncio",
    "email.mime.multipart",
    "http.client",
    "http.server",
    "decimal",
    "xml.etree.ElementTree",
    "xml.dom.minidom",
    "json",
    "sqlite3",
    "ssl",
    "urllib.request",
    "logging.handlers",
    "argparse",
    "dataclasses",
    "typing",
    "unittest.mock",
    "concurrent.futures",
    "multiprocessing.pool",
    "csv",
    "zipfile",
    "tarfile",
    "statistics",
    "fractions",
    "difflib",
    "inspect",
    "pydoc",
    "smtplib",
    "imaplib",
    "wsgiref.simple_server",
    "xmlrpc.client",
)


def heavy_modules(python: str) -> tuple[tuple[str, ...], str]:
    """numpy and pandas when ``python`` has them, else the standard library set; and a label saying which."""
    found = subprocess.run([python, "-c", "import numpy, pandas"], capture_output=True, check=False).returncode == 0
    return (("numpy", "pandas"), "numpy+pandas") if found else (STDLIB_HEAVY, f"{len(STDLIB_HEAVY)} stdlib modules")


def heavy_tool(modules: tuple[str, ...]) -> str:
    imports = "".join(f"import {module}\n" for module in modules)
    return f'{imports}\n\ndef run() -> str:\n    """Import a lot, then do nothing."""\n    return "ok"\n'


def paired(ours: Callable[[], object], bare: Callable[[], object], runs: int) -> tuple[float, float, float]:
    """Medians (ms) of ``ours`` and ``bare`` run alternately, and the median ratio ours/bare of adjacent pairs."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for index, action in enumerate((ours, bare)):
            start = time.perf_counter()
            action()
            times[index].append((time.perf_counter() - start) * 1000)
    ratios = [a / b for a, b in zip(*times, strict=True)]
    return statistics.median(times[0]), statistics.median(times[1]), statistics.median(ratios)


def _project(root: Path, tools: dict[str, str]) -> Path:
    (root / "functions" / "tools").mkdir(parents=True)
    for file, source in tools.items():
        (root / "functions" / "tools" / file).write_text(source)
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump({"visible_tools": sorted(tools), "sandbox": "off"}))
    return config


def _call(executor: Executor, name: str) -> Callable[[], object]:
    def action() -> None:
        result = executor.call(name, {})
        assert result.ok, result

    return action


def measure(runs: int) -> dict[str, tuple[float, float, float, str]]:
    """The figures: name → (ours ms, reference ms, ratio, label)."""
    python = which("python3") or sys.executable
    modules, label = heavy_modules(python)
    figures: dict[str, tuple[float, float, float, str]] = {}
    with tempfile.TemporaryDirectory() as directory:
        config = _project(Path(directory), {"noop.py": NOOP, "heavy.py": heavy_tool(modules)})
        with Executor(config, warm=True) as warm, Executor(config, warm=False) as cold:
            for executor in (warm, cold):  # the build, the first start of each server
                for name in ("noop", "heavy"):
                    _call(executor, name)()
            bare = [python, "-c", "pass"]
            figures["noop"] = (*paired(_call(warm, "noop"), lambda: subprocess.run(bare, check=True), runs), "")
            figures["heavy"] = (*paired(_call(warm, "heavy"), _call(cold, "heavy"), runs), label)
    return figures


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    figures = measure(runs)
    ours, bare, ratio, _ = figures["noop"]
    print("| measure | ours | reference | ratio | target |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| warm Python no-op call | {ours:.2f} ms | `python -c pass`: {bare:.1f} ms | {ratio:.3f}x | ≤ 0.2x |")
    ours, cold, ratio, label = figures["heavy"]
    print(
        f"| heavy-import tool ({label}), warm vs cold | {ours:.2f} ms | cold: {cold:.1f} ms | {1 / ratio:.1f}x faster | ≥ 20x |"
    )


if __name__ == "__main__":
    main()
