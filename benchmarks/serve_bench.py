"""One-shot ``toolexec run`` with a ``toolexec serve`` running, against ``python -c pass`` and the cold run.

    python benchmarks/serve_bench.py [RUNS]

The served run and the bare interpreter's start alternate (medians, and the median of the adjacent pairs' ratios);
the cold run (no server tried: ``TOOLEXEC_NO_SERVER=1``) is measured beside them. Target (issue 25): ≤ 1.5x
``python -c pass``. Each tool is measured under the default sandbox (every call in the baseline's namespaces) and
with ``sandbox: off`` (a second config of the same tools, served by a second server), which separates what the
server and its client cost from what the sandbox costs, and with the server run cold (each served run spawns the
tool) and warm (``toolexec serve --warm``: each served run forks from the server's own warm server of the tool; under
the sandbox's baseline a Python call is forked by its zygote into a PID namespace of its own, a Bash call runs in a
spare, a bash that sourced the tool ahead of it in a namespace of its own). ``make bench`` shows the same rows
(``serve_rows``).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import NOOP_PY, NOOP_SH, RUNS, Paired, clean_env, median_ms, paired_ms, spawn, write_project

TARGET = 1.5


@contextmanager
def serving(toolexec: str, config: Path, env: dict[str, str], *options: str) -> Iterator[tuple[list[str], int]]:
    """A ``toolexec serve`` of ``config`` while the block runs (its socket ready when the block starts); the block is
    given a list that gets, once it stopped, how the server says its calls started, and the server's pid."""
    said: list[str] = []
    server = subprocess.Popen(
        [toolexec, "--config", str(config), "serve", "-v", *options],
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        banner = server.stderr.readline()
        assert banner.startswith("toolexec: serving "), banner
        yield said, server.pid
    finally:
        server.terminate()
        _, rest = server.communicate(timeout=60)
        said += [line.removeprefix("toolexec: ").partition("; removed")[0] for line in rest.splitlines() if "served" in line]


class Served(NamedTuple):
    """One row's figures."""

    label: str
    paired: Paired  # the served run against `python -c pass`
    cold: float  # ms: the cold run's median (no server tried)
    client_cpu: float  # ms of CPU (user + system) of the served run's own process, the command
    bare_cpu: float  # ms of CPU of `python -c pass`
    server_cpu: float  # ms of CPU per run of the server and what it reaped: its children, their tools and spares


def process_cpu_ms(pid: int) -> float:
    """The CPU (user + system, ms) of process ``pid`` and of the children it reaped (theirs included, as reaped)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(value) for value in fields[11:15]) * 1000 / os.sysconf("SC_CLK_TCK")


def cpu_ms(action: Callable[[], object], runs: int) -> float:
    """The CPU (user + system, ms) of the processes ``action`` runs and waits for, per run: a loaded machine
    changes it far less than wall time (the server's CPU is not in it: it is not waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # (microseconds: os.times counts clock ticks)
    for _ in range(runs):
        action()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000 / runs


def measure(
    toolexec: str, python: str, config: Path, env: dict[str, str], runs: int, counts: list[str] | None = None
) -> list[Served]:
    """For each no-op tool, under the config's sandbox and under ``sandbox: off``: the served run against
    ``python -c pass``, the cold run's median, and the CPU of the served run's command against the bare start's;
    ``counts`` gets how each server says its calls started (in a sandbox set up ahead, forked warm, cold)."""
    run_dir = Path(env["XDG_RUNTIME_DIR"])
    run_dir.mkdir(mode=0o700, exist_ok=True)
    bare = spawn([python, "-c", "pass"], env=env)
    cold_env = {**env, "TOOLEXEC_NO_SERVER": "1"}
    unconfined = config.with_name("config-sandbox-off.yaml")  # the same tools (functions/ beside it), sandbox: off
    unconfined.write_text(json.dumps({**json.loads(config.read_text()), "sandbox": "off"}) + "\n")

    def one_shot(chosen: Path, tool: str, environment: dict[str, str]) -> Callable[[], object]:
        return spawn([toolexec, "--config", str(chosen), "run", tool, '{"text": "x"}'], env=environment)

    found = []
    for options, how in (((), ""), (("--warm",), ", warm (`serve --warm`)")):
        with (
            serving(toolexec, config, env, *options) as (said, pid),
            serving(toolexec, unconfined, env, *options) as (
                said_off,
                pid_off,
            ),
        ):
            for label, tool in (("Bash", "noop_sh"), ("Python", "noop_py")):
                for chosen, sandbox in ((config, ""), (unconfined, ", `sandbox: off`")):
                    for _ in range(3):  # the first run has the server start the tool's warm server
                        one_shot(chosen, tool, env)()
                    paired = paired_ms(one_shot(chosen, tool, env), bare, runs)
                    cold = median_ms(one_shot(chosen, tool, cold_env), max(5, runs // 4))
                    server = pid if chosen == config else pid_off
                    before = process_cpu_ms(server)
                    client = cpu_ms(one_shot(chosen, tool, env), max(5, runs // 2))
                    server_cpu = (process_cpu_ms(server) - before) / max(5, runs // 2)
                    bare_cpu = cpu_ms(bare, max(5, runs // 2))
                    found.append(Served(f"{label} tool{how}{sandbox}", paired, cold, client, bare_cpu, server_cpu))
        if counts is not None:
            counts += [f"`serve{' --warm' if options else ''}`: {line}" for line in said]
            counts += [f"`serve{' --warm' if options else ''}`, `sandbox: off`: {line}" for line in said_off]
    return found


def serve_rows(b: object) -> list[object]:
    """The rows of ``make bench`` (benchmarks/run.py's Bench ``b``)."""
    from run import ratio_row  # run.py is the suite; this module is one of its sections

    env = {**b.env, "XDG_RUNTIME_DIR": str(b.root / "run")}  # type: ignore[attr-defined]
    rows = []
    for row in measure(b.toolexec, b.interpreter, b.small, env, RUNS):  # type: ignore[attr-defined]
        rows.append(
            ratio_row(
                f"one-shot `toolexec run` with `toolexec serve` running, no-op {row.label}",
                row.paired,
                "`python -c pass`",
                TARGET,
                f"cold (no server): {row.cold:.1f} ms; the command's CPU {row.client_cpu:.1f} ms, "
                f"`python -c pass`'s {row.bare_cpu:.1f} ms; the server's CPU per run {row.server_cpu:.1f} ms",
            )
        )
    return rows


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else RUNS
    toolexec = str(Path(sys.executable).parent / "toolexec")
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        env = clean_env(
            XDG_CACHE_HOME=str(root / "cache"), XDG_CONFIG_HOME=str(root / "config"), XDG_RUNTIME_DIR=str(root / "run")
        )
        config = write_project(root, {"noop_py.py": NOOP_PY, "noop_sh.sh": NOOP_SH}, runtimes={"python": sys.executable})
        subprocess.run([toolexec, "--config", str(config), "build"], env=env, check=True, capture_output=True)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            "| tool | served run | `python -c pass` | ratio (median of pairs) | cold run (no server) "
            "| CPU: the command / `python -c pass` | CPU: the server per run | target ≤ 1.5x |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        counts: list[str] = []
        for row in measure(toolexec, sys.executable, config, env, runs, counts):
            paired = row.paired
            met = "met" if paired.ratio <= TARGET else "**not met**"
            print(
                f"| no-op {row.label} | {paired.ours:.1f} ms | {paired.bare:.1f} ms | {paired.ratio:.2f}x | {row.cold:.1f} ms "
                f"| {row.client_cpu:.1f} / {row.bare_cpu:.1f} ms | {row.server_cpu:.1f} ms | {met} |"
            )
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for line in counts:  # (each server served both tools: Bash's runs, then Python's)
            print(f"- {line}")


if __name__ == "__main__":
    main()
