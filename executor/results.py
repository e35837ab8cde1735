"""The wording of results: Loki's strings, notes and refusals, in one place.

A model reads what it would read under Loki (``Tool call 'x' exited with code 1``), and
every failure carries a ``reason`` from a closed vocabulary that callers can act on.
"""

from __future__ import annotations

import time

from toolexec.errors import EXIT_CANCELLED, EXIT_TIMEOUT, ToolexecError
from toolexec.records import ToolResult

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from toolexec.records import InputRequest, Reason, Status
    from toolexec.runtimes.process import Capture, Finished


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.monotonic()`` reading), to one decimal."""
    return round((time.monotonic() - started) * 1000, 1)


def refusal(name: str, call_id: str, error: ToolexecError, started: float) -> ToolResult:
    """The result of a call toolexec did not run (or could not finish preparing): the error's own mapping."""
    message = str(error)
    return ToolResult(
        ok=False,
        status=error.status,
        output="",
        error=message,
        exit_code=error.exit_code,
        stderr="",
        duration_ms=elapsed_ms(started),
        tool_call_id=call_id,
        tool_name=name,
        tool_call_error=f"Tool call '{name}' failed: {message.splitlines()[0] if message else type(error).__name__}",
        reason=error.reason,
    )


def asking_result(name: str, call_id: str, asked: InputRequest | ToolexecError, started: float) -> ToolResult:
    """The result of a run that asked ``asked`` (status ``input_required``), or whose request was malformed (the
    tool's failure, ``asked`` the error saying what is wrong with it)."""
    if isinstance(asked, ToolexecError):
        message, status, reason, request = str(asked), "error", "tool_failed", None
    else:
        message = f"Tool call '{name}' asks for input ({asked.key}): {asked.message}"
        status, reason, request = "input_required", "input_required", asked
    return ToolResult(
        ok=False,
        status=status,  # type: ignore[arg-type]
        output="",
        error=message,
        exit_code=None,
        stderr="",
        duration_ms=elapsed_ms(started),
        tool_call_id=call_id,
        tool_name=name,
        tool_call_error=message,
        reason=reason,  # type: ignore[arg-type]
        input_request=request,
    )


def outcome(
    name: str,
    call_id: str,
    finished: Finished,
    output: Capture,
    *,
    timeout: float,
    failure: str | None,
    started: float,
    notes: tuple[str, ...] = (),
    broken_output: bool = False,
) -> ToolResult:
    """The result of a call that ran: its status, Loki's wording, the error and the notes.

    ``failure`` is what the bootstrap reported on its private channel (an exception's type and
    message); without one, the error quotes the last line of the tool's stderr.
    """
    text, lossy = output.text()
    stderr, stderr_lossy = finished.stderr.text()
    status, code, reason, loki = _ending(name, finished, timeout=timeout, broken_output=broken_output)
    detail = failure or next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    error = None if loki is None else (f"{loki}: {detail}" if detail else loki)
    return ToolResult(
        ok=status == "ok",
        status=status,
        output=text,
        error=error,
        exit_code=code,
        stderr=stderr,
        duration_ms=elapsed_ms(started),
        tool_call_id=call_id,
        tool_name=name,
        signal=finished.signal,
        tool_call_error=loki,
        notes=(*notes, *_notes(finished, output, lossy or stderr_lossy)),
        output_file=output.spilled,
        stderr_file=finished.stderr.spilled,
        reason=reason,
    )


def _ending(
    name: str, finished: Finished, *, timeout: float, broken_output: bool
) -> tuple[Status, int, Reason | None, str | None]:
    """How the call ended: status, exit code, reason and Loki's sentence for it (None when it succeeded)."""
    if finished.timed_out:
        return "timeout", EXIT_TIMEOUT, "timeout", f"Tool call '{name}' timed out after {timeout:g}s"
    if finished.limit is not None:
        kind, limit = finished.limit
        code = 128 + finished.signal if finished.signal is not None else finished.returncode or 1
        if kind == "file":
            return (
                "error",
                code,
                "file_limit",
                f"Tool call '{name}' was stopped: it wrote a file past max_kept_bytes ({limit} bytes)",
            )
        return (
            "error",
            code,
            "cache_limit",
            f"Tool call '{name}' was stopped: LLM_TOOL_CACHE_DIR passed max_cache_bytes ({limit} bytes)",
        )
    if finished.cancelled:
        return "cancelled", EXIT_CANCELLED, "cancelled", f"Tool call '{name}' was cancelled"
    if finished.signal is not None:
        return "error", 128 + finished.signal, "tool_failed", f"Tool call '{name}' was killed by signal {finished.signal}"
    if finished.returncode:
        return "error", finished.returncode, "tool_failed", f"Tool call '{name}' exited with code {finished.returncode}"
    if broken_output:
        return "error", 1, "tool_failed", f"Tool call '{name}' failed"
    return "ok", 0, None, None


def _notes(finished: Finished, output: Capture, lossy: bool) -> list[str]:
    notes = []
    if lossy:
        notes.append("output was not valid UTF-8; invalid bytes were replaced with U+FFFD")
    if finished.escaped:
        notes.append(f"killed {finished.escaped} process(es) the tool left running outside its process group")
    for what, capture in (("output", output), ("stderr", finished.stderr)):
        if not capture.spilled:
            continue
        longer = f"{what} was longer than max_output_bytes" + (f" ({capture.limit})" if what == "output" else "")
        middle = "; the middle was dropped" if what == "output" else ""
        if capture.unkept:
            notes.append(
                f"{longer}{middle}; its first {capture.kept} bytes are in {capture.spilled}, "
                f"the last {capture.unkept} were dropped (max_kept_bytes)"
            )
        else:
            notes.append(f"{longer}{middle}; all of it is in {capture.spilled}")
    return notes
