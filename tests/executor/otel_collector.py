"""A loopback OTLP/HTTP receiver for tests: what a toolexec process (CLI, MCP server) exports, decoded.

It is what an OpenTelemetry Collector is to a real deployment: the process under test is configured
only through the standard ``OTEL_*`` variables (:meth:`Collector.environment`) and exports with the
SDK's own OTLP exporter; the spans arrive here as protobuf and are read with ``opentelemetry-proto``.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind is not None else None


class Collector:
    """``POST /v1/traces`` (and ``/v1/metrics``, ``/v1/logs``, accepted and dropped) on 127.0.0.1."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/v1/traces":
                    collector._receive(ExportTraceServiceRequest.FromString(body))
                    reply = ExportTraceServiceResponse().SerializeToString()
                else:
                    reply = b""
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def environment(self) -> dict[str, str]:
        """The standard variables that point a process's OpenTelemetry SDK here."""
        return {
            "OTEL_SERVICE_NAME": "toolexec-under-test",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.url,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }

    def _receive(self, request: ExportTraceServiceRequest) -> None:
        with self.lock:
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            {
                                "name": span.name,
                                "scope": scope_spans.scope.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "kind": span.kind,
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                                "status": span.status.code,
                                "events": [event.name for event in span.events],
                            }
                        )

    def wait_for(self, name: str, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The spans called ``name``, once ``count`` of them have arrived."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                found = [span for span in self.spans if span["name"] == name]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.05)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
