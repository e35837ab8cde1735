"""The call engine: one :class:`ToolCall` in, one :class:`ToolResult` out.

Refusals (unknown tool, bad arguments), a missing interpreter and a failing
tool all come back as results, so a batch, the MCP server and a Python agent
can hand them straight to a model.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from toolexec.catalog import Catalog
from toolexec.config import Config, is_positive
from toolexec.errors import BadRequest, CallRefused, RuntimeUnavailable
from toolexec.records import Status, ToolCall, ToolDeclaration, ToolResult
from toolexec.runtimes import Cancellation, Capture, Context, Finished, Launch, Runtime, run_process, runtime_for
from toolexec.runtimes.environment import dotenv_values, tool_environment
from toolexec.runtimes.interpreter import resolve
from toolexec.validation import parse_arguments, validate_arguments

EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_TIMEOUT, EXIT_CANCELLED = 2, 127, 124, 130
OUTPUT_RETENTION_SECONDS = 24 * 3600  # full outputs of capped calls in <state>/cache/.outputs/


class Engine:
    def __init__(self, config: Config, catalog: Catalog) -> None:
        self.config = config
        self.catalog = catalog

    def invoke(self, call: ToolCall, cancel: Cancellation | None = None) -> ToolResult:
        started = time.monotonic()
        call_id = call.call_id or f"call_{os.urandom(12).hex()}"
        try:
            if call.timeout is not None and not is_positive(call.timeout):
                raise BadRequest(f"timeout must be a positive number of seconds, got {call.timeout!r}")
            declaration = self.catalog.get_enabled(call.name, self.config)
            arguments = parse_arguments(call.arguments, call.name)
            validate_arguments(declaration.name, declaration.parameters, arguments)
            runtime = runtime_for(declaration.language)
            context = Context(functions_dir=self.config.functions_dir, cwd=Path.cwd(), state_dir=self.config.state_dir)
            interpreter = resolve(self._interpreter(declaration, runtime, context), declaration.language)
        except CallRefused as refusal:
            return _failure(call, call_id, "refused", str(refusal), EXIT_REFUSED, started)
        except RuntimeUnavailable as missing:
            return _failure(call, call_id, "unavailable", str(missing), EXIT_UNAVAILABLE, started)
        return self._run(declaration, arguments, runtime, interpreter, context, call, call_id, cancel, started)

    def _interpreter(self, declaration: ToolDeclaration, runtime: Runtime, context: Context) -> list[str]:
        if declaration.shebang:
            return list(declaration.shebang)
        if declaration.language in self.config.runtimes:
            return list(self.config.runtimes[declaration.language])
        return runtime.default_interpreter(context)

    def _outputs_dir(self) -> Path:
        return self.config.state_dir / "cache" / ".outputs"

    def _run(
        self,
        declaration: ToolDeclaration,
        arguments: dict,
        runtime: Runtime,
        interpreter: list[str],
        context: Context,
        call: ToolCall,
        call_id: str,
        cancel: Cancellation | None,
        started: float,
    ) -> ToolResult:
        cache_dir = self.config.cache_dir(declaration.name)
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, output_path = tempfile.mkstemp(prefix=f"toolexec-{declaration.name}-", suffix=".out")
        os.close(fd)
        try:
            env = tool_environment(
                os.environ,
                functions_dir=self.config.functions_dir,
                cache_dir=cache_dir,
                tool=declaration.name,
                call_id=call_id,
                output_path=output_path,
                dotenv=dotenv_values(self.config.functions_dir),
            )
            try:
                refusal = runtime.preflight(declaration, env)
                if refusal:
                    raise CallRefused(refusal)
                stdin = runtime.stdin(declaration, arguments)
                argv = runtime.command(declaration, interpreter, context)
            except CallRefused as refused:
                return _failure(call, call_id, "refused", str(refused), EXIT_REFUSED, started)
            except RuntimeUnavailable as missing:
                return _failure(call, call_id, "unavailable", str(missing), EXIT_UNAVAILABLE, started)
            timeout = call.timeout or declaration.meta.get("timeout") or self.config.timeout
            limit = int(declaration.meta.get("max_output_bytes") or self.config.max_output_bytes)
            launch = Launch(
                argv=argv,
                env=env,
                stdin=stdin,
                timeout=timeout,
                capture_limit=limit,
                spill_dir=str(self._outputs_dir()),
            )
            try:
                finished = run_process(launch, cancel)
            except OSError as exc:
                message = f"cannot start {launch.argv[0]!r}: {exc.strerror or exc}"
                return _failure(call, call_id, "unavailable", message, EXIT_UNAVAILABLE, started)
            output = read_capped(output_path, limit)
            if not output.total and finished.stdout.total:
                output = finished.stdout  # the tool printed instead of writing LLM_OUTPUT
            else:
                _discard(finished.stdout.spilled)  # stdout is not the result: no file of it is kept
            if output.dropped and output.spill is None:  # keep the whole of it, named in the result
                output.spill = str(self._outputs_dir() / f"{call_id}.output")
                os.makedirs(self._outputs_dir(), exist_ok=True)
                shutil.move(output_path, output.spill)
            if output.spilled or finished.stderr.spilled:
                _prune(self._outputs_dir(), keep_seconds=OUTPUT_RETENTION_SECONDS)
            return _result(declaration, call_id, finished, output, timeout, started)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(output_path)


def _prune(directory: Path, keep_seconds: float) -> None:
    """Remove the full outputs older than ``keep_seconds``: what results named stays readable for a day."""
    cutoff = time.time() - keep_seconds
    with contextlib.suppress(FileNotFoundError), os.scandir(directory) as entries:
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                if entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)


def _discard(path: str | None) -> None:
    if path:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def read_capped(path: str, limit: int) -> Capture:
    """The file's bytes within ``limit`` (head and tail), never all of a huge file in memory."""
    capture = Capture(limit)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= limit:
            capture.add(handle.read(limit + 1))
            return capture
        capture.head += handle.read(limit // 2)
        handle.seek(size - (limit - limit // 2))
        capture.tail += handle.read()
        capture.total = size
    return capture


def _result(
    declaration: ToolDeclaration, call_id: str, finished: Finished, output: Capture, timeout: float, started: float
) -> ToolResult:
    notes: list[str] = []
    text, lossy = output.text()
    stderr, stderr_lossy = finished.stderr.text()
    if lossy or stderr_lossy:
        notes.append("output was not valid UTF-8; invalid bytes were replaced with U+FFFD")
    if finished.escaped:
        notes.append(f"killed {finished.escaped} process(es) the tool left running outside its process group")
    output_file = output.spilled
    if output_file:
        notes.append(
            f"output was longer than max_output_bytes ({output.limit}); the middle was dropped; all of it is in {output_file}"
        )
    if finished.stderr.spilled:
        notes.append(f"stderr was longer than max_output_bytes; all of it is in {finished.stderr.spilled}")
    status: Status
    name = declaration.name
    if finished.timed_out:
        status, code = "timeout", EXIT_TIMEOUT
        loki = f"Tool call '{name}' timed out after {timeout:g}s"
    elif finished.cancelled:
        status, code = "cancelled", EXIT_CANCELLED
        loki = f"Tool call '{name}' was cancelled"
    elif finished.signal is not None:
        status, code = "error", 128 + finished.signal
        loki = f"Tool call '{name}' was killed by signal {finished.signal}"
    elif finished.returncode:
        status, code = "error", finished.returncode
        loki = f"Tool call '{name}' exited with code {code}"
    else:
        status, code, loki = "ok", 0, None
    last_line = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    error = None if loki is None else (f"{loki}: {last_line}" if last_line else loki)
    return ToolResult(
        ok=status == "ok",
        status=status,
        output=text,
        error=error,
        exit_code=code,
        stderr=stderr,
        duration_ms=round((time.monotonic() - started) * 1000, 1),
        tool_call_id=call_id,
        tool_name=name,
        signal=finished.signal,
        tool_call_error=loki,
        notes=tuple(notes),
        output_file=output_file,
        stderr_file=finished.stderr.spilled,
    )


def _failure(call: ToolCall, call_id: str, status: Status, message: str, code: int, started: float) -> ToolResult:
    return ToolResult(
        ok=False,
        status=status,
        output="",
        error=message,
        exit_code=code,
        stderr="",
        duration_ms=round((time.monotonic() - started) * 1000, 1),
        tool_call_id=call_id,
        tool_name=call.name,
        tool_call_error=f"Tool call '{call.name}' failed: {message.splitlines()[0]}",
    )
