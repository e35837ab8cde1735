"""What the call path tells the outside about each call: its OpenTelemetry span and metrics, and its audit line.

:meth:`toolexec.calls.Calls.prepare` starts an :class:`Observation` for every call when tracing is
wanted (:func:`toolexec.tracing.wanted`) or ``audit_log`` is set, and ends it with the call's
result wherever the result is made (a refusal, a denial, a cancellation, a run), so each call has
exactly one span and one audit line on every surface. With neither, no observation is made and
nothing of this costs a call anything.
"""

from __future__ import annotations

import os
import time

from toolexec.records import Caller

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from toolexec.config import Config
    from toolexec.records import ToolResult
    from toolexec.runtimes.process import Finished
    from toolexec.sources import Snapshot
    from toolexec.tracing import Tracing

__all__ = ["Caller", "Observation", "observe"]

# Reasons that mean a bound stopped the tool: a span event says which.
LIMIT_REASONS = ("timeout", "file_limit", "cache_limit", "memory_limit", "cpu_limit", "process_limit", "file_size_limit")


def _os_user() -> str | None:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return os.environ.get("USER") or os.environ.get("USERNAME")


def observe(
    config: Config, name: Any, call_id: str, caller: Caller | None, carrier: Mapping[str, str] | None
) -> Observation | None:
    """The observation of one call, or None when neither tracing nor the audit log wants it."""
    from toolexec.tracing import wanted  # a small leaf; OpenTelemetry itself only when wanted

    tracing = wanted()
    if not tracing and config.audit_log is None:
        return None
    caller = caller or Caller(surface="api")
    if caller.surface == "cli" and caller.user is None:
        caller = Caller(surface="cli", user=_os_user())
    if carrier is None and caller.surface == "cli":  # toolexec is the program: its own environment is the carrier
        carrier = {k: v for k in ("TRACEPARENT", "TRACESTATE", "BAGGAGE") if (v := os.environ.get(k))} or None
    return Observation(
        config, name if isinstance(name, str) else str(name), call_id, caller, carrier if tracing else None, tracing
    )


class Observation:
    """One call's span and audit line, from :func:`observe` to :meth:`finish`."""

    def __init__(
        self, config: Config, name: str, call_id: str, caller: Caller, carrier: Mapping[str, str] | None, tracing: bool
    ) -> None:
        self.config = config
        self.name = name
        self.call_id = call_id
        self.caller = caller
        self.wall = time.time()
        self.started = time.monotonic()
        self.tracing: Tracing | None = None
        self.span: Span | None = None
        self.context: Context | None = None
        self.finished = False
        if tracing:
            from toolexec.tracing import Tracing

            self.tracing = Tracing.get()
            self.span, self.context = self.tracing.start(self.name, call_id, carrier)

    def environment(self) -> dict[str, str]:
        """``TRACEPARENT`` (and ``TRACESTATE``, ``BAGGAGE``) for the tool: its spans continue the call's trace."""
        if self.tracing is None or self.context is None:
            return {}
        return self.tracing.carrier(self.context)

    def queued(self, seconds: float) -> None:
        """The time the call waited for a slot under ``max_parallel``."""
        if self.tracing is not None:
            self.tracing.queue_wait.record(seconds, {"gen_ai.tool.name": self.name})

    def launched(self, argv: Sequence[str], finished: Finished) -> None:
        """The process facts of a call that ran: its pid, program, exit code, escapees killed, a bound hit."""
        if self.span is None:
            return
        attributes: dict[str, Any] = {"process.executable.name": os.path.basename(argv[0]) if argv else ""}
        if finished.pid is not None:
            attributes["process.pid"] = finished.pid
        if finished.returncode is not None:
            attributes["process.exit.code"] = finished.returncode
        self.span.set_attributes(attributes)
        if finished.escaped:
            self.span.add_event("toolexec.escapees_killed", {"count": finished.escaped})

    def finish(self, result: ToolResult, snapshot: Snapshot | None = None, arguments: Any = None) -> None:
        """End the span and write the audit line (once; a second finish is ignored)."""
        if self.finished:
            return
        self.finished = True
        seconds = time.monotonic() - self.started
        if isinstance(arguments, (str, bytes)):  # refused before it was parsed: as parsed when it is JSON
            arguments = _parsed(arguments)
        if self.span is not None and self.tracing is not None:
            self._end_span(result, seconds, arguments)
        if self.config.audit_log is not None:
            self._audit(result, snapshot, arguments, seconds)

    def _end_span(self, result: ToolResult, seconds: float, arguments: Any) -> None:
        from opentelemetry.trace import StatusCode

        assert self.span is not None and self.tracing is not None
        span = self.span
        error_type = None if result.ok else (result.reason or result.status)
        if result.reason == "invalid_arguments":
            span.add_event("toolexec.validation_failed", {"message": result.error or ""})
        elif result.reason in LIMIT_REASONS:
            span.add_event("toolexec.limit_hit", {"reason": result.reason, "message": result.error or ""})
        if self.tracing.capture():
            import json

            if arguments is not None:
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments, ensure_ascii=False, default=str))
            if result.ok:
                span.set_attribute("gen_ai.tool.call.result", result.output)
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self.name}
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            span.set_status(StatusCode.ERROR, (result.error or "").split("\n", 1)[0])
            attributes["error.type"] = error_type
        span.end()
        self.tracing.duration.record(seconds, attributes)

    def _audit(self, result: ToolResult, snapshot: Snapshot | None, arguments: Any, seconds: float) -> None:
        from toolexec.audit import append_line, digest, timestamp

        config = self.config
        assert config.audit_log is not None
        line: dict[str, Any] = {
            "time": timestamp(self.wall),
            "tool": self.name,
            "call_id": self.call_id,
            "arguments_digest": digest(arguments),
        }
        if config.audit_arguments:
            line["arguments"] = arguments
        line |= {
            "outcome": result.status,
            "reason": result.reason,
            "exit_code": result.exit_code,
            "duration_ms": round(seconds * 1000, 1),
            "caller": self.caller.to_dict(),
        }
        if snapshot is not None:
            from toolexec.policy import describe, effective

            tool = snapshot.declaration
            config_then = snapshot.config
            policy = effective(config_then.sandbox, config_then.sandbox_policies, tool.name, tool.metadata.sandbox)
            if policy is not None:
                line["sandbox"] = describe(policy)
        try:
            append_line(config.audit_log, line)
        except OSError as error:  # the call's result stands; the operator is told where toolexec's stderr goes
            import sys

            sys.stderr.write(f"toolexec: cannot append to the audit log {config.audit_log}: {error.strerror or error}\n")


def _parsed(text: str | bytes) -> Any:
    """The JSON value of arguments sent as text, or the text itself when it is not JSON."""
    import json

    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past what Python reads: the text as sent
        return text if isinstance(text, str) else text.decode("utf-8", "replace")
