"""Per-call cost of tracing: the same in-process no-op Bash call, untraced and traced, side by side.

    python benchmarks/tracing_bench.py [RUNS]

Traced: the OpenTelemetry SDK's TracerProvider and MeterProvider are set (as ``toolexec run`` sets them from
``OTEL_*``), with no exporter, so what is measured is toolexec's span, its attributes, the tool's carrier and
the two metrics, not an exporter's network. Untraced: what a program without OpenTelemetry pays (no
observation is made). The two alternate call by call in one process (``toolexec.tracing.wanted`` is switched
between them); medians of each and the median of the adjacent differences. Target: ≤ +0.5 ms.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

import toolexec.tracing
from toolexec import Executor

NOOP_SH = '#!/usr/bin/env bash\n# @describe Do nothing.\nmain() { echo ok; }\neval "$(argc --argc-eval "$0" "$@")"\n'


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 201
    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider())
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "functions" / "tools").mkdir(parents=True)
        (root / "functions" / "tools" / "noop.sh").write_text(NOOP_SH)
        (root / "config.yaml").write_text(yaml.safe_dump({"visible_tools": ["noop.sh"]}))
        times: dict[bool, list[float]] = {False: [], True: []}
        with Executor(root / "config.yaml") as executor:
            for traced in (False, True, False, True):  # warm both paths
                toolexec.tracing.wanted = lambda traced=traced, *_: traced  # type: ignore[misc]
                assert executor.call("noop", {}).ok
            for _ in range(runs):
                for traced in (False, True):
                    toolexec.tracing.wanted = lambda traced=traced, *_: traced  # type: ignore[misc]
                    start = time.perf_counter()
                    executor.call("noop", {})
                    times[traced].append((time.perf_counter() - start) * 1000)
    added = statistics.median(b - a for a, b in zip(times[False], times[True], strict=True))
    print("| measure | untraced | traced (SDK, no exporter) | added (median of pairs) | target ≤ +0.5 ms |")
    print("| --- | --- | --- | --- | --- |")
    untraced, traced_ms = statistics.median(times[False]), statistics.median(times[True])
    met = "met" if added <= 0.5 else "**not met**"
    print(f"| no-op Bash tool, in-process `Executor.call` | {untraced:.2f} ms | {traced_ms:.2f} ms | +{added:.2f} ms | {met} |")


if __name__ == "__main__":
    main()
