"""Every exception toolexec raises, and the shape of its messages.

::

    ToolexecError                 status / exit code / reason of a call it stops
    ├── ConfigError               a config file is missing, unreadable or wrong (names key and file)
    ├── CompileError              one source file cannot become a declaration (every problem in it)
    ├── BuildError                the catalog could not be written or read
    ├── StateUnavailable          toolexec's state directory cannot be written (names it)   unavailable 127
    ├── CallRefused               a call toolexec will not start                               refused 2
    │   ├── BadRequest            a malformed request (not a JSON object, a bad timeout or call id)
    │   ├── UnknownTool           no visible tool of that name (with a close match)
    │   ├── UnknownAgent          no agent of that name in the agents directory
    │   ├── NotEnabled            a visible tool that enabled_tools does not enable
    │   ├── ToolBroken            the tool failed to build (every problem)
    │   ├── InvalidArguments      arguments that break the tool's schema (every problem)
    │   ├── PreconditionFailed    what the tool declares it needs is missing (@env, require-tools)
    │   ├── CallDenied            the approval hook (before_call, --confirm) said no, with its reason
    │   ├── CacheFull             the tool's LLM_TOOL_CACHE_DIR already holds more than max_cache_bytes
    │   └── ScopeMissing          the caller's OAuth access token lacks a scope the tool declares
    ├── InstructionsFailed        an agent's dynamic instructions (_instructions) failed      error 1
    ├── RuntimeUnavailable        the interpreter a tool needs is not installed              unavailable 127
    │   └── PreparationFailed     it is, but readying the tool failed (esbuild could not transpile)
    └── InternalError             a fault of toolexec's own met during a call (a bug: report it)   error 1

Each class carries the ``status``, ``exit_code`` and ``reason`` of the result of a call it
stops (as click's exceptions carry exit codes), so the engine maps every error in one place.
A tool that runs and fails is not an exception: it is a ``ToolResult`` with
``ok=False``. Every message names the object at fault and what to do instead.
"""

from __future__ import annotations

from toolexec.recordtype import record

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from toolexec.records import Reason, Status

EXIT_FAILED, EXIT_REFUSED, EXIT_TIMEOUT, EXIT_UNAVAILABLE, EXIT_CANCELLED = 1, 2, 124, 127, 130


class ToolexecError(Exception):
    """Base class of every error toolexec raises on purpose."""

    status: Status = "refused"
    exit_code: int = EXIT_REFUSED
    reason: Reason = "bad_request"


class ConfigError(ToolexecError):
    """A config file that is missing, unreadable or wrong; the message names the file and the key."""

    def __init__(self, path: str, message: str, *, key: str | None = None) -> None:
        self.path = path
        self.key = key
        where = f"{path}: key '{key}'" if key else path
        super().__init__(f"{where}: {message}")


@record(kw_only=False)
class Problem:
    """One diagnostic in a source file, 1-based line and column."""

    path: str
    line: int
    col: int
    message: str
    hint: str | None = None
    severity: str = "error"

    def __str__(self) -> str:
        label = "" if self.severity == "error" else f"{self.severity}: "
        text = f"{self.path}:{self.line}:{self.col}: {label}{self.message}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class CompileError(ToolexecError):
    """One source file that cannot become a declaration, with every problem in it.

    ``name`` is the tool name the file declares when the compiler got that far (a module
    tool's ``name`` field), so a broken tool is filed under the name callers use.
    """

    exit_code = EXIT_FAILED

    def __init__(self, path: str, problems: Sequence[Problem], *, name: str | None = None) -> None:
        self.path = path
        self.problems = tuple(problems)
        self.name = name
        super().__init__("\n".join(str(p) for p in self.problems))


class BuildError(ToolexecError):
    """The catalog could not be written or read."""

    exit_code = EXIT_FAILED


class StateUnavailable(ToolexecError):
    """toolexec's state directory (catalog, tool caches, kept outputs) cannot be written."""

    status = "unavailable"
    exit_code = EXIT_UNAVAILABLE
    reason = "state"

    def __init__(self, directory: str, why: str) -> None:
        self.directory = directory
        super().__init__(
            f"cannot write toolexec's state in {directory}: {why}; make it writable, or remove it so that the user cache is used"
        )


class CallRefused(ToolexecError):
    """A call that never started because its request was wrong."""


class BadRequest(CallRefused):
    """A malformed request: arguments that are not a JSON object, a bad timeout or call id, a closed executor."""


class UnknownTool(CallRefused):
    """No visible tool of that name; the message offers a close match, or says why it is not visible."""

    reason = "unknown_tool"

    def __init__(self, name: str, known: Iterable[str], *, because: str | None = None) -> None:
        self.name = name
        shown = brief(name)
        super().__init__(f"unknown tool {shown}: {because}" if because else f"unknown tool {shown}{did_you_mean(name, known)}")


class UnknownAgent(CallRefused):
    """No agent of that name in the agents directory (the message names the close match and the agents there)."""

    reason = "unknown_tool"


class NotEnabled(CallRefused):
    """A visible tool that ``enabled_tools`` does not enable: only enabled tools may be called."""

    reason = "not_enabled"


class ToolBroken(CallRefused):
    """A visible tool that failed to build (and has no earlier good version to fall back on)."""

    reason = "tool_broken"

    def __init__(self, name: str, problems: Sequence[str], *, missing: str | None = None) -> None:
        self.name = name
        if missing is not None:  # the source file is gone: nothing to build or run
            super().__init__(f"tool {name!r} cannot run: its file {missing} is gone; restore it or remove it from visible_tools")
        else:
            super().__init__(f"tool {name!r} failed to build:\n" + "\n".join(problems))


class PreconditionFailed(CallRefused):
    """What the tool declares it needs is missing: an ``@env`` variable, a required program, a dotenv file."""

    reason = "precondition"


class CallDenied(CallRefused):
    """The ``before_call`` approval hook (or the person ``--confirm`` asked) denied the call; the model reads why."""

    reason = "denied"

    def __init__(self, name: str, why: str) -> None:
        self.name = name
        self.why = why
        super().__init__(f"the call of tool {name!r} was denied: {why}")


class ScopeMissing(CallRefused):
    """The caller's OAuth access token does not grant every scope the tool declares (``Scope:``)."""

    reason: Reason = "insufficient_scope"

    def __init__(self, name: str, missing: Sequence[str]) -> None:
        self.name = name
        self.missing = tuple(missing)
        super().__init__(
            f"tool {name!r} needs the OAuth scope {' '.join(self.missing)}, which your access token does not grant; "
            "ask the authorization server for a token with it"
        )


class CacheFull(CallRefused):
    """The tool's cache directory already holds more than ``max_cache_bytes``: the call is not started."""

    reason: Reason = "cache_limit"

    def __init__(self, tool: str, directory: str, used: int, limit: int) -> None:
        super().__init__(
            f"tool {tool!r} was not started: its cache directory {directory} holds {used} bytes, more than "
            f"max_cache_bytes ({limit}); remove files from it, or raise max_cache_bytes in config.yaml"
        )


class InvalidArguments(CallRefused):
    """Arguments that break the tool's schema, with every problem."""

    reason = "invalid_arguments"

    def __init__(self, tool: str, problems: Sequence[str]) -> None:
        self.tool = tool
        self.problems = tuple(problems)
        lines = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(f"invalid arguments for tool {tool!r}:\n{lines}")


class InstructionsFailed(ToolexecError):
    """An agent's ``_instructions`` function, run for its dynamic instructions, failed (the message says how)."""

    status = "error"
    exit_code = EXIT_FAILED
    reason = "tool_failed"


class RuntimeUnavailable(ToolexecError):
    """The interpreter a tool needs is not installed; the message says how to install or override it."""

    status = "unavailable"
    exit_code = EXIT_UNAVAILABLE
    reason = "unavailable"

    def __init__(self, interpreter: str, hint: str) -> None:
        self.interpreter = interpreter
        super().__init__(self.describe(interpreter, hint))

    @staticmethod
    def describe(interpreter: str, hint: str) -> str:
        """The message: which interpreter, and the hint."""
        return f"interpreter {interpreter!r} not found; {hint}"


class PreparationFailed(RuntimeUnavailable):
    """The program that readies a tool to run (esbuild for TypeScript) is there but failed."""

    @staticmethod
    def describe(interpreter: str, hint: str) -> str:
        """The message: the program, then what went wrong."""
        return f"{interpreter} {hint}"


def brief(value: object, width: int = 80) -> str:
    """``repr(value)`` cut to ``width`` characters: a message never echoes an unbounded value.

    Safe for anything a parser can hand over (a 5,000-digit integer, an alias bomb's megabytes).
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    if isinstance(value, (list, dict)) and len(value) > width:
        return f"a {type(value).__name__} of {len(value)} items"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= width else text[: width - 3] + "..."


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """'; did you mean 'x'?' for the closest candidate, or '' when none is close."""
    import difflib  # only a misspelt name pays for it

    if not isinstance(word, str):
        return ""
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


class InternalError(ToolexecError):
    """A fault of toolexec's own met while running a call: the call still ends in a result that names it."""

    status: Status = "error"
    exit_code = EXIT_FAILED
    reason: Reason = "internal"

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(f"toolexec failed while running the call ({type(error).__name__}: {error}); please report it")


class SandboxUnavailable(RuntimeUnavailable):
    """The tool's isolation policy cannot be enforced on this host: the call is refused, never run unconfined."""

    @staticmethod
    def describe(interpreter: str, hint: str) -> str:
        """The message: the tool, then what is missing and how to get it."""
        return f"{interpreter}: its sandbox policy cannot be enforced here, so it is not run: {hint}"
