"""OpenTelemetry: one ``execute_tool`` span per call on every surface (GenAI conventions), the trace continued
inside the tool through ``TRACEPARENT``, metrics, and nothing of it when unused.

In this process the SDK's in-memory exporter and metric reader are the global providers (set once, for this
module); the CLI and the MCP server in child processes are configured only through the standard ``OTEL_*``
variables and export with the SDK's OTLP exporter to a loopback receiver (:mod:`tests.executor.otel_collector`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import baggage, context, metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.conftest import REPO, Project, cli, toolexec
from tests.executor.otel_collector import Collector
from toolexec import Executor, ToolCall
from toolexec.runtimes.process import CallControl

ECHO = '#!/usr/bin/env bash\n# @describe Echo.\n# @option --text! The text.\nmain() {\n    printf "%s" "$argc_text" >>"$LLM_OUTPUT"\n}\n'
FAIL = "#!/usr/bin/env bash\n# @describe Fail.\nmain() {\n    echo broken >&2\n    exit 3\n}\n"
NAP = 'import time\n\n\ndef run() -> str:\n    """Nap."""\n    time.sleep(30)\n    return "late"\n'
# Run by this venv's Python (the shebang wins), where the OpenTelemetry SDK is installed.
INSIDE = f'''#!{sys.executable}
import json
import os


def run() -> str:
    """Make a span of its own, continuing the trace it was given."""
    from opentelemetry import propagate
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    names = ("TRACEPARENT", "TRACESTATE", "BAGGAGE")
    carrier = {{name.lower(): os.environ[name] for name in names if name in os.environ}}
    with provider.get_tracer("inside-the-tool").start_as_current_span("inside", context=propagate.extract(carrier)):
        pass
    span = exporter.get_finished_spans()[0]
    ids = {{"trace_id": f"{{span.context.trace_id:032x}}", "parent": f"{{span.parent.span_id:016x}}"}}
    return json.dumps({{**ids, "baggage": os.environ.get("BAGGAGE")}})
'''


INSIDE_JS = """import { createRequire } from "node:module";

/**
 * Make a span of its own with OpenTelemetry's Node SDK, continuing the trace it was given.
 */
export function run() {
  const require = createRequire(`${process.env.TEST_OTEL_NODE_MODULES}/`);
  const api = require("@opentelemetry/api");
  const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require("@opentelemetry/sdk-trace-base");
  const { W3CTraceContextPropagator } = require("@opentelemetry/core");
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const carrier = { traceparent: process.env.TRACEPARENT, tracestate: process.env.TRACESTATE ?? "" };
  const parent = new W3CTraceContextPropagator().extract(api.ROOT_CONTEXT, carrier, api.defaultTextMapGetter);
  provider.getTracer("inside-the-tool").startSpan("inside", {}, parent).end();
  const span = exporter.getFinishedSpans()[0];
  return JSON.stringify({ trace_id: span.spanContext().traceId, parent: span.parentSpanContext?.spanId });
}
"""
# Installed by the test set-up (make .venv/.test): OpenTelemetry's Node SDK.
OTEL_NODE = REPO / ".venv" / "otel-node" / "node_modules"


@pytest.fixture(scope="module")
def sdk() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    assert trace.get_tracer_provider() is provider, "another test set a global tracer provider first"
    return exporter, reader


@pytest.fixture
def spans(sdk: tuple[InMemorySpanExporter, InMemoryMetricReader]) -> Iterator[InMemorySpanExporter]:
    sdk[0].clear()
    yield sdk[0]
    sdk[0].clear()


@pytest.fixture
def traced(project: Project) -> Project:
    project.tool("echo.sh", ECHO)
    project.tool("fail.sh", FAIL)
    project.tool("nap.py", NAP)
    project.tool("inside.py", INSIDE)
    project.tool("inside_js.js", INSIDE_JS)
    project.configure()
    return project


def tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith("execute_tool ")]


def hex_id(value: int, width: int = 16) -> str:
    return f"{value:0{width}x}"


def test_an_api_call_is_one_span_under_the_callers_span(traced: Project, spans: InMemorySpanExporter) -> None:
    tracer = trace.get_tracer("agent")
    with Executor(traced.config) as ex, tracer.start_as_current_span("agent turn") as turn:
        result = ex.call("echo", {"text": "hi"}, call_id="call_1")
    assert result.output == "hi"
    (span,) = tool_spans(spans)
    assert span.name == "execute_tool echo"
    assert span.kind == SpanKind.INTERNAL
    assert span.parent is not None and span.parent.span_id == turn.get_span_context().span_id
    assert span.context.trace_id == turn.get_span_context().trace_id
    attributes = dict(span.attributes or {})
    pid = attributes.pop("process.pid")
    assert isinstance(pid, int) and pid > 1
    assert attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "process.executable.name": "bash",
        "process.exit.code": 0,
    }
    assert span.status.status_code == StatusCode.UNSET
    assert [event.name for event in span.events] == []


def test_refusals_failures_and_timeouts_carry_typed_error_types(traced: Project, spans: InMemorySpanExporter) -> None:
    with Executor(traced.config) as ex:
        refused = ex.call("echo", {})
        failed = ex.call("fail", {})
        late = ex.call("nap", {}, timeout=0.5)
        unknown = ex.call("nope", {})
    assert (refused.reason, failed.reason, late.reason, unknown.reason) == (
        "invalid_arguments",
        "tool_failed",
        "timeout",
        "unknown_tool",
    )
    by_name = {span.name: span for span in tool_spans(spans)}
    assert sorted(by_name) == ["execute_tool echo", "execute_tool fail", "execute_tool nap", "execute_tool nope"]
    for name, reason, events in [
        ("echo", "invalid_arguments", ["toolexec.validation_failed"]),
        ("fail", "tool_failed", []),
        ("nap", "timeout", ["toolexec.limit_hit"]),
        ("nope", "unknown_tool", []),
    ]:
        span = by_name[f"execute_tool {name}"]
        assert span.attributes is not None
        assert (span.attributes["error.type"], span.status.status_code) == (reason, StatusCode.ERROR), name
        assert [event.name for event in span.events] == events, name
    assert by_name["execute_tool fail"].attributes["process.exit.code"] == 3  # type: ignore[index]
    assert "process.pid" not in by_name["execute_tool echo"].attributes  # type: ignore[operator]  # refused: nothing ran
    validation = by_name["execute_tool echo"].events[0].attributes
    assert validation is not None and validation["message"] == refused.error


def test_the_trace_continues_inside_a_python_tool(traced: Project, spans: InMemorySpanExporter) -> None:
    token = context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with Executor(traced.config) as ex:
            result = ex.call("inside", {})
    finally:
        context.detach(token)
    assert result.ok, result
    (span,) = tool_spans(spans)
    seen = json.loads(result.output)
    assert seen == {
        "trace_id": hex_id(span.context.trace_id, 32),
        "parent": hex_id(span.context.span_id),
        "baggage": "tenant=acme",
    }


def test_the_trace_continues_inside_a_javascript_tool(
    traced: Project, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (OTEL_NODE / "@opentelemetry" / "sdk-trace-base").is_dir():
        pytest.skip("OpenTelemetry's Node SDK is not installed (make .venv/.test installs it)")
    monkeypatch.setenv("TEST_OTEL_NODE_MODULES", str(OTEL_NODE))
    with Executor(traced.config) as ex:
        result = ex.call("inside_js", {})
    assert result.ok, result
    (span,) = tool_spans(spans)
    assert json.loads(result.output) == {"trace_id": hex_id(span.context.trace_id, 32), "parent": hex_id(span.context.span_id)}


def test_a_call_control_carrier_and_batches(traced: Project, spans: InMemorySpanExporter) -> None:
    remote = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with Executor(traced.config) as ex:
        control = CallControl(trace={"traceparent": remote})
        try:
            ex.call("echo", {"text": "a"}, cancel=control)
        finally:
            control.close()
        ex.call_many([ToolCall(name="echo", arguments={"text": str(i)}, call_id=f"b{i}") for i in range(3)])
        asyncio.run(ex.acall("echo", {"text": "async"}, call_id="async_1"))
    found = tool_spans(spans)
    assert len(found) == 5
    first = found[0]
    assert hex_id(first.context.trace_id, 32) == "0af7651916cd43dd8448eb211c80319c"
    assert first.parent is not None and hex_id(first.parent.span_id) == "b7ad6b7169203331"
    assert sorted(str((s.attributes or {})["gen_ai.tool.call.id"]) for s in found[1:]) == ["async_1", "b0", "b1", "b2"]


def test_content_is_captured_only_when_opted_in(
    traced: Project, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Executor(traced.config) as ex:
        ex.call("echo", {"text": "secret"})
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        ex.call("echo", {"text": "shown"})
    plain, captured = tool_spans(spans)
    assert not {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} & set(plain.attributes or {})
    assert captured.attributes is not None
    assert (captured.attributes["gen_ai.tool.call.arguments"], captured.attributes["gen_ai.tool.call.result"]) == (
        '{"text": "shown"}',
        "shown",
    )


def test_duration_and_queue_wait_metrics(traced: Project, sdk: tuple[InMemorySpanExporter, InMemoryMetricReader]) -> None:
    reader = sdk[1]
    reader.get_metrics_data()  # what earlier tests recorded is collected (cumulative: compare counts)

    def counts() -> dict[str, dict[tuple[tuple[str, Any], ...], int]]:
        found: dict[str, dict[tuple[tuple[str, Any], ...], int]] = {}
        data = reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        found.setdefault(metric.name, {})[tuple(sorted(point.attributes.items()))] = point.count  # type: ignore[union-attr]
        return found

    before = counts()
    with Executor(traced.config) as ex:
        ex.call("echo", {"text": "x"})
        ex.call("fail", {})
    after = counts()
    ok = (("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "echo"))
    failed = (("error.type", "tool_failed"), ("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "fail"))
    duration_before = before.get("gen_ai.execute_tool.duration", {})
    assert after["gen_ai.execute_tool.duration"][ok] == duration_before.get(ok, 0) + 1
    assert after["gen_ai.execute_tool.duration"][failed] == duration_before.get(failed, 0) + 1
    wait = (("gen_ai.tool.name", "echo"),)
    assert after["toolexec.call.queue_wait"][wait] == before.get("toolexec.call.queue_wait", {}).get(wait, 0) + 1


def test_a_cli_call_continues_the_trace_in_its_environment(
    traced: Project, spans: InMemorySpanExporter, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEPARENT", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    assert cli(capsys, "--config", str(traced.config), "run", "echo", '{"text": "cli"}')[:2] == (0, "cli")
    (span,) = tool_spans(spans)
    assert hex_id(span.context.trace_id, 32) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert span.parent is not None and hex_id(span.parent.span_id) == "00f067aa0ba902b7"


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    yield receiver
    receiver.close()


def test_the_cli_exports_through_the_otel_variables(traced: Project, collector: Collector) -> None:
    done = toolexec("--config", str(traced.config), "run", "inside", "{}", env=collector.environment())
    assert (done.returncode, done.stderr) == (0, "")
    (span,) = collector.wait_for("execute_tool inside")
    assert (span["scope"], span["kind"], span["parent_span_id"]) == ("toolexec", 1, "")  # INTERNAL; a root here
    assert span["attributes"]["gen_ai.tool.name"] == "inside"
    assert span["attributes"]["process.executable.name"] == os.path.basename(sys.executable)
    seen = json.loads(done.stdout)
    assert (seen["trace_id"], seen["parent"]) == (span["trace_id"], span["span_id"])


def test_an_mcp_call_is_a_child_of_the_sdks_tools_call_span(
    traced: Project, collector: Collector, spans: InMemorySpanExporter
) -> None:
    """The agent's span → the SDK client's ``tools/call`` span (here) → the SDK server's (there, continued from
    ``_meta``) → toolexec's ``execute_tool`` → the tool's own process."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def scenario() -> str:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "toolexec", "--config", str(traced.config), "mcp"],
            env={**os.environ, **collector.environment()},
            cwd=str(traced.root),
        )
        async with Client(stdio_client(params), mode="legacy") as client:
            result = await client.call_tool("echo", {"text": "mcp"})
        return result.content[0].text  # type: ignore[union-attr]

    with trace.get_tracer("agent").start_as_current_span("agent turn") as turn:
        assert asyncio.run(scenario()) == "mcp"
    trace_id = hex_id(turn.get_span_context().trace_id, 32)
    (client_span,) = [s for s in spans.get_finished_spans() if s.name.startswith("MCP send tools/call")]
    assert client_span.kind == SpanKind.CLIENT and client_span.parent is not None
    assert client_span.parent.span_id == turn.get_span_context().span_id
    (server,) = collector.wait_for("tools/call echo")
    (ours,) = collector.wait_for("execute_tool echo")
    assert (server["trace_id"], server["parent_span_id"]) == (trace_id, hex_id(client_span.context.span_id))
    assert (ours["trace_id"], ours["parent_span_id"]) == (trace_id, server["span_id"])
    assert ours["attributes"]["gen_ai.tool.call.id"].startswith("call_")
