"""What every benchmark shares: an installed toolexec, paired timings, generated tool sets.

Figures are taken against toolexec installed the way users get it (its wheel in a venv of
its own, bytecode compiled at install time), never the editable development install, whose
import hook adds ~10 ms to every Python start.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
WHEELHOUSE = Path(os.environ.get("TOOLEXEC_WHEELHOUSE", REPO / ".venv" / "wheelhouse"))
BENCH_VENV = REPO / ".venv" / "bench"
RUNS = int(os.environ.get("BENCH_RUNS", "41"))  # a shared 2-core machine jitters by a few ms

NOOP_PY = 'def run(text: str = "") -> str:\n    """Return the text."""\n    return text\n'
NOOP_SH = (
    "#!/usr/bin/env bash\n# @describe Return the text.\n# @option --text The text.\n"
    'main() {\n    printf "%s" "${argc_text:-}" >>"$LLM_OUTPUT"\n}\n'
)
NOOP_TS = '/** Return the text. */\nexport function run(text: string = ""): string {\n  return text;\n}\n'
NOOP_JS = (
    '/** Return the text.\n * @param {string} [text] - The text.\n */\nexport function run(text = "") {\n  return text;\n}\n'
)
# What a bare interpreter does for the same no-op: read the input, write the output file.
BARE_MJS = 'import { appendFileSync } from "node:fs";\nappendFileSync(process.env.LLM_OUTPUT ?? "/dev/null", "x");\n'
SLEEPER = '#!/usr/bin/env bash\n# @describe Sleep a second.\nmain() {\n    sleep 1\n    echo done >>"$LLM_OUTPUT"\n}\n'


def installed_python() -> Path:
    """The Python of a venv holding toolexec's current wheel (with the Node extra), installed offline."""
    python = BENCH_VENV / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "--python", str(python)]
    fresh = not python.exists()
    if fresh:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(BENCH_VENV)], check=True)
    wheel_dir = BENCH_VENV / "wheels"
    wheel_dir.mkdir(exist_ok=True)
    for old in wheel_dir.glob("*.whl"):
        old.unlink()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir), str(REPO)],
        check=True,
        capture_output=True,
    )
    wheel = next(wheel_dir.glob("toolexec-*.whl"))
    # Dependencies first (a no-op when they are there), then this very wheel over the last one.
    subprocess.run([*pip, "install", "--no-index", "--find-links", str(WHEELHOUSE), f"{wheel}[node]"], check=True)
    if not fresh:
        subprocess.run([*pip, "install", "--no-index", "--no-deps", "--force-reinstall", str(wheel)], check=True)
    return python


def real_python(python: Path) -> str:
    """The interpreter binary behind a venv's python (what a bare start is measured with)."""
    return subprocess.run(
        [str(python), "-c", "import sys, os; print(os.path.realpath(sys.executable))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for measured processes: bytecode caches allowed (as for an installed package)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


class Paired(NamedTuple):
    """Ours against a bare figure, sampled in adjacent pairs."""

    ours: float  # median wall time, ms
    bare: float  # median wall time, ms
    ratio: float  # median of the pairs' ours / bare
    added: float  # median of the pairs' ours - bare, ms


def paired_ms(ours: Callable[[], object], bare: Callable[[], object], runs: int = RUNS) -> Paired:
    """Median wall times of ``ours`` and ``bare``, run alternately, and the medians of each adjacent pair's ratio
    and difference: a shared machine drifts by milliseconds over a row, and a pair sees the same drift."""
    ours(), bare()  # warm caches (catalog, transpile, page cache) first
    ours(), bare()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for action, into in ((ours, samples[0]), (bare, samples[1])):
            start = time.perf_counter()
            action()
            into.append((time.perf_counter() - start) * 1000)
    pairs = list(zip(*samples, strict=True))
    return Paired(
        statistics.median(samples[0]),
        statistics.median(samples[1]),
        statistics.median(o / b for o, b in pairs),
        statistics.median(o - b for o, b in pairs),
    )


def median_ms(action: Callable[[], object], runs: int = RUNS, prepare: Callable[[], object] | None = None) -> float:
    """Median wall time of ``action``; ``prepare`` runs untimed before each sample."""
    samples = []
    for _ in range(runs):
        if prepare is not None:
            prepare()
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def spawn(argv: list[str], **kwargs: object) -> Callable[[], object]:
    """A callable that runs ``argv`` to completion (failing loudly)."""
    return lambda: subprocess.run(argv, check=True, capture_output=True, **kwargs)  # type: ignore[call-overload]


def write_project(root: Path, tools: dict[str, str], **settings: object) -> Path:
    """A functions directory holding ``tools`` and a config listing them; returns the config path."""
    tools_dir = root / "functions" / "tools"
    tools_dir.mkdir(parents=True, exist_ok=True)
    for name, text in tools.items():
        (tools_dir / name).write_text(text)
    config = root / "config.yaml"
    config.write_text(json.dumps({"visible_tools": list(tools), **settings}) + "\n")  # JSON is YAML
    return config


def many_tools(count: int) -> dict[str, str]:
    """``count`` small tools, the four languages in turn, each with a couple of parameters."""
    tools: dict[str, str] = {}
    for n in range(count):
        kind = n % 4
        if kind == 0:
            tools[f"t{n}_py.py"] = (
                f'def run(text: str, times: int = 1) -> str:\n    """Tool {n}: repeat the text.\n\n'
                '    Args:\n        text: What to repeat.\n        times: How often.\n    """\n    return text * times\n'
            )
        elif kind == 1:
            tools[f"t{n}_sh.sh"] = (
                f"#!/usr/bin/env bash\n# @describe Tool {n}: echo the text.\n# @option --text! The text.\n"
                '# @flag --loud Shout.\nmain() {\n    printf "%s" "$argc_text" >>"$LLM_OUTPUT"\n}\n'
            )
        elif kind == 2:
            tools[f"t{n}_ts.ts"] = (
                f"/**\n * Tool {n}: repeat the text.\n * @param text - What to repeat.\n * @param times - How often.\n */\n"
                "export function run(text: string, times: number = 1): string {\n  return text.repeat(times);\n}\n"
            )
        else:
            tools[f"t{n}_js.js"] = (
                f"/**\n * Tool {n}: repeat the text.\n * @param {{string}} text - What to repeat.\n"
                " * @param {number} [times] - How often.\n */\n"
                "export function run(text, times = 1) {\n  return text.repeat(times);\n}\n"
            )
    return tools
