"""JavaScript and TypeScript: the one-shot TypeScript call against its peers on the same Node, and the warm designs.

    python benchmarks/node_bench.py [RUNS] [--one-shot]

One-shot (issue 25): ``toolexec run`` of a no-op TypeScript tool against the same Node running the same file by
its own type stripping through a minimal runner (``node runner.ts``: import the tool, call it, write the output),
and against ``tsx`` on that Node (its CLI, which starts that Node again with its loader). Our command and the
reference alternate; ratios are the medians of adjacent pairs. Each is measured four ways: cold (no server
tried) and through a running ``toolexec serve`` of its config, each under the default sandbox baseline (the call in
a PID namespace of its own) and with ``sandbox: off``. ``--one-shot`` measures these alone.

Warm designs (issue 25, part 2): what one call of a loaded no-op tool costs when a fresh process runs each call,
against one process running many. Each is measured as its caller sees it, from the request written to the
result read, with the tool already imported where the design allows it:

- cold: ``node node_bootstrap.cjs TOOL`` started per call (what every call pays today, without Python);
- cold from a startup snapshot holding the bootstrap (``--snapshot-blob``);
- pre-warmed spare: a node started ahead that has imported the tool and waits on stdin for its one call; the
  call writes the request, the spare runs it and exits; a new spare is started after each call (not timed
  in the latency row; the back-to-back row times calls that follow each other at once, spare start included);
- worker thread per call: one process, a fresh ``worker_threads`` Worker (its own module instance) per call;
- shared worker: one process that imported the tool once and runs every call in it (no isolation at all).

The designs are written here as the smallest programs that show their cost; toolexec's own runs through
:mod:`toolexec.runtimes`.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

TYPE_CHECKING = False
if TYPE_CHECKING:
    from run import Bench, Row

NOOP_TS = harness.NOOP_TS
# The sandbox modes the one-shot rows run under: the default (every call in the baseline's PID namespace) and off.
MODES: dict[str, dict[str, object]] = {"baseline": {}, "off": {"sandbox": "off"}}
RUNNER_TS = """import { writeFileSync } from "node:fs";
import { run } from "./functions/tools/noop_ts.ts";
const args = JSON.parse(process.argv[2] ?? "{}");
const value = await run(args.text);
writeFileSync(process.env.LLM_OUTPUT ?? "/dev/null", String(value));
"""
# The request every design reads: the bootstrap's own shape.
REQUEST = {"arguments": {"text": "x"}, "convention": "positional", "order": ["text"], "export": "named", "function": None}
SPARE_CJS = """"use strict";
// A pre-warmed spare: import the tool, say so, then wait for the one call (its environment and arguments) on stdin.
const { readFileSync, writeFileSync } = require("node:fs");
const { pathToFileURL } = require("node:url");
import(pathToFileURL(process.argv[2]).href).then(async (tool) => {
  process.stdout.write("ready\\n");
  const request = JSON.parse(readFileSync(0, "utf8"));
  for (const name of Object.keys(process.env)) if (!(name in request.env)) delete process.env[name];
  Object.assign(process.env, request.env);
  const value = await tool.run(...request.order.map((name) => request.arguments[name]));
  writeFileSync(process.env.LLM_OUTPUT, String(value));
  process.exit(0);
});
"""
SHARED_CJS = """"use strict";
// A shared worker: one process, the tool imported once, one JSON line in and one out per call.
const { pathToFileURL } = require("node:url");
const { createInterface } = require("node:readline");
import(pathToFileURL(process.argv[2]).href).then((tool) => {
  process.stdout.write("ready\\n");
  createInterface({ input: process.stdin }).on("line", async (line) => {
    const request = JSON.parse(line);
    const value = await tool.run(...request.order.map((name) => request.arguments[name]));
    process.stdout.write(JSON.stringify({ output: String(value) }) + "\\n");
  });
});
"""
THREADS_CJS = """"use strict";
// One process; each call a fresh Worker thread that imports the tool (its own module instance) and runs it.
const { Worker } = require("node:worker_threads");
const { createInterface } = require("node:readline");
const body = `
const { workerData, parentPort } = require("node:worker_threads");
import(workerData.url).then(async (tool) => {
  const r = workerData.request;
  parentPort.postMessage(String(await tool.run(...r.order.map((name) => r.arguments[name]))));
});`;
const url = require("node:url").pathToFileURL(process.argv[2]).href;
process.stdout.write("ready\\n");
createInterface({ input: process.stdin }).on("line", (line) => {
  const worker = new Worker(body, { eval: true, workerData: { url, request: JSON.parse(line) } });
  worker.once("message", (output) => {
    process.stdout.write(JSON.stringify({ output }) + "\\n");
    worker.terminate();
  });
});
"""
SNAPSHOT_ENTRY = """"use strict";
// The bootstrap's work in a startup snapshot: node deserializes it instead of running it. A snapshot's main has no
// import(): the tool is loaded by require(esm), so a tool with top-level await could not run this way.
const { readFileSync, writeFileSync } = require("node:fs");
const { createRequire } = require("node:module");
const v8 = require("node:v8");
v8.startupSnapshot.setDeserializeMainFunction(async () => {
  const request = JSON.parse(readFileSync(0, "utf8"));
  const tool = createRequire(process.argv[1])(process.argv[1]);
  writeFileSync(process.env.LLM_OUTPUT, String(await tool.run(...request.order.map((n) => request.arguments[n]))));
  process.exit(0);
});
"""


# A tool that imports a large library (the OpenTelemetry SDK `make test` installs), for the compile cache's row.
OTEL_NODE = harness.REPO / ".venv" / "otel-node"
HEAVY_MJS = """import { createRequire } from "node:module";
const require = createRequire(%r);
const sdk = require("@opentelemetry/sdk-trace-base");
const conventions = require("@opentelemetry/semantic-conventions/incubating");
export function run(text) {
  return text + Object.keys(sdk).length + Object.keys(conventions).length;
}
"""


def paired(ours: Callable[[], object], theirs: Callable[[], object], runs: int) -> harness.Paired:
    return harness.paired_ms(ours, theirs, runs)


def paired_cpu(ours: Callable[[], object], theirs: Callable[[], object], runs: int) -> harness.Paired:
    """As :func:`paired`, in CPU milliseconds (user + system of the finished children) instead of wall time."""

    def cpu(action: Callable[[], object]) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        action()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000

    ours(), theirs()
    samples = [(cpu(ours), cpu(theirs)) for _ in range(runs)]
    return harness.Paired(
        statistics.median(o for o, _ in samples),
        statistics.median(t for _, t in samples),
        statistics.median(o / t for o, t in samples),
        statistics.median(o - t for o, t in samples),
    )


class Spare:
    """A pre-warmed spare node: started ahead, the tool imported, waiting for its one call."""

    def __init__(self, node: str, script: Path, tool: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [node, str(script), str(tool)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True
        )
        assert self.proc.stdout is not None
        self.ready = self.proc.stdout.readline() == b"ready\n"

    def call(self, request: dict[str, object]) -> None:
        assert self.proc.stdin is not None and self.ready
        self.proc.stdin.write(json.dumps(request).encode())
        self.proc.stdin.close()
        assert self.proc.wait() == 0
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class LineServer:
    """One long-lived node answering one JSON line per request (the shared worker, the thread-per-call host)."""

    def __init__(self, node: str, script: Path, tool: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [node, str(script), str(tool)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == b"ready\n"

    def call(self, request: dict[str, object]) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        assert json.loads(self.proc.stdout.readline())["output"] == "x"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class Figures:
    """Every figure of this module, measured once (``make bench`` and the standalone run print the same)."""

    def __init__(self, root: Path, node: str, toolexec: str, env: dict[str, str], runs: int) -> None:
        self.root, self.node, self.toolexec, self.env, self.runs = root, node, toolexec, env, runs
        tools = root / "functions" / "tools"
        tools.mkdir(parents=True, exist_ok=True)
        (tools / "noop_ts.ts").write_text(NOOP_TS)
        self.configs = {}
        for mode, settings in MODES.items():
            self.configs[mode] = root / f"config-{mode}.yaml"
            self.configs[mode].write_text(json.dumps({"visible_tools": ["noop_ts.ts"], **settings}) + "\n")
        (root / "runner.ts").write_text(RUNNER_TS)
        self.output = root / "output"
        self.output.write_text("")
        self.tool_env = {**env, "LLM_OUTPUT": str(self.output)}
        self.version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()

    def one_shot(self, mode: str = "baseline", *, served: bool = False) -> Callable[[], object]:
        """``toolexec run`` of the no-op TypeScript tool under the sandbox ``mode``; through the running server of
        its config when ``served`` (the run fails loudly unless that server answered), else never tried."""
        argv = [self.toolexec, "--config", str(self.configs[mode]), "run", "noop_ts", '{"text": "x"}']
        if not served:
            return harness.spawn(argv, env={**self.env, "TOOLEXEC_NO_SERVER": "1"})
        sockets = Path(self.env["XDG_RUNTIME_DIR"]) / "toolexec"

        def run() -> None:
            done = subprocess.run(argv, check=True, capture_output=True, env=self.env)
            assert done.stdout == b"x", done

        if not any(sockets.glob("serve-*.sock")):
            raise RuntimeError(f"no server socket in {sockets}")
        return run

    def runner(self) -> Callable[[], object]:
        return harness.spawn([self.node, str(self.root / "runner.ts"), '{"text": "x"}'], env=self.tool_env, cwd=self.root)

    def tsx(self) -> Callable[[], object] | None:
        cli = harness.REPO / ".venv" / "js-runtimes" / "node_modules" / "tsx" / "dist" / "cli.mjs"
        if not cli.exists():
            return None
        tool = self.root / "functions" / "tools" / "noop_ts.ts"
        return harness.spawn([self.node, str(cli), str(tool)], env=self.env)

    def javascript(self) -> Path:
        """The tool's cached JavaScript, as toolexec runs it (its first call transpiles it)."""
        self.one_shot()()
        found = sorted((Path(self.env["XDG_CACHE_HOME"]) / "toolexec").rglob("*noop_ts.ts.*.mjs"))
        assert found, "no transpiled JavaScript of the tool in the cache"
        return found[0]

    def compile_cache(self) -> harness.Paired | None:
        """A call of a tool importing a large library with node's compile cache (as toolexec runs it) and without."""
        from toolexec.runtimes.javascript import BOOTSTRAP, COMPILE_CACHE_VARIABLE

        if not (OTEL_NODE / "node_modules" / "@opentelemetry" / "sdk-trace-base").exists():
            return None
        tool = self.root / "heavy.mjs"
        tool.write_text(HEAVY_MJS % str(OTEL_NODE / "package.json"))
        request = self.root / "request.json"
        request.write_text(json.dumps(REQUEST))
        cached = {**self.tool_env, COMPILE_CACHE_VARIABLE: str(self.root / "compile-cache")}

        def call(env: dict[str, str]) -> Callable[[], object]:
            def run() -> None:
                with request.open("rb") as stdin:
                    subprocess.run([self.node, str(BOOTSTRAP), str(tool)], stdin=stdin, env=env, check=True, capture_output=True)

            return run

        return paired(call(cached), call(self.tool_env), self.runs)

    def warm(self) -> dict[str, float]:
        """Milliseconds per call of each design, run alternately, call by call."""
        from toolexec.runtimes.javascript import BOOTSTRAP

        tool = self.javascript()
        scripts = {}
        for name, text in (
            ("spare.cjs", SPARE_CJS),
            ("shared.cjs", SHARED_CJS),
            ("threads.cjs", THREADS_CJS),
            ("snap.cjs", SNAPSHOT_ENTRY),
        ):
            scripts[name] = self.root / name
            scripts[name].write_text(text)
        blob = self.root / "bootstrap.blob"
        subprocess.run(
            [self.node, "--snapshot-blob", str(blob), "--build-snapshot", str(scripts["snap.cjs"])],
            check=True,
            capture_output=True,
            cwd=self.root,
        )
        request = json.dumps(REQUEST).encode()
        request_file = self.root / "request.json"
        request_file.write_bytes(request)
        call_env = {**self.tool_env}

        def timed(action: Callable[[], object]) -> Callable[[], float]:
            def measure() -> float:
                started = time.perf_counter()
                action()
                return (time.perf_counter() - started) * 1000

            return measure

        def cold() -> None:
            with request_file.open("rb") as stdin:
                subprocess.run([self.node, str(BOOTSTRAP), str(tool)], stdin=stdin, env=call_env, check=True, capture_output=True)

        def snapshot() -> None:
            with request_file.open("rb") as stdin:
                subprocess.run(
                    [self.node, "--snapshot-blob", str(blob), str(tool)],
                    stdin=stdin,
                    env=call_env,
                    check=True,
                    capture_output=True,
                )

        def new_spare() -> Spare:
            return Spare(self.node, scripts["spare.cjs"], tool, self.env)

        spares = [new_spare()]

        def spare() -> float:
            """The call on a spare that is ready (timed); then the next spare is started (not timed)."""
            current = spares.pop()
            started = time.perf_counter()
            current.call({**REQUEST, "env": call_env})
            elapsed = (time.perf_counter() - started) * 1000
            spares.append(new_spare())
            return elapsed

        shared = LineServer(self.node, scripts["shared.cjs"], tool, self.env)
        threads = LineServer(self.node, scripts["threads.cjs"], tool, self.env)
        designs: dict[str, Callable[[], float]] = {
            "cold": timed(cold),
            "snapshot": timed(snapshot),
            "spare": spare,
            "threads": timed(lambda: threads.call(REQUEST)),
            "shared": timed(lambda: shared.call(REQUEST)),
        }
        samples: dict[str, list[float]] = {name: [] for name in designs}
        try:
            for measure in designs.values():
                measure(), measure()
            for _ in range(self.runs):
                for name, measure in designs.items():
                    samples[name].append(measure())
            # Back to back: each call's spare is started when the previous call returns, so a call waits for it.
            count = max(10, self.runs // 2)
            started = time.perf_counter()
            for _ in range(count):
                new_spare().call({**REQUEST, "env": call_env})
            back_to_back = (time.perf_counter() - started) * 1000 / count
        finally:
            for each in spares:
                each.proc.kill()
                each.proc.wait()
                for pipe in (each.proc.stdin, each.proc.stdout):
                    if pipe is not None:
                        pipe.close()
            shared.close()
            threads.close()
        figures = {name: statistics.median(values) for name, values in samples.items()}
        figures["spare back to back"] = back_to_back
        return figures


def toolexec_warm(root: Path, runs: int, env: dict[str, str]) -> dict[str, tuple[float, float, float]]:
    """An in-process call of the no-op TypeScript tool through toolexec's own warm pool (a node spare per call, started
    ahead) against the same call cold, per sandbox mode: (warm with its spare ready, cold, warm back to back) in ms.
    Calls alternate, each after a pause long enough for the next spare to be ready (the back-to-back figure has none)."""
    saved = {name: os.environ.get(name) for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    os.environ.update({name: env[name] for name in saved if name in env})  # the bench's cache, not the user's
    try:
        return _toolexec_warm(root, runs)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _toolexec_warm(root: Path, runs: int) -> dict[str, tuple[float, float, float]]:
    from toolexec import Executor

    found = {}
    for mode, settings in MODES.items():
        config = root / f"config-warm-{mode}.yaml"
        config.write_text(json.dumps({"visible_tools": ["noop_ts.ts"], **settings}) + "\n")
        with Executor(config, warm=True) as warm, Executor(config, warm=False) as cold:

            def call(executor: Executor) -> float:
                started = time.perf_counter()
                result = executor.call("noop_ts", {"text": "x"})
                elapsed = (time.perf_counter() - started) * 1000
                assert result.output == "x", result
                return elapsed

            call(warm), call(cold)
            samples: list[tuple[float, float]] = []
            for _ in range(runs):
                time.sleep(0.15)  # the next spare's start, off the measured call's path
                samples.append((call(warm), call(cold)))
            back_to_back = [call(warm) for _ in range(max(10, runs // 2))]
        found[mode] = (
            statistics.median(w for w, _ in samples),
            statistics.median(c for _, c in samples),
            statistics.median(back_to_back),
        )
    return found


@contextmanager
def serving(toolexec: str, configs: list[Path], env: dict[str, str]) -> Iterator[None]:
    """A ``toolexec serve`` of each config while the block runs; each must have served a call by its end (a run that
    fell back to a local run silently would otherwise be timed as a served one)."""
    servers = []
    try:
        for config in configs:
            server = subprocess.Popen(
                [toolexec, "--config", str(config), "serve", "--verbose"],
                env=env,
                stdin=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            servers.append(server)
            assert server.stderr is not None
            banner = server.stderr.readline()
            assert banner.startswith("toolexec: serving "), banner
        yield
    finally:
        reports = []
        for server in servers:
            server.terminate()
            reports.append(server.communicate(timeout=60)[1])
    for report in reports:
        served = re.search(r"served (\d+) call", report)
        assert served and int(served.group(1)) > 0, f"a server served no call: {report!r}"


def one_shot_pairs(figures: Figures, runs: int) -> dict[tuple[str, str, str], harness.Paired]:
    """Every one-shot figure, keyed (how: cold or served, sandbox mode, reference: runner or tsx), each pair of our
    run and the reference alternating. Cold runs never try a server; served runs go through a running
    ``toolexec serve`` of their config (issue 25's separate "one-shot with a server running" condition)."""
    references = {"runner": figures.runner(), "tsx": figures.tsx()}
    found: dict[tuple[str, str, str], harness.Paired] = {}

    def measure(how: str) -> None:
        for mode in MODES:
            ours = figures.one_shot(mode, served=how == "served")
            for name, reference in references.items():
                if reference is not None:
                    found[how, mode, name] = paired(ours, reference, runs)

    measure("cold")
    # CPU (user + system) each run costs, which a loaded machine disturbs far less than wall time: only where every
    # process of the run is a waited-for descendant (not under bwrap, whose namespace's init reaps the tool; not
    # through a server, whose child runs the call).
    if references["runner"] is not None:
        found["cold", "off", "runner cpu"] = paired_cpu(figures.one_shot("off"), references["runner"], runs)
    figures.env["XDG_RUNTIME_DIR"] = str(figures.root / "run")
    Path(figures.env["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    with serving(figures.toolexec, list(figures.configs.values()), figures.env):
        measure("served")
    return found


def figures_for(
    root: Path, python: str, env: dict[str, str], runs: int, *, one_shot_only: bool = False
) -> tuple[Figures, dict[str, object]]:
    from toolexec.runtimes.interpreter import bundled_node

    node = bundled_node() or shutil.which("node") or "node"
    toolexec = str(Path(python).parent / "toolexec")
    figures = Figures(root, node, toolexec, dict(env), runs)
    measured: dict[str, object] = {"one-shot": one_shot_pairs(figures, runs)}
    measured["warm"] = {} if one_shot_only else figures.warm()
    measured["toolexec warm"] = {} if one_shot_only else toolexec_warm(root, runs, figures.env)
    measured["compile cache"] = None if one_shot_only else figures.compile_cache()
    return figures, measured


ONE_SHOT_LABELS = {
    ("cold", "baseline"): "",
    ("cold", "off"): ", `sandbox: off`",
    ("served", "baseline"): ", `toolexec serve` running",
    ("served", "off"): ", `toolexec serve` running, `sandbox: off`",
}
ONE_SHOT_NOTES = {
    "cold": "no server: the issue's row (the baseline: every call in a PID namespace of its own, by default)",
    "served": "through a running server (the issue's separate served condition; not the cold row's claim)",
}


def one_shot_rows(pairs: dict[tuple[str, str, str], harness.Paired], node: str) -> list[Row]:
    """The one-shot rows: against ``node runner.ts`` (≤ 1.0x) and against tsx (≥ 2x faster), each on the same Node."""
    from run import Row, ms, ratio_row

    rows = []
    for (how, mode), label in ONE_SHOT_LABELS.items():
        note = ONE_SHOT_NOTES[how] if mode == "baseline" else ""
        runner = pairs.get((how, mode, "runner"))
        if runner is not None:
            rows.append(
                ratio_row(
                    f"TS one-shot `toolexec run`{label}, no-op tool, against the same Node's own type stripping",
                    runner,
                    f"`{node} runner.ts` (a 5-line runner importing the .ts)",
                    1.0,
                    note,
                )
            )
        tsx = pairs.get((how, mode, "tsx"))
        if tsx is not None:
            speedup = 1 / tsx.ratio
            rows.append(
                Row(
                    f"TS one-shot `toolexec run`{label}, no-op tool, against tsx on the same Node",
                    ms(tsx.ours),
                    f"`tsx` (its CLI) on {node}: {ms(tsx.bare)}",
                    f"{speedup:.1f}x faster",
                    "≥ 2x faster",
                    speedup >= 2,
                    note,
                )
            )
    cpu = pairs.get(("cold", "off", "runner cpu"))
    if cpu is not None:
        rows.append(
            Row(
                "TS one-shot `toolexec run`, `sandbox: off`, no-op tool: CPU per run (user + system, all processes)",
                ms(cpu.ours),
                f"`{node} runner.ts`: {ms(cpu.bare)}",
                f"{cpu.ratio:.2f}x",
                note="CPU, which a loaded machine disturbs less than wall time",
            )
        )
    if not any(name == "tsx" for _, _, name in pairs):
        rows.append(Row("TS one-shot vs tsx on the same Node", "", note="tsx not installed (`make .venv/.test` installs it)"))
    return rows


def node_rows(b: Bench) -> list[Row]:
    """The rows of ``make bench`` (benchmarks/run.py)."""
    from run import Row, ms, ratio_row

    root = b.root / "node-bench"
    figures, measured = figures_for(root, b.python, b.env, harness.RUNS)
    node = f"node {figures.version}"
    rows = one_shot_rows(measured["one-shot"], node)  # type: ignore[arg-type]
    warm: dict[str, float] = measured["warm"]  # type: ignore[assignment]
    cold = warm["cold"]
    labels = {
        "snapshot": "cold, from a startup snapshot holding the bootstrap (`--snapshot-blob`)",
        "spare": "pre-warmed spare: a fresh process per call, started ahead with the tool imported",
        "spare back to back": "pre-warmed spare, calls back to back (each waits for its spare's start)",
        "threads": "one process, a fresh worker thread (own module instance) per call",
        "shared": "shared worker: one process runs every call (no isolation)",
    }
    cache = measured["compile cache"]
    if isinstance(cache, harness.Paired):
        rows.append(
            ratio_row(
                "JS call of a tool importing a large library (OpenTelemetry SDK), node's compile cache on",
                cache,
                "the same call without the cache",
                None,
            )
        )
    own: dict[str, tuple[float, float, float]] = measured["toolexec warm"]  # type: ignore[assignment]
    for mode, (spare, cold_call, back_to_back) in own.items():
        label = "" if mode == "baseline" else ", `sandbox: off`"
        rows.append(
            Row(
                f"TS call in-process (`Executor`), warm{label}: a node spare started ahead, ready",
                ms(spare),
                f"the same call cold: {ms(cold_call)}",
                f"{cold_call / spare:.1f}x faster",
                note="a fresh process per call (issue 25's isolating design, built)",
            )
        )
        rows.append(
            Row(
                f"TS call in-process (`Executor`), warm{label}, calls back to back (each waits for its spare)",
                ms(back_to_back),
                f"cold: {ms(cold_call)}",
                f"{back_to_back / cold_call:.2f}x",
            )
        )
    rows.append(Row("JS/TS call, no-op tool, cold (`node node_bootstrap.cjs`, no Python)", ms(cold), note=node))
    for key, label in labels.items():
        rows.append(Row(f"JS/TS call: {label}", ms(warm[key]), f"cold: {ms(cold)}", f"{warm[key] / cold:.2f}x"))
    return rows


def main() -> None:
    if os.environ.get("TOOLEXEC_BENCH_INSTALLED") != "1":
        python = harness.installed_python()
        os.execve(str(python), [str(python), __file__, *sys.argv[1:]], {**os.environ, "TOOLEXEC_BENCH_INSTALLED": "1"})
    numbers = [word for word in sys.argv[1:] if word.isdigit()]
    runs = int(numbers[0]) if numbers else harness.RUNS
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        env = harness.clean_env(XDG_CACHE_HOME=str(root / "xdg-cache"), XDG_CONFIG_HOME=str(root / "xdg-config"))
        figures, measured = figures_for(root / "project", sys.executable, env, runs, one_shot_only="--one-shot" in sys.argv)
        print(f"node {figures.version}, {runs} runs, load average {os.getloadavg()[0]:.2f}")
        pairs: dict[tuple[str, str, str], harness.Paired] = measured["one-shot"]  # type: ignore[assignment]
        references = {"runner": "`node runner.ts`", "tsx": "tsx"}
        for (how, mode, name), pair in pairs.items():
            if name == "runner cpu":
                print(
                    f"one-shot TS `toolexec run` ({how}, sandbox {mode}), CPU per run: {pair.ours:.1f} ms; "
                    f"`node runner.ts`: {pair.bare:.1f} ms; ratio {pair.ratio:.2f}x"
                )
                continue
            print(
                f"one-shot TS `toolexec run` ({how}, sandbox {mode}): {pair.ours:.1f} ms; {references[name]}: "
                f"{pair.bare:.1f} ms; ratio {pair.ratio:.2f}x ({1 / pair.ratio:.2f}x faster)"
            )
        cache = measured["compile cache"]
        if isinstance(cache, harness.Paired):
            print(f"heavy JS tool, compile cache on: {cache.ours:.1f} ms; off: {cache.bare:.1f} ms; ratio {cache.ratio:.2f}x")
        for design, value in measured["warm"].items():  # type: ignore[attr-defined]
            print(f"per call, {design}: {value:.2f} ms")
        for mode, (spare, cold_call, back_to_back) in measured["toolexec warm"].items():  # type: ignore[attr-defined]
            print(
                f"toolexec TS call in-process, sandbox {mode}: warm (spare ready) {spare:.1f} ms; cold {cold_call:.1f} ms "
                f"({cold_call / spare:.1f}x faster); warm back to back {back_to_back:.1f} ms"
            )


if __name__ == "__main__":
    main()
