"""Side-by-side timings: a toolexec call against the bare interpreter doing the same work.

Run with ``make bench``. Each figure is the median wall time of N runs of a
no-op tool; the ratio is toolexec / bare. Nothing here is asserted: these are
measurements for the notes, not tests.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

RUNS = int(os.environ.get("BENCH_RUNS", "30"))

NOOP_PY = 'def run(text: str = "") -> str:\n    """Return the text."""\n    return text\n'
NOOP_TS = '/** Return the text. */\nexport function run(text: string = ""): string {\n  return text;\n}\n'
NOOP_MJS = 'import { appendFileSync } from "node:fs";\nappendFileSync(process.env.LLM_OUTPUT ?? "/dev/null", "x");\n'
NOOP_SH = '#!/usr/bin/env bash\n# @describe Return the text.\n# @option --text The text.\nmain() {\n    printf "%s" "${argc_text:-}" >>"$LLM_OUTPUT"\n}\n'


def median_ms(action: Callable[[], object], runs: int = RUNS) -> float:
    action()  # warm caches (catalog, page cache) first
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def spawn(argv: list[str], **kwargs: object) -> Callable[[], object]:
    return lambda: subprocess.run(argv, check=True, capture_output=True, **kwargs)  # type: ignore[call-overload]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tools = root / "functions" / "tools"
        tools.mkdir(parents=True)
        (tools / "noop_py.py").write_text(NOOP_PY)
        (tools / "noop_sh.sh").write_text(NOOP_SH)
        (tools / "noop_ts.ts").write_text(NOOP_TS)
        (root / "bare.mjs").write_text(NOOP_MJS)
        config = root / "config.yaml"
        config.write_text("visible_tools: [noop_py.py, noop_sh.sh, noop_ts.ts]\n")
        # Measure an installed toolexec: bytecode compiled once, as pip does at install time
        # (this workplace sets PYTHONDONTWRITEBYTECODE, which would recompile every start).
        repo = Path(__file__).resolve().parent.parent
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", *(str(repo / p) for p in ("executor", "compilers", "runtimes"))],
            check=True,
        )
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["XDG_CACHE_HOME"] = str(root / "cache")
        cli = [sys.executable, "-m", "executor", "--config", str(config), "run"]

        from executor import Executor

        executor = Executor(config)
        executor.build()
        rows = [
            (
                "python: one-shot `toolexec run`",
                median_ms(spawn([*cli, "noop_py", '{"text": "x"}'], env=env)),
                "bare `python3 -c` doing the same",
                median_ms(spawn(["python3", "-c", "import json, sys; print('x')"])),
            ),
            (
                "python: in-process Executor.call",
                median_ms(lambda: executor.call("noop_py", {"text": "x"})),
                "bare `python3 -c`",
                median_ms(spawn(["python3", "-c", "print('x')"])),
            ),
            (
                "bash: one-shot `toolexec run`",
                median_ms(spawn([*cli, "noop_sh", '{"text": "x"}'], env=env)),
                "bare `bash script --text x`",
                median_ms(spawn(["bash", "-c", 'main() { printf "%s" "$1"; }; main x'])),
            ),
            (
                "bash: in-process Executor.call",
                median_ms(lambda: executor.call("noop_sh", {"text": "x"})),
                "bare `bash -c`",
                median_ms(spawn(["bash", "-c", 'printf "%s" x'])),
            ),
            (
                "typescript: one-shot `toolexec run`",
                median_ms(spawn([*cli, "noop_ts", '{"text": "x"}'], env=env)),
                "`npx tsx` running the same .ts",
                median_ms(spawn(["npx", "--yes", "tsx", str(tools / "noop_ts.ts")]), runs=max(5, RUNS // 4)),
            ),
            (
                "typescript: one-shot `toolexec run`",
                median_ms(spawn([*cli, "noop_ts", '{"text": "x"}'], env=env)),
                "bare `node` on equivalent JS",
                median_ms(spawn(["node", str(root / "bare.mjs")])),
            ),
            (
                "typescript: in-process Executor.call",
                median_ms(lambda: executor.call("noop_ts", {"text": "x"})),
                "bare `node` on equivalent JS",
                median_ms(spawn(["node", str(root / "bare.mjs")])),
            ),
        ]
    print(f"median of {RUNS} runs, milliseconds\n")
    print(f"{'toolexec':40} {'ms':>8}   {'bare':34} {'ms':>8}   {'ratio':>6}")
    for ours, ours_ms, bare, bare_ms in rows:
        print(f"{ours:40} {ours_ms:8.1f}   {bare:34} {bare_ms:8.1f}   {ours_ms / bare_ms:6.2f}")
    if "--json" in sys.argv:
        print(json.dumps([{"ours": r[0], "ours_ms": r[1], "bare": r[2], "bare_ms": r[3]} for r in rows]))


if __name__ == "__main__":
    main()
