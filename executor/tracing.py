"""OpenTelemetry for tool calls, by the GenAI semantic conventions (``execute_tool``).

Every call on every surface gets one ``execute_tool {tool}`` span (kind INTERNAL), a child of the
caller's current span (the Python API), of the MCP SDK's ``tools/call`` span (the server), of
``TRACEPARENT`` in toolexec's own environment (the command line, started by a traced program), or
of the carrier a :class:`~toolexec.runtimes.process.CallControl` holds. The tool receives
``TRACEPARENT`` / ``TRACESTATE`` / ``BAGGAGE`` (the OpenTelemetry environment carrier), so a tool
that uses OpenTelemetry continues the trace.

Nothing here is imported, and no OpenTelemetry module either, unless tracing is wanted
(:func:`wanted`): some ``OTEL_*`` variable is set, or the program has imported OpenTelemetry itself.
toolexec configures the SDK only where it is the program (``toolexec run``, ``toolexec mcp``), from
the standard ``OTEL_*`` variables through the SDK's own configurator; a program using the Python API
configures its own, as it would for any library.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from opentelemetry.context import Context
    from opentelemetry.trace import Span

__all__ = ["CAPTURE_VARIABLE", "CARRIER", "Tracing", "configure_from_environment", "wanted"]

# The GenAI conventions' opt-in for content: arguments and results go on spans only when it is "true".
CAPTURE_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# The environment carrier: what a tool receives to continue the trace.
CARRIER = ("TRACEPARENT", "TRACESTATE", "BAGGAGE")
SCOPE = "toolexec"


def _disabled(environ: Mapping[str, str]) -> bool:
    return environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether calls are traced: an ``OTEL_*`` variable is set, or the program imported OpenTelemetry."""
    if _disabled(environ):
        return False
    return "opentelemetry.trace" in sys.modules or any(name.startswith("OTEL_") for name in environ)


def configure_from_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Where toolexec is the program: set the SDK up from the ``OTEL_*`` variables (the SDK's own configurator:
    ``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_*``, ``OTEL_SERVICE_NAME``, …), once, unless a provider is set
    already. Without ``opentelemetry-sdk`` (``pip install 'toolexec[otel]'``) one line on stderr says so."""
    if _disabled(environ) or not any(name.startswith("OTEL_") for name in environ):
        return
    from opentelemetry import trace

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return  # configured already (a host program, or a second call)
    try:
        from opentelemetry.sdk._configuration import _OTelSDKConfigurator
    except ImportError:
        sys.stderr.write("toolexec: OTEL_* is set but opentelemetry-sdk is not installed: pip install 'toolexec[otel]'\n")
        return
    try:
        _OTelSDKConfigurator().configure()
    except Exception as error:  # a missing exporter package, a bad value: calls still run, untraced
        sys.stderr.write(f"toolexec: OpenTelemetry is not set up from the OTEL_* variables: {error}\n")


class Tracing:
    """The tracer and the two instruments, made once per process on first use."""

    _made: Tracing | None = None

    def __init__(self) -> None:
        from opentelemetry import metrics, trace

        self.tracer = trace.get_tracer(SCOPE)
        meter = metrics.get_meter(SCOPE)
        self.duration = meter.create_histogram(
            "gen_ai.execute_tool.duration", unit="s", description="Duration of tool executions"
        )
        self.queue_wait = meter.create_histogram(
            "toolexec.call.queue_wait", unit="s", description="Time a call waited for a slot under max_parallel"
        )

    @staticmethod
    def capture() -> bool:
        """Whether arguments and results go on spans (the conventions' opt-in, read at each call)."""
        return os.environ.get(CAPTURE_VARIABLE, "").strip().lower() == "true"

    @classmethod
    def get(cls) -> Tracing:
        """The process's one instance."""
        if cls._made is None:
            cls._made = Tracing()
        return cls._made

    def start(self, tool: str, call_id: str, carrier: Mapping[str, str] | None) -> tuple[Span, Context]:
        """The call's span, and the context holding it (with the parent's baggage): a child of ``carrier`` when
        given (a CallControl's, or toolexec's own environment on the command line), else of the current span."""
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace import SpanKind

        parent = propagate.extract({k.lower(): v for k, v in carrier.items()}) if carrier else context.get_current()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        span = self.tracer.start_span(f"execute_tool {tool}", context=parent, kind=SpanKind.INTERNAL, attributes=attributes)
        return span, trace.set_span_in_context(span, parent)

    @staticmethod
    def carrier(within: Context) -> dict[str, str]:
        """``TRACEPARENT`` / ``TRACESTATE`` / ``BAGGAGE`` for the tool: the call's span as its parent."""
        from opentelemetry import propagate

        found: dict[str, str] = {}
        propagate.inject(found, context=within)
        return {name: found[name.lower()] for name in CARRIER if found.get(name.lower())}
