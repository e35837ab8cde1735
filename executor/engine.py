"""The call engine: one validated call against one snapshot in, one :class:`ToolResult` out.

``runtime.prepare`` → ``run_process`` → read back → result, with one ``except ToolexecError``
boundary: every missing interpreter, failed preparation or unwritable state directory comes back
as a result carrying the error's own status, exit code and reason. What comes before (resolving,
the snapshot, validation, approval, a slot) is :mod:`toolexec.calls`'.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path

from toolexec.callfiles import FilePool, call_files, new_call_files
from toolexec.config import Config
from toolexec.errors import BadRequest, CacheFull, InternalError, RuntimeUnavailable, StateUnavailable, ToolexecError
from toolexec.policy import effective as effective_policy
from toolexec.records import Sandbox, ToolCall, ToolDeclaration, ToolResult
from toolexec.recordtype import replace
from toolexec.results import asking_result, outcome, refusal
from toolexec.runtimes import CallControl, Capture, Finished, Launch, Site, run_process, runtime_for
from toolexec.runtimes.environment import (
    TRUSTED_IDS_VARIABLE,
    TRUSTED_PATHS_VARIABLE,
    caller_environment,
    dotenv_values,
    tool_environment,
)
from toolexec.runtimes.process import disk_usage
from toolexec.runtimes.warm import WarmStart
from toolexec.sources import Snapshot
from toolexec.state import State, call_id_for, check_call_id
from toolexec.validation import prepare_numbers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from toolexec.observe import Observation
    from toolexec.records import InputRequest
    from toolexec.runtimes.sandbox import Confinement
    from toolexec.runtimes.sandbox_spare import Spare, Spares
    from toolexec.runtimes.warm import WarmPool

OUTPUT_RETENTION_SECONDS = 24 * 3600  # full outputs of capped calls, in State.outputs_dir
# The private channel on which a bootstrap reports a failure (JSON: type, message, stack).
FAILURE_VARIABLE = "TOOLEXEC_FAILURE_FILE"


class Engine:
    """Runs calls of one config, each against its own :class:`~toolexec.sources.Snapshot`."""

    def __init__(
        self,
        config: Config,
        *,
        pool: WarmPool | None = None,
        files: FilePool | None = None,
        spares: Spares | None = None,
        keep_cold: bool = False,
    ) -> None:
        """``pool``: the warm servers this call may fork from (None: it is spawned cold); ``files``: where its private
        files come from and go back to (None: made for it, removed after it); ``spares``: the sandboxes set up ahead
        of calls (:mod:`toolexec.runtimes.sandbox_spare`) a confined or baseline call may start in, and where the next
        one is ordered (None: each starts its own); ``keep_cold``: a cold call whose PID namespace was seen gone leaves
        its files to ``files`` for the next call, as a sealed warm call does."""
        self.keep_cold = keep_cold
        self.config = config
        self.pool = pool
        self.files = files
        self.spares = spares

    def execute(
        self,
        snapshot: Snapshot,
        call: ToolCall,
        arguments: dict,
        control: CallControl | None = None,
        *,
        call_id: str,
        started: float,
        can_ask: bool = False,
        observation: Observation | None = None,
    ) -> ToolResult:
        """Run ``call`` with ``arguments`` (already validated against ``snapshot``) and return its result; never
        raises for a failed or unrunnable call.

        With ``can_ask``, the tool may ask a question (:mod:`toolexec.asking`): a run that does ends in an
        ``input_required`` result carrying it; ``call.input_responses`` are the answers of earlier runs.
        ``observation`` (tracing) gives the tool its trace carrier and learns the process's facts."""
        tool = snapshot.declaration
        try:
            javascript = tool.language in ("javascript", "typescript")
            arguments = prepare_numbers(arguments, tool.parameters, tool.name, javascript=javascript)
            runnable = _runnable(snapshot, self.config.state)
            result = self._run(runnable, snapshot.code, arguments, call, call_id, control, started, can_ask, observation)
        except ToolexecError as error:
            return refused(call, error, started=started, call_id=call_id)
        except Exception as error:  # a fault of toolexec's own: still a result, as documented, never an exception
            return refused(call, InternalError(error), started=started, call_id=call_id)
        if snapshot.last_good:  # said where the caller sees notes: stderr, the MCP result, the API's result
            result = replace(result, notes=(last_good_note(snapshot), *result.notes))
        return result

    def _run(
        self,
        tool: ToolDeclaration,
        code: str | None,
        arguments: dict,
        call: ToolCall,
        call_id: str,
        control: CallControl | None,
        started: float,
        can_ask: bool = False,
        observation: Observation | None = None,
    ) -> ToolResult:
        cache_dir = self.config.state.tool_cache(tool.name)
        cache_limit = self.config.max_cache_bytes
        if (used := disk_usage(str(cache_dir), limit=cache_limit)) > cache_limit:
            raise CacheFull(tool.name, str(cache_dir), used, cache_limit)
        config = self.config
        policy = effective_policy(config.sandbox, config.sandbox_policies, tool.name, tool.metadata.sandbox)
        spare: Spare | None = None
        # A declared policy's spare binds the call's files: taken first, its files are the call's.
        confined_key = ("confined", tool.name, str(config.path), can_ask)
        if self.spares is not None and policy is not None and not isinstance(policy.network, tuple):
            spare = self.spares.take(confined_key)
        try:
            return self._run_with(
                tool, code, arguments, call, call_id, control, started, can_ask, observation, policy, spare, cache_dir
            )
        finally:
            if spare is not None and not spare.consumed:  # the call failed before its start
                spare.discard(files=False)

    def _run_with(
        self,
        tool: ToolDeclaration,
        code: str | None,
        arguments: dict,
        call: ToolCall,
        call_id: str,
        control: CallControl | None,
        started: float,
        can_ask: bool,
        observation: Observation | None,
        policy: Sandbox | None,
        spare: Spare | None,
        cache_dir: Path,
    ) -> ToolResult:
        state = self.config.state
        agent = self.config.agent
        cache_limit = self.config.max_cache_bytes
        made = spare.files if spare is not None else None
        # A confined call that may run warm has its files where only its tool's confined servers see them
        within = self.pool.home(tool.name) if self.pool is not None and policy is not None and made is None else None
        with call_files(tool.name, can_ask, self.files, made=made, within=within) as files:
            output_path, failure_path, artifacts_dir, request_path = files.output, files.failure, files.artifacts, files.request
            raw_json = _raw_json(call.arguments, arguments)
            # .env files expand ${VAR} from it too, never from more than the tool gets (no secret of toolexec's)
            base = caller_environment(self.config.secret_names())
            dotenv = dotenv_values(self.config.functions_dir, agent.dotenv_files if agent is not None else (), environ=base)
            env = tool_environment(
                base,
                functions_dir=self.config.functions_dir,
                cache_dir=cache_dir,
                tool=tool.name,
                call_id=call_id,
                output_path=output_path,
                artifacts_dir=artifacts_dir,
                dotenv=dotenv,
                raw_json=raw_json,
                trusted=self.config.trusted_paths,
                secrets=(),  # base has none of them already
                input_request=request_path,
                answers=_answers(call) if request_path is not None else None,
            )
            if agent is not None:  # one of an agent's functions or shared tools: as its runner sets it
                from toolexec.agents import agent_environment

                env.update(agent_environment(agent, tool, env, raw_json))
            env[FAILURE_VARIABLE] = failure_path
            carrier = observation.environment() if observation is not None else {}
            env.update(carrier)  # TRACEPARENT …: the tool's own spans continue the call's
            site = Site(
                functions_dir=self.config.functions_dir,
                cwd=Path.cwd(),
                state=state,
                runtimes=self.config.runtimes,
                env=env,
                code=code,
                warm=self.pool is not None,
            )
            prepared = runtime_for(tool.language).prepare(tool, arguments, site)
            timeout = call.timeout or tool.limits.timeout or self.config.timeout
            limit = tool.limits.max_output_bytes or self.config.max_output_bytes
            launch_env = {**env, **prepared.env_additions}
            confined = None
            config = self.config
            if policy is not None:
                from toolexec.confine import confinement
                from toolexec.runtimes.sandbox import environment

                private = (output_path, failure_path, artifacts_dir, *([request_path] if request_path else []))
                confined = confinement(config, tool.name, policy, private, timeout)
                argc_env = [variable.name for variable in getattr(tool.invocation, "env", ())]  # Bash's @env lines
                own = {*policy.env, *argc_env, *dotenv, *prepared.env_additions, *carrier}
                launch_env = environment(launch_env, [*own, FAILURE_VARIABLE, TRUSTED_PATHS_VARIABLE, TRUSTED_IDS_VARIABLE])
            elif config.sandbox != "off":  # undeclared, under declared: the baseline only (a PID namespace, limits)
                from toolexec.runtimes import baseline

                confined = baseline.confinement(timeout)
            launch = Launch(
                argv=prepared.argv,
                env=launch_env,
                confinement=confined,
                stdin=prepared.stdin,
                timeout=timeout,
                capture_limit=limit,
                spill_dir=str(state.outputs_dir),
                progress=control is not None and control.on_event is not None,
                keep_limit=self.config.max_kept_bytes,
                # a pool's sets are removed with its directory, which the guard knows already: no line of them per call
                private_files=() if files.pooled else files.paths,
                file_limit=self.config.max_kept_bytes,
                sets_file_limit=prepared.sets_file_limit,
                awaits_file_limit=prepared.awaits_file_limit,
                watch_dir=str(cache_dir),
                watch_limit=cache_limit,
                warm=WarmStart(pool=self.pool, spec=prepared.warm)
                if self.pool is not None and prepared.warm is not None
                else None,
            )
            ahead = self._ahead(tool, can_ask, launch, policy, spare)
            if ahead is not None:
                launch = replace(launch, spare=ahead[1])
            try:
                finished = run_process(launch, control)
            except OSError as exc:
                raise RuntimeUnavailable(launch.argv[0], f"cannot be started: {exc.strerror or exc}") from None
            finally:
                if ahead is not None and self.spares is not None:  # the next call's, made once this one is over
                    from toolexec.runtimes.sandbox_spare import Recipe, places

                    made_with = launch.confinement
                    assert made_with is not None
                    spare_files = (lambda: new_call_files(tool.name, can_ask)) if not made_with.baseline else None
                    recipe = Recipe(
                        confinement=made_with, places=places(launch.argv, made_with), cwd=os.getcwd(), files=spare_files
                    )
                    self.spares.order(ahead[0], recipe)
            files.sealed = finished.sealed or (finished.namespace_gone and self.keep_cold)
            if observation is not None:
                observation.launched(prepared.argv, finished)
            declared = confined is not None and confined.file_size is not None  # its bound replaces max_kept_bytes's
            if (
                finished.limit is None
                and not declared
                and _hit_file_limit(output_path, failure_path, finished, self.config.max_kept_bytes)
            ):
                finished = replace(finished, limit=("file", self.config.max_kept_bytes))
            try:
                output = self._result_text(output_path, finished, limit, call_id)
            except OutputUnreadable as exc:
                _discard(finished.stdout.spilled)
                return outcome(
                    tool.name,
                    call_id,
                    finished,
                    Capture(limit),
                    timeout=timeout,
                    failure=str(exc),
                    started=started,
                    broken_output=True,
                )
            if request_path is not None and (asked := _asked(request_path, tool.name, finished)) is not None:
                _discard(finished.stdout.spilled)
                return asking_result(tool.name, call_id, asked, started)
            failure = _reported_failure(failure_path)
            result = outcome(
                tool.name,
                call_id,
                finished,
                output,
                timeout=timeout,
                failure=failure,
                started=started,
                notes=prepared.notes + _refusal_notes(finished),
            )
            if result.status in ("ok", "error") and not files.artifacts_empty():  # a timed-out or cancelled call's are not
                from toolexec.artifacts import collect

                found, notes = collect(artifacts_dir, self.config.artifacts, state)
                result = replace(result, artifacts=found, notes=(*result.notes, *notes))
            if confined is None:
                return result
            if policy is not None:  # what the tool's own error says the sandbox denied, named by its policy line
                result = _denied(result, confined, policy, f"{failure or ''}\n{result.stderr}", self._source(tool, policy))
            if result.ok:
                return result
            return _limited(result, confined, f"{failure or ''}\n{result.stderr}", oom_killed=finished.oom_killed)

    def _ahead(
        self, tool: ToolDeclaration, can_ask: bool, launch: Launch, policy: Sandbox | None, spare: Spare | None
    ) -> tuple[tuple[str | bool, ...], Spare | None] | None:
        """Whether this call is one a sandbox set up ahead serves: (the key its kind of call's spares are kept by, the
        spare it starts in, if one was made for it); None when it is not (no spares here, unconfined, a network
        allow-list, a call that runs warm, a host without bwrap)."""
        confined = launch.confinement
        if self.spares is None or confined is None:
            return None
        from toolexec.runtimes.sandbox import calls_share
        from toolexec.runtimes.sandbox_spare import eligible

        start = launch.warm
        if start is not None and (confined.baseline or (start.confines and calls_share(confined))):
            return None  # a warm call's server isolates it
        if not eligible(confined):
            return None
        if not confined.baseline:
            return ("confined", tool.name, str(self.config.path), can_ask), spare
        key = ("baseline", tool.name, str(self.config.path))
        return key, self.spares.take(key)

    def _source(self, tool: ToolDeclaration, policy: Sandbox) -> str:
        """Where the policy a call runs under comes from, as a denial note names it."""
        if tool.name in self.config.sandbox_policies:
            return f"sandbox_policies.{tool.name} in {self.config.path}"
        if tool.metadata.sandbox is not None:
            return f"declared in {tool.source}"
        return f"the baseline of sandbox: strict in {self.config.path}; it declares no policy"

    def _result_text(self, output_path: str, finished: Finished, limit: int, call_id: str) -> Capture:
        """What the call returns: LLM_OUTPUT (else what the tool printed), capped, the whole of it kept in a
        file named by the result when it was longer; OutputUnreadable when LLM_OUTPUT is not a regular file."""
        state = self.config.state
        output = read_capped(output_path, limit)
        if not output.total and finished.stdout.total:
            output = finished.stdout  # the tool printed instead of writing LLM_OUTPUT
        else:
            _discard(finished.stdout.spilled)  # stdout is not the result: no file of it is kept
        if output.dropped and output.spill is None:  # keep the whole of it, named in the result
            output.spill = str(state.output_file(call_id, "output"))
            import shutil  # only an output past max_output_bytes is moved

            shutil.move(output_path, output.spill)
            output.keep_limit = self.config.max_kept_bytes
            output.kept = min(output.total, output.keep_limit)
            if output.unkept:
                os.truncate(output.spill, output.kept)
        if output.spilled or finished.stderr.spilled:
            _prune(state.outputs_dir, keep_seconds=OUTPUT_RETENTION_SECONDS)
        return output


def _denied(result: ToolResult, confined: Confinement, policy: Sandbox, text: str, source: str) -> ToolResult:
    """``result`` with a note per denial its own error reports that toolexec can pin on a policy line."""
    from toolexec.confine import denial_notes

    notes = denial_notes(confined, policy, text, source)
    return replace(result, notes=(*result.notes, *notes)) if notes else result


def _limited(result: ToolResult, confined: Confinement, text: str, *, oom_killed: bool = False) -> ToolResult:
    """``result`` with the reason and a message a model can act on when one of the sandbox's limits stopped the tool."""
    from toolexec.errors import SandboxUnavailable
    from toolexec.recordtype import replace
    from toolexec.runtimes.launcher import PREFIX
    from toolexec.runtimes.sandbox import limit_reason

    if result.reason != "tool_failed":  # a timeout, or a limit of toolexec's own (max_kept_bytes, max_cache_bytes)
        return result
    if result.exit_code == 1 and result.stderr.startswith(("bwrap: ", PREFIX)) and not result.output:
        # bwrap or the fallback's launcher could not set the sandbox up (a mount or a rule refused): the tool never ran
        error = SandboxUnavailable(result.tool_name, result.stderr.strip().splitlines()[0])
        return replace(result, status=error.status, reason=error.reason, exit_code=error.exit_code, error=str(error), ok=False)
    found = limit_reason(confined, result.exit_code, result.signal, text, result.duration_ms / 1000, oom_killed=oom_killed)
    if found is None:
        return result
    reason, message = found
    return replace(result, reason=reason, error=f"{message} ({result.error})" if result.error else message)


def _refusal_notes(finished: Finished) -> tuple[str, ...]:
    """A note per connection the call's network proxy refused, naming the policy line (none without a proxy)."""
    if not finished.refused:
        return ()
    from toolexec.runtimes.netproxy import refusal_notes

    return refusal_notes(finished.refused)


def last_good_note(snapshot: Snapshot) -> str:
    """What a call of a file that no longer builds says: it ran the last good version, and why the file does not build."""
    problem = snapshot.problems[0].split("\n", 1)[0] if snapshot.problems else "it does not build"
    return f"{snapshot.declaration.name}: the file no longer builds ({problem}); ran its last good version"


def _holds(path: Path, text: str) -> bool:
    """Whether the file at ``path`` holds exactly ``text`` (no link followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    with open(fd, "rb") as handle:
        return handle.read(len(text.encode("utf-8", "surrogateescape")) + 1) == text.encode("utf-8", "surrogateescape")


def _runnable(snapshot: Snapshot, state: State) -> ToolDeclaration:
    """The declaration to hand the runtime: as it is, or, for the last good version of a file that no longer builds
    (and a runtime that runs a file rather than the snapshot's text), pointing at a copy of the text that version
    was compiled from, named as the file is, kept in the state directory (one per text: a transpile is reused)."""
    tool = snapshot.declaration
    if not snapshot.last_good or snapshot.code is None or tool.language == "python":
        return tool  # Python's bootstrap is handed the text itself
    from toolexec.recordtype import replace

    copy = state.last_good_copy(snapshot.code, os.path.basename(tool.source))
    if not _holds(copy, snapshot.code):  # missing, or changed since it was written: written again, never run as found
        with contextlib.suppress(OSError):
            state.private_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        state.ensure(copy.parent)
        partial = copy.with_name(f".{copy.name}.{os.getpid()}.{os.urandom(4).hex()}")
        try:
            with open(partial, "x", encoding="utf-8", newline="") as handle:
                handle.write(snapshot.code)
            os.chmod(partial, 0o700)
            os.replace(partial, copy)  # whole or not at all, whoever else writes it at the same time
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise StateUnavailable(str(copy.parent), exc.strerror or str(exc)) from None
    return replace(tool, source=str(copy))


def refused(call: ToolCall, error: ToolexecError, *, started: float, call_id: str | None = None) -> ToolResult:
    """The result of ``call`` stopped by ``error`` before it ran (an unusable call id is not echoed)."""
    call_id = call_id or call_id_for(call.call_id)
    return refusal(call.name, call_id if _printable(call_id) else "invalid-call-id", error, started)


def _raw_json(raw: object, arguments: dict) -> str:
    """The arguments as the caller sent them (``LLM_TOOL_RAW_JSON``): its JSON text, else compact JSON."""
    import json

    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str) and raw.strip():
        return raw
    return json.dumps(raw if isinstance(raw, dict) else arguments, ensure_ascii=False, separators=(",", ":"), default=str)


def _printable(call_id: str) -> bool:
    try:
        check_call_id(call_id)
    except BadRequest:
        return False
    return True


def _answers(call: ToolCall) -> dict[str, str]:
    """The variables carrying ``call``'s answers so far (``LLM_INPUT_RESPONSES``, ``LLM_ANSWER_*``)."""
    from toolexec.asking import answer_environment

    return answer_environment(call.input_responses or {})


def _asked(path: str, tool: str, finished: Finished) -> InputRequest | BadRequest | None:
    """The question the tool wrote to its request file (an :class:`~toolexec.records.InputRequest`), None when it
    asked nothing (or was stopped by a limit, which its result says), a BadRequest when the request is malformed."""
    if finished.limit is not None or finished.timed_out or finished.cancelled:
        return None
    from toolexec.asking import read_request

    try:
        return read_request(path, tool)
    except BadRequest as error:
        return error


def _reported_failure(path: str) -> str | None:
    """What the bootstrap reported on the failure channel: ``Type: message`` (every line), or None."""
    import json

    try:
        # by descriptor (a buffered text file costs four system calls more); a FIFO put in its place does not block
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            data = _read_at(fd, 0, 1 << 16)
        finally:
            os.close(fd)
        text = data.decode("utf-8", errors="replace")
        report = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or not (report.get("message") or report.get("type")):
        return None
    kind, message = report.get("type"), report.get("message")
    return f"{kind}: {message}" if kind and message else str(kind or message)


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


class OutputUnreadable(Exception):
    """``$LLM_OUTPUT`` is no longer the regular file toolexec created: the tool's error, said in the result."""


def read_capped(path: str, limit: int) -> Capture:
    """The file's bytes within ``limit`` (head and tail) from one size snapshot, never all of a huge file in memory.

    Opened without following a link or blocking (a FIFO put in its place would block ``open``
    forever): only a regular file is read; anything else is :class:`OutputUnreadable`.
    """
    capture = Capture(limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise OutputUnreadable("the tool removed the file $LLM_OUTPUT names") from None
    except OSError as exc:
        raise OutputUnreadable(f"$LLM_OUTPUT cannot be read ({exc.strerror}): the tool replaced it with a link") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OutputUnreadable(f"the tool replaced $LLM_OUTPUT with {_kind_of(st.st_mode)}, not a regular file")
    try:  # by descriptor: a buffered file costs three system calls more
        size = st.st_size  # what is read: a file that grows meanwhile adds nothing
        if size <= limit:
            capture.add(_read_at(fd, 0, size))
            return capture
        capture.head += _read_at(fd, 0, limit // 2)
        capture.tail += _read_at(fd, size - (limit - limit // 2), limit - limit // 2)
        capture.total = size
    finally:
        os.close(fd)
    return capture


def _read_at(fd: int, offset: int, size: int) -> bytes:
    """Up to ``size`` bytes of ``fd`` from ``offset`` (fewer at its end)."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 20), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _kind_of(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"))
    return next((name for test, name in kinds if test(mode)), "a special file")


def _hit_file_limit(output_path: str, failure_path: str, finished: Finished, limit: int) -> bool:
    """Whether a tool that was not killed by SIGXFSZ (it ignores the signal, as Python does) failed on the file size
    limit: LLM_OUTPUT reached it, or the tool failed on EFBIG ("File too large", in its report or last stderr line)."""
    try:
        if os.lstat(output_path).st_size >= limit:
            return True
    except OSError:
        pass
    if not finished.returncode:
        return False
    text, _ = finished.stderr.text()
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
    said = f"{_reported_failure(failure_path) or ''}\n{last}".lower()
    return "file too large" in said or "efbig" in said
