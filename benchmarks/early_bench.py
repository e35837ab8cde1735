"""One-shot ``toolexec run`` (no server) of a no-op Bash and Python tool: the early start against a cold one.

    python benchmarks/early_bench.py [RUNS]

A one-shot run starts its tool's process (bwrap included under the sandbox's baseline) beside toolexec's own
imports, from what the last run of the same tool from the same place wrote down (:mod:`toolexec.early`). Each
language is measured under ``sandbox: off`` and the baseline (the default: the call in a PID namespace of its own),
two ways each: *early* (the memo of the run before is there, as on every run but a tool's first) and *cold* (the
memo folder removed before each run, untimed: the run starts nothing early, as before this mechanism). The four
runs of a language alternate, so that they see the same drift of a shared machine; the rows are the issue's: the
baseline against off (target: ≤ +3 ms, issue 21), each with the cold figures beside it.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

TYPE_CHECKING = False
if TYPE_CHECKING:
    from run import Bench, Row

LANGUAGES = {"Bash": ("noop_sh.sh", "noop_sh", harness.NOOP_SH), "Python": ("noop_py.py", "noop_py", harness.NOOP_PY)}
MODES: dict[str, dict[str, object]] = {"off": {"sandbox": "off"}, "baseline": {}}
WAYS = ("early", "cold")


def measure(root: Path, toolexec: str, python: str, runs: int) -> dict[str, dict[tuple[str, str], float]]:
    """Median wall ms per language, for each (mode, way), the runs alternating."""
    cache = root / "xdg-cache"
    env = harness.clean_env(XDG_CACHE_HOME=str(cache), XDG_CONFIG_HOME=str(root / "xdg-config"), TOOLEXEC_NO_SERVER="1")
    memos = cache / "toolexec" / "one-shot"
    found: dict[str, dict[tuple[str, str], float]] = {}
    for language, (file, name, text) in LANGUAGES.items():
        actions: dict[tuple[str, str], tuple[Callable[[], object], Callable[[], object] | None]] = {}
        for mode, settings in MODES.items():
            config = harness.write_project(root / f"{language}-{mode}", {file: text}, runtimes={"python": python}, **settings)
            argv = [toolexec, "--config", str(config), "run", name, '{"text": "x"}']
            run = harness.spawn(argv, env=env)
            actions[(mode, "early")] = (run, None)
            actions[(mode, "cold")] = (run, lambda: shutil.rmtree(memos, ignore_errors=True))
        samples: dict[tuple[str, str], list[float]] = {key: [] for key in actions}
        for action, _ in actions.values():  # warm the catalogs, the page cache, the memos
            action(), action()
        for _ in range(runs):
            for key, (action, prepare) in actions.items():
                if prepare is not None:
                    prepare()
                start = time.perf_counter()
                action()
                samples[key].append((time.perf_counter() - start) * 1000)
        found[language] = {key: statistics.median(values) for key, values in samples.items()}
    return found


def early_rows(b: Bench) -> list[Row]:
    """The issue's rows for ``benchmarks/run.py``: the baseline against off, early (cold figures in the note)."""
    from run import Row, ms

    rows = []
    with tempfile.TemporaryDirectory() as directory:
        found = measure(Path(directory), b.toolexec, b.interpreter, max(harness.RUNS // 2, 9))
    for language, figures in found.items():
        added = figures[("baseline", "early")] - figures[("off", "early")]
        note = f"cold (nothing started early): baseline {ms(figures[('baseline', 'cold')])}, off {ms(figures[('off', 'cold')])}"
        rows.append(
            Row(
                f"one-shot `toolexec run`, no-op {language} tool, baseline vs off",
                ms(figures[("baseline", "early")]),
                f"off: {ms(figures[('off', 'early')])}",
                f"{added:+.1f} ms",
                "≤ +3.0 ms",
                added <= 3.0,
                note,
            )
        )
    return rows


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    python = harness.installed_python()
    toolexec = str(python.parent / "toolexec")
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    with tempfile.TemporaryDirectory() as directory:
        found = measure(Path(directory), toolexec, str(python), runs)
    print(f"load: {load}; runs: {runs}")
    for language, figures in found.items():
        cells = ", ".join(f"{mode} {way} {value:.1f} ms" for (mode, way), value in figures.items())
        print(f"{language}: {cells}")
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True, check=False).stdout.strip()}")


if __name__ == "__main__":
    main()
