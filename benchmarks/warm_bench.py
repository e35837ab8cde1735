"""Warm tools (docs/performance.md) against what they replace, side by side in one run (in-process ``Executor.call``).

    python benchmarks/warm_bench.py [RUNS] [MODE...] [--bash]

(``--bash``: the Bash rows alone, in-process and over MCP stdio; MODEs: the Python rows of those sandbox modes only.)

Each Python figure is taken under ``sandbox: declared`` (the default: every call, warm or cold, in a PID namespace of
its own under the sandbox's baseline), under ``sandbox: strict`` (what ``toolexec init`` writes: every call confined
by the baseline policy; a warm server lives inside the tool's sandbox, runtimes/_python_confined.py) and under
``sandbox: off`` (MODEs given: those only, and no Bash row):

* a warm Python no-op call against starting Python at all (``python -c pass``): target ≤ 0.2×; under strict, also
  against the same call cold (its own bwrap, or its sandbox set up ahead once the tool has been called: the spares
  a long-lived executor keeps);
* a tool that imports a heavy set (numpy and pandas where the tool's Python has them, else a heavy set of the
  standard library) called warm against the same tool called cold: target ≥ 20× faster;
* a ``tools/call`` of a warm Bash no-op tool through ``toolexec mcp --warm`` over stdio (a raw JSON-RPC client:
  one line out, one line back) against ``bash -c :``: target ≤ +1 ms; under the baseline each call runs in a spare (a
  bash that sourced the tool ahead of the call, alone in a PID namespace of its own: runtimes/_bash_zygote.py), with
  ``sandbox: off`` in a subshell forked from one warm bash;
* the same Bash tool called in-process (``Executor.call``), warm and cold, in each mode: what each design costs per
  call, without the MCP server's own share.

Each pair runs alternately; the medians and the median ratio of adjacent pairs are printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from toolexec import Executor
from toolexec.runtimes import warm_fork
from toolexec.runtimes.interpreter import which

NOOP = 'def run() -> str:\n    """Do nothing."""\n    return "ok"\n'
NOOP_SH = '#!/usr/bin/env bash\n# @describe Do nothing.\nmain() { :; }\neval "$(argc --argc-eval "$0" "$@")"\n'
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


def interpreter() -> str:
    """Which Python the tools run with, the one ``python -c pass`` starts too (its start differs much between builds:
    one whose site imports a ``.pth`` file pays for it)."""
    return f"both `{sys.executable}`, Python {sys.version.split()[0]}"


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


def _project(root: Path, tools: dict[str, str], sandbox: str = "off") -> Path:
    (root / "functions" / "tools").mkdir(parents=True, exist_ok=True)
    for file, source in tools.items():
        (root / "functions" / "tools" / file).write_text(source)
    config = root / f"config-{sandbox}.yaml"
    # The tools' Python is the bare figure's (no PATH shim in between: a pyenv shim alone takes longer than a call).
    settings = {"visible_tools": sorted(tools), "sandbox": sandbox, "runtimes": {"python": sys.executable}}
    config.write_text(yaml.safe_dump(settings))
    return config


def cpu_per_call(action: Callable[[], object], runs: int) -> float:
    """The median CPU time (ms) this process spends on one ``action`` (every thread of it; not the tool's process,
    nor its server's): the executor's own work per call, which the load of a shared machine hardly changes."""
    spent = []
    for _ in range(runs):
        start = time.process_time()
        action()
        spent.append((time.process_time() - start) * 1000)
    return statistics.median(spent)


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _session_cpu(session: int) -> float:
    """The CPU time (ms) of every live process of ``session`` and of the children each has reaped (a warm server's
    session: its bwrap where it has one, the server, and through their reaps each call's init and process)."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session:  # (utime, stime, cutime, cstime: fields 14-17)
            total += sum(int(value) for value in fields[11:15])
    return total * 1000 / _TICKS


def _server_of(tool: str) -> int:
    """The session of the warm server this process runs for ``tool`` (its pid: each server leads its own)."""
    for pid in warm_fork.running_servers():
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as handle:
            if f"/{tool}.py".encode() in handle.read():
                return pid
    raise LookupError(f"no warm server runs {tool}")


def server_cpu_per_call(action: Callable[[], object], tool: str, runs: int) -> float:
    """The CPU time (ms) a warm call of ``tool`` costs its server's side (the server's hand-over, the spare it forks
    ahead, that spare's init and the call's own process: what the kernel accounts to them), over ``runs`` calls."""
    session = _server_of(tool)
    before = _session_cpu(session)
    for _ in range(runs):
        action()
    return (_session_cpu(session) - before) / runs


def bare_cpu(argv: list[str], runs: int) -> float:
    """The CPU time (ms) one run of ``argv`` costs (what this process's reaped children used)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        subprocess.run(argv, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) * 1000 / runs


def _call(executor: Executor, name: str) -> Callable[[], object]:
    def action() -> None:
        result = executor.call(name, {})
        assert result.ok, result

    return action


MODES = ("declared", "off")  # the default (every call under the sandbox's baseline: its own PID namespace), and none
PYTHON_MODES = ("declared", "strict", "off")  # and every call confined (the baseline policy: what `toolexec init` writes)


def measure(runs: int, modes: tuple[str, ...] = PYTHON_MODES) -> dict[str, tuple[float, float, float, str]]:
    """The figures: name → (ours ms, reference ms, ratio, label), for each sandbox mode of :data:`MODES`
    (``noop:declared``, ``heavy:off`` …): a warm no-op against ``python -c pass``, a heavy tool warm against cold;
    ``cpu:MODE``: (the executor's CPU ms per warm no-op call, the same per cold call, their ratio, ""); ``allcpu:MODE``:
    (the CPU ms of a warm no-op call on both sides, the executor's and its server's, that of ``python -c pass``, their
    ratio, the server's share as text): what the load of a shared machine changes least; under
    strict, ``noop-cold:strict``: a warm no-op against the same call cold."""
    python = sys.executable
    modules, label = heavy_modules(python)
    figures: dict[str, tuple[float, float, float, str]] = {}
    bare = [python, "-c", "pass"]
    with tempfile.TemporaryDirectory() as directory:
        for mode in modes:
            config = _project(Path(directory), {"noop.py": NOOP, "heavy.py": heavy_tool(modules)}, mode)
            with Executor(config, warm=True) as warm, Executor(config, warm=False) as cold:
                for executor in (warm, cold):  # the build, the first start of each server
                    for name in ("noop", "heavy"):
                        _call(executor, name)()
                noop = paired(_call(warm, "noop"), lambda: subprocess.run(bare, check=True), runs)
                figures[f"noop:{mode}"] = (*noop, interpreter())
                figures[f"heavy:{mode}"] = (*paired(_call(warm, "heavy"), _call(cold, "heavy"), runs), label)
                if mode == "strict":
                    figures[f"noop-cold:{mode}"] = (*paired(_call(warm, "noop"), _call(cold, "noop"), runs), "")
                warm_cpu, cold_cpu = cpu_per_call(_call(warm, "noop"), runs), cpu_per_call(_call(cold, "noop"), runs)
                figures[f"cpu:{mode}"] = (warm_cpu, cold_cpu, warm_cpu / cold_cpu, "")
                served, bare_ms = server_cpu_per_call(_call(warm, "noop"), "noop", runs), bare_cpu(bare, runs)
                figures[f"allcpu:{mode}"] = (warm_cpu + served, bare_ms, (warm_cpu + served) / bare_ms, f"{served:.2f}")
    return figures


class StdioClient:
    """``toolexec mcp`` over stdio, spoken to line by line (no SDK: its own overhead is not toolexec's)."""

    def __init__(self, config: Path, *options: str) -> None:
        argv = [sys.executable, "-m", "toolexec", "--config", str(config), "mcp", "--no-reload", *options]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ))
        self.next_id = 0
        self.request(
            "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}}
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            reply = json.loads(self.proc.stdout.readline())
            if reply.get("id") == self.next_id:
                return reply

    def call(self, name: str) -> None:
        reply = self.request("tools/call", {"name": name, "arguments": {}})
        assert not reply["result"].get("isError"), reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def measure_bash(runs: int) -> dict[str, tuple[float, float, float]]:
    """A Bash no-op tool called in-process, warm against cold, in each sandbox mode: ``bash:MODE`` → (warm ms, cold ms,
    median ratio of the pairs)."""
    figures = {}
    with tempfile.TemporaryDirectory() as directory:
        for mode in MODES:
            config = _project(Path(directory), {"noop.sh": NOOP_SH}, mode)
            with Executor(config, warm=True) as warm, Executor(config, warm=False) as cold:
                for executor in (warm, cold, warm):  # the build, the server's start
                    _call(executor, "noop")()
                figures[f"bash:{mode}"] = paired(_call(warm, "noop"), _call(cold, "noop"), runs)
    return figures


def tree_cpu_ms(pid: int) -> tuple[float, float]:
    """CPU time (ms) of process ``pid`` alone, and of it with every descendant alive now and every one they reaped
    (``/proc``'s utime, stime, cutime and cstime): what a server and the processes it runs have used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    own, whole, stack = 0.0, 0.0, [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            for task in os.listdir(f"/proc/{current}/task"):
                stack += [int(c) for c in Path(f"/proc/{current}/task/{task}/children").read_text().split()]
        except (OSError, ValueError):
            continue
        used = [int(x) * 1000 / tick for x in fields[11:15]]
        whole += sum(used)
        if current == pid:
            own = used[0] + used[1]
    return own, whole


def measure_mcp(runs: int, sandbox: str = "declared", cpu: dict[str, float] | None = None) -> tuple[float, float, float]:
    """Medians (ms) of a warm Bash tool's tools/call over stdio and of ``bash -c :``, and the median difference.
    ``cpu``: filled with the CPU per call (ms) of the ``toolexec mcp`` process (``server``) and of it with every
    process it ran (``tree``: its warm server, the server's spares and calls), steadier than wall times on a busy
    machine."""
    bash = which("bash") or "bash"
    with tempfile.TemporaryDirectory() as directory:
        config = _project(Path(directory), {"noop.sh": NOOP_SH}, sandbox)
        client = StdioClient(config, "--warm")
        try:
            for _ in range(3):  # the build, the server's start
                client.call("noop")
            before = tree_cpu_ms(client.proc.pid)
            times: tuple[list[float], list[float]] = ([], [])
            for _ in range(runs):
                for index, action in enumerate(
                    (lambda: client.call("noop"), lambda: subprocess.run([bash, "-c", ":"], check=True))
                ):
                    start = time.perf_counter()
                    action()
                    times[index].append((time.perf_counter() - start) * 1000)
            after = tree_cpu_ms(client.proc.pid)
            if cpu is not None:
                cpu.update(server=(after[0] - before[0]) / runs, tree=(after[1] - before[1]) / runs)
        finally:
            client.close()
    added = [a - b for a, b in zip(*times, strict=True)]
    return statistics.median(times[0]), statistics.median(times[1]), statistics.median(added)


def main() -> None:
    options = [arg for arg in sys.argv[1:] if arg.startswith("--")]
    words = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    numbers = words[:1] if words and words[0].isdigit() else []
    chosen = tuple(words[len(numbers) :])
    unknown = [mode for mode in chosen if mode not in PYTHON_MODES]
    if set(options) - {"--bash"} or unknown:
        print(
            f"usage: python benchmarks/warm_bench.py [RUNS] [MODE...] [--bash] (MODE: {', '.join(PYTHON_MODES)})", file=sys.stderr
        )
        raise SystemExit(2)
    runs = int(numbers[0]) if numbers else 21
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| measure | ours | reference | ratio | target | note |")
    print("| --- | --- | --- | --- | --- | --- |")
    if "--bash" not in options:
        python_rows(runs, chosen or PYTHON_MODES)
    if not chosen:
        bash_rows(runs)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def python_rows(runs: int, modes: tuple[str, ...]) -> None:
    figures = measure(runs, modes)
    for mode in modes:
        ours, bare, ratio, python = figures[f"noop:{mode}"]
        print(
            f"| warm Python no-op call, sandbox {mode} | {ours:.2f} ms | `python -c pass`: {bare:.1f} ms "
            f"| {ratio:.3f}x | ≤ 0.2x | {python} |"
        )
        if f"noop-cold:{mode}" in figures:
            ours, cold, ratio, _ = figures[f"noop-cold:{mode}"]
            print(
                f"| warm Python no-op call vs the same call cold, sandbox {mode} | {ours:.2f} ms | cold: {cold:.1f} ms "
                f"| {1 / ratio:.1f}x faster | | |"
            )
        warm_cpu, cold_cpu, _, _ = figures[f"cpu:{mode}"]
        print(f"| toolexec's own CPU per no-op call, sandbox {mode} | warm: {warm_cpu:.2f} ms | cold: {cold_cpu:.2f} ms | | | |")
        both, bare_ms, ratio, served = figures[f"allcpu:{mode}"]
        print(
            f"| CPU per warm no-op call, toolexec and its server, sandbox {mode} | {both:.2f} ms (server {served} ms) "
            f"| `python -c pass`: {bare_ms:.2f} ms | {ratio:.3f}x | | CPU, not wall: the server forks the next spare |"
        )
        ours, cold, ratio, label = figures[f"heavy:{mode}"]
        print(
            f"| heavy-import tool ({label}), warm vs cold, sandbox {mode} | {ours:.2f} ms | cold: {cold:.1f} ms "
            f"| {1 / ratio:.1f}x faster | ≥ 20x | |"
        )


def bash_rows(runs: int) -> None:
    for mode, (warm, cold, ratio) in sorted(measure_bash(runs).items()):
        print(
            f"| Bash no-op call in-process, warm vs cold, sandbox {mode.split(':')[1]} | {warm:.2f} ms | cold: {cold:.1f} ms | {ratio:.3f}x | |"
        )
    for mode in MODES:
        cpu: dict[str, float] = {}
        served, bash, added = measure_mcp(runs, mode, cpu)
        print(
            f"| MCP stdio `tools/call`, warm Bash tool, sandbox {mode} | {served:.2f} ms | `bash -c :`: {bash:.2f} ms "
            f"| {added:+.2f} ms | ≤ +1 ms | CPU per call: toolexec mcp {cpu['server']:.2f} ms, with every process it "
            f"ran {cpu['tree']:.2f} ms |"
        )


if __name__ == "__main__":
    main()
