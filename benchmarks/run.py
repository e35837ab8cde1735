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


def paired_ms(ours: Callable[[], object], bare: Callable[[], object], runs: int = RUNS) -> tuple[float, float]:
    """Median wall times of ``ours`` and ``bare``, run alternately so drift on a shared machine hits both alike."""
    ours(), bare()  # warm caches (catalog, transpile, page cache) first
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for action, into in ((ours, samples[0]), (bare, samples[1])):
            start = time.perf_counter()
            action()
            into.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


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
        cli = [sys.executable, "-m", "toolexec", "--config", str(config), "run"]

        from toolexec import Executor

        executor = Executor(config)
        executor.build()
        one_shot = {tool: spawn([*cli, tool, '{"text": "x"}'], env=env) for tool in ("noop_py", "noop_sh", "noop_ts")}
        in_process = {tool: (lambda tool=tool: executor.call(tool, {"text": "x"})) for tool in ("noop_py", "noop_sh", "noop_ts")}
        bare_node = spawn(["node", str(root / "bare.mjs")])
        from toolexec.runtimes.interpreter import bundled_node

        node24 = bundled_node()  # the Node extra, toolexec's default node when installed
        bare_node24 = spawn([node24, str(root / "bare.mjs")]) if node24 else bare_node
        node24_label = "bare Node 24 (extra) on equivalent JS" if node24 else "bare `node` (no Node extra installed)"
        tsx = repo / ".venv" / "js-runtimes" / "node_modules" / ".bin" / "tsx"  # installed tsx, as `make test` sets it up
        comparisons = [
            (
                "python: one-shot `toolexec run`",
                one_shot["noop_py"],
                "bare `python3 -c` doing the same",
                spawn(["python3", "-c", "import json, sys; print('x')"]),
            ),
            (
                "python: in-process Executor.call",
                in_process["noop_py"],
                "bare `python3 -c`",
                spawn(["python3", "-c", "print('x')"]),
            ),
            (
                "bash: one-shot `toolexec run`",
                one_shot["noop_sh"],
                "bare `bash -c` function call",
                spawn(["bash", "-c", 'main() { printf "%s" "$1"; }; main x']),
            ),
            ("bash: in-process Executor.call", in_process["noop_sh"], "bare `bash -c`", spawn(["bash", "-c", 'printf "%s" x'])),
            (
                "typescript: one-shot `toolexec run`",
                one_shot["noop_ts"],
                "`npx tsx` running the same .ts",
                spawn(["npx", "--yes", "tsx", str(tools / "noop_ts.ts")]),
            ),
            ("typescript: one-shot `toolexec run`", one_shot["noop_ts"], "bare `node` on equivalent JS", bare_node),
            ("typescript: in-process Executor.call", in_process["noop_ts"], "bare `node` on equivalent JS", bare_node),
            (
                "typescript: one-shot `toolexec run`",
                one_shot["noop_ts"],
                "installed `tsx` running the same .ts",
                spawn([str(tsx), str(tools / "noop_ts.ts")]),
            ),
            ("typescript: in-process Executor.call", in_process["noop_ts"], node24_label, bare_node24),
        ]
        rows = [(ours_label, *paired_ms(ours, bare), bare_label) for ours_label, ours, bare_label, bare in comparisons]
    print(f"median of {RUNS} alternating runs each, milliseconds; ratio = toolexec / bare\n")
    print(f"{'toolexec':40} {'ms':>8}   {'bare':34} {'ms':>8}   {'ratio':>6}")
    for ours, ours_ms, bare_ms, bare in rows:
        print(f"{ours:40} {ours_ms:8.1f}   {bare:34} {bare_ms:8.1f}   {ours_ms / bare_ms:6.2f}")
    for (_, ours_ms, bare_ms, bare), target in zip(rows[4:5] + rows[7:8], ("5x", "4x"), strict=True):
        print(f"\ntypescript one-shot vs {bare}: {bare_ms / ours_ms:.1f}x faster (target: at least {target})", end="")
    for _, ours_ms, bare_ms, bare in rows[6:7] + rows[8:9]:
        print(f"\ntypescript in-process call vs {bare}: {ours_ms / bare_ms:.2f}x (target: at most 1.3x)", end="")
    print()
    if "--json" in sys.argv:
        print(json.dumps([{"ours": r[0], "ours_ms": r[1], "bare_ms": r[2], "bare": r[3]} for r in rows]))


if __name__ == "__main__":
    main()
