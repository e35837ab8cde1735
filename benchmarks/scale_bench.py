"""10,000 tools against 1,000, and the one-shot rows with the sandbox off, side by side in one run.

    python benchmarks/scale_bench.py        (re-executes under the installed wheel, as run.py does)

Issue 25 asks `toolexec list`, a no-change `toolexec build` and a one-shot `toolexec run` at 10,000 tools
within 1.1x of the same at 1,000: each pair below alternates the two catalogs command by command. The row after
them is what `list` and a no-change `build` cannot do without: the no-change check, one stat per visible file (a file
edited in place changes no directory; see docs/architecture.md), with what the system calls alone cost. The same
three pairs follow with a `toolexec serve` of each config running: its watcher vouches that no file changed, so
`list` and a no-change `build` stat none (toolexec.vouch), and the run goes through its socket. Issue 20
asks the one-shot rows not to be slower than before the call path moved (no-op Bash ≤ 4.35x `python -c pass`,
Python ≤ 5.37x); they are measured here with ``sandbox: off`` as well as in run.py at the config's default, so
that the call path's own cost shows apart from the sandbox's.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import NOOP_PY, NOOP_SH, RUNS, many_tools, paired_ms, spawn, write_project

COMMANDS = [  # (what issue 25 calls it, the arguments, the row's label)
    ("list", ["list"], "`toolexec list`"),
    ("build", ["build"], "`toolexec build`, no change"),
    ("run", ["run", "noop_sh", '{"text": "x"}'], "one-shot `toolexec run`, no-op Bash tool"),
]


def scale_rows(b: Any) -> list[Any]:
    """The rows of the "10,000 tools" section (``b`` is run.py's Bench)."""
    from run import ratio_row

    runtimes = {"python": b.interpreter}
    tools = {"noop_py.py": NOOP_PY, "noop_sh.sh": NOOP_SH, **many_tools(9998)}
    huge = write_project(b.root / "huge", tools, runtimes=runtimes)
    thousand = write_project(b.root / "thousand", dict(list(tools.items())[:1000]), runtimes=runtimes)
    for config in (huge, thousand):
        spawn(b.cli(config, "build"), env=b.env)()
    runs = max(11, RUNS // 2)  # a 10,000-tool command takes a while; its pairs still see the same drift
    rows = []
    for what, argv, label in COMMANDS:
        paired = paired_ms(spawn(b.cli(huge, *argv), env=b.env), spawn(b.cli(thousand, *argv), env=b.env), runs)
        rows.append(ratio_row(f"{label}, 10,000 tools", paired, "1,000 tools", 1.1, f"issue 25 ({what})"))
    rows.append(check_row(huge, thousand))
    rows += served_rows(b, huge, thousand, runs)
    off = write_project(b.root / "sandbox-off", {"noop_py.py": NOOP_PY, "noop_sh.sh": NOOP_SH}, runtimes=runtimes, sandbox="off")
    bare = spawn([b.interpreter, "-c", "pass"], env=b.env)
    for tool, before in (("noop_sh", 4.35), ("noop_py", 5.37)):
        paired = paired_ms(b.one_shot(off, tool), bare)
        kind = "Bash" if tool == "noop_sh" else "Python"
        note = "issue 20: no slower than before the one call path (the figure of 5d4dd1b)"
        rows.append(
            ratio_row(f"one-shot `toolexec run`, no-op {kind} tool, `sandbox: off`", paired, "`python -c pass`", before, note)
        )
    return rows


def served_rows(b: Any, huge: Path, thousand: Path, runs: int) -> list[Any]:
    """The same pairs with a ``toolexec serve`` of each config running: its watcher vouches that no file changed
    (:mod:`toolexec.vouch`), so `list` and a no-change `build` stat no file, and a run goes through its socket."""
    from contextlib import ExitStack

    from run import ratio_row
    from serve_bench import serving

    env = {**b.env, "XDG_RUNTIME_DIR": str(b.root / "run-scale")}
    Path(env["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    rows = []
    with ExitStack() as servers:
        for config in (huge, thousand):
            servers.enter_context(serving(b.toolexec, config, env))
        for what, argv, label in COMMANDS:
            paired = paired_ms(spawn(b.cli(huge, *argv), env=env), spawn(b.cli(thousand, *argv), env=env), runs)
            rows.append(
                ratio_row(f"{label}, 10,000 tools, `toolexec serve` running", paired, "1,000 tools", 1.1, f"issue 25 ({what})")
            )
    return rows


def check_row(huge: Path, thousand: Path) -> Any:
    """What `list` and a no-change `build` cannot do without at 10,000 tools: one stat per visible file (the no-change
    check, :func:`toolexec.catalog.files_digest`), in this process, against the same at 1,000; with what the system
    call alone costs (``os.access`` of the same names) in the note."""
    from run import Row, ms

    from toolexec.catalog import files_digest
    from toolexec.config import load_config

    def check(path: Path) -> Any:
        config = load_config(path)
        folder, files = str(config.tools_dir), config.visible_tools
        return lambda: files_digest(folder, files)

    folders: list[int] = []

    def access(path: Path) -> Any:
        config = load_config(path)
        folders.append(folder := os.open(config.tools_dir, os.O_RDONLY))
        files = config.visible_tools
        return lambda: [os.access(file, os.F_OK, dir_fd=folder) for file in files]

    paired = paired_ms(check(huge), check(thousand))
    try:
        calls = paired_ms(access(huge), access(thousand))
    finally:
        for folder in folders:
            os.close(folder)
    note = f"the floor of the rows above: the system calls alone cost {ms(calls.ours)} against {ms(calls.bare)}"
    return Row(
        "no-change check alone (a stat per visible file), 10,000 tools",
        ms(paired.ours),
        f"1,000 tools: {ms(paired.bare)}",
        f"+{paired.added:.1f} ms",
        "",
        None,
        note,
    )


def main() -> None:
    import harness

    if os.environ.get("TOOLEXEC_BENCH_INSTALLED") != "1":
        python = harness.installed_python()
        os.execve(str(python), [str(python), __file__, *sys.argv[1:]], {**os.environ, "TOOLEXEC_BENCH_INSTALLED": "1"})
    from run import Bench

    with tempfile.TemporaryDirectory() as tmp:
        rows = scale_rows(Bench(Path(tmp)))
    print(f"load average: {os.getloadavg()[0]:.2f}")
    for row in rows:
        print(" | ".join(row.cells()))


if __name__ == "__main__":
    main()
