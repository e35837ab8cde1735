"""Issue 20's rows: the one call path against the figures from before it (5d4dd1b), like for like.

    python benchmarks/run.py callpath        (re-executes under the installed wheel)

Issue 20 asks that no row of the one-shot run, the in-process calls and the MCP round trip be slower than before
the call path moved into ``executor/calls.py``. The figures before (benchmarks/RESULTS.md at 5d4dd1b) were taken
when no call ran in a sandbox; since then issue 21 runs every call under a baseline by default (a PID namespace of
its own, limits), whose cost issue 21 measures and bounds on its own (the "Sandbox" section). So the rows here run
the same tools with ``sandbox: off`` — what the call path costs — against the ratios of 5d4dd1b as their targets;
the default mode's rows are in "Per-call overhead". The one-shot rows with ``sandbox: off`` are in the "10,000
tools" section (scale_bench.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import BARE_MJS, NOOP_JS, NOOP_PY, NOOP_SH, NOOP_TS, RUNS, paired_ms, spawn, write_project

# 5d4dd1b's figures (benchmarks/RESULTS.md there): ratio to the bare start, or milliseconds added to it
BEFORE = {"python": 1.21, "bash": 1.6, "javascript": 1.12, "typescript": 1.15, "mcp": 3.9}
NOTE = "issue 20: no slower than before the one call path (5d4dd1b), `sandbox: off`"


def callpath_rows(b: Any) -> list[Any]:
    """The rows of the "Issue 20" section (``b`` is run.py's Bench)."""
    from mcp_bench import StdioServer
    from run import Row, added_row, ms, ratio_row

    from toolexec import Executor

    tools = {"noop_py.py": NOOP_PY, "noop_sh.sh": NOOP_SH, "noop_ts.ts": NOOP_TS, "noop_js.js": NOOP_JS}
    config = write_project(b.root / "callpath-off", tools, runtimes={"python": b.interpreter}, sandbox="off")
    (b.root / "callpath-bare.mjs").write_text(BARE_MJS)
    node_env = {**b.env, "LLM_OUTPUT": str(b.root / "callpath-bare-output")}
    bare_node = spawn([b.node, str(b.root / "callpath-bare.mjs")], env=node_env)
    bare_bash = spawn(["bash", "-c", 'printf "%s" x'], env=b.env)
    node_version = subprocess.run([b.node, "--version"], capture_output=True, text=True).stdout.strip()
    rows = []
    with Executor(config) as executor:
        executor.build()

        def call(tool: str) -> Any:
            def action() -> None:
                result = executor.call(tool, {"text": "x"})
                assert result.ok, result.error

            return action

        runs = 2 * RUNS
        bare_python = spawn([b.interpreter, "-c", "pass"], env=b.env)
        paired = paired_ms(call("noop_py"), bare_python, runs)
        rows.append(ratio_row("Python tool, in-process, `sandbox: off`", paired, "`python -c pass`", BEFORE["python"], NOTE))
        paired = paired_ms(call("noop_sh"), bare_bash, runs)
        rows.append(added_row("Bash tool, in-process, `sandbox: off`", paired, "`bash -c`", BEFORE["bash"], NOTE))
        for tool, language in (("noop_js", "javascript"), ("noop_ts", "typescript")):
            paired = paired_ms(call(tool), bare_node, runs)
            label = f"{language.title().replace('script', 'Script')} tool, in-process, `sandbox: off`"
            rows.append(ratio_row(label, paired, f"bare node {node_version}", BEFORE[language], NOTE))
    # The parser decision: `run` keeps a hand-written parser beside argparse's (one lazily built argparse parser for
    # everything would cost every one-shot call its import and construction). `--time=30` is an abbreviation the
    # hand-written parser hands to argparse; `--timeout=30` it takes itself: the same run either way.
    hand = spawn(b.cli(config, "run", "noop_sh", '{"text": "x"}', "--timeout=30"), env=b.env)
    by_argparse = spawn(b.cli(config, "run", "noop_sh", '{"text": "x"}', "--time=30"), env=b.env)
    paired = paired_ms(hand, by_argparse)
    rows.append(
        Row(
            "one-shot `toolexec run`, no-op Bash tool, `sandbox: off`, parsed by the hand-written `run` parser",
            ms(paired.ours),
            f"the same run parsed by argparse: {ms(paired.bare)}",
            f"{paired.added:+.1f} ms",
            note="issue 20's parser decision: two parsers are kept because argparse costs a one-shot run this much",
        )
    )
    server = StdioServer(b.cli(config, "mcp"), b.env)
    try:
        request = {"name": "noop_sh", "arguments": {"text": "x"}}
        paired = paired_ms(lambda: server.request("tools/call", request), bare_bash)
        label = "`tools/call` through `toolexec mcp` (stdio), no-op Bash tool, `sandbox: off`"
        rows.append(added_row(label, paired, "`bash -c`", BEFORE["mcp"], NOTE))
    finally:
        server.close()
    return rows


if __name__ == "__main__":
    import run

    sys.argv[1:] = ["callpath"]
    run.main()
