"""The records passed between stages: a compiled tool, a call, and its result.

A compiler produces a :class:`ToolDeclaration`; the catalog stores it, the
runtime receives it and the exporters read it. Only :meth:`ToolDeclaration.to_function`
is ever shown to a model; everything else is provenance for toolexec itself.

What a compiler tells a runtime is typed: the calling convention is one small frozen
record (:data:`Invocation`), the per-tool call limits are :class:`Limits`, and the
metadata agent surfaces show (title, tags, examples, annotations, output shape) is
:class:`Metadata`. Records are immutable; the JSON-like schema inside a declaration is
copied on the way out by :meth:`ToolDeclaration.to_function`.
"""

from __future__ import annotations

import json
import re

from toolexec.recordtype import asdict, field, field_names, record

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any, Literal, TypeAlias

    Language: TypeAlias = Literal["python", "bash", "typescript", "javascript"]
    Status: TypeAlias = Literal["ok", "error", "refused", "timeout", "cancelled", "unavailable", "input_required"]
    Action: TypeAlias = Literal["accept", "decline", "cancel"]
    Convention: TypeAlias = Literal["kwargs", "positional", "object", "module", "argc"]
    # Why a call did not succeed, for callers that act on it (MCP maps unknown_tool to a protocol error).
    Reason: TypeAlias = Literal[
        "unknown_tool",  # no visible tool of that name
        "not_enabled",  # visible, but not in enabled_tools
        "tool_broken",  # the tool failed to build
        "bad_request",  # the request itself is malformed (not a JSON object, bad timeout, closed executor)
        "invalid_arguments",  # arguments that break the tool's schema
        "precondition",  # what the tool declares it needs is missing (@env, require-tools, a dotenv file)
        "unavailable",  # the interpreter is missing, or readying the tool (a transpile) failed
        "state",  # toolexec's state directory cannot be written
        "tool_failed",  # the tool ran and failed (non-zero exit, exception, a signal)
        "timeout",
        "cancelled",
        "denied",  # the before_call approval hook (or the person asked by --confirm) said no
        "file_limit",  # the tool wrote a file past max_kept_bytes (LLM_OUTPUT or any other): it was stopped
        "cache_limit",  # the tool's LLM_TOOL_CACHE_DIR holds more than max_cache_bytes: refused, or stopped
        "insufficient_scope",  # the caller's OAuth access token lacks a scope the tool declares
        "internal",  # a fault of toolexec's own (a bug): the call still ends in a result
        "memory_limit",  # the tool passed its sandbox memory limit
        "cpu_limit",  # the tool used up its CPU seconds
        "process_limit",  # the tool could not start more processes than its limit
        "file_size_limit",  # the tool wrote a file larger than its limit
        "input_required",  # the tool asked a question (input_request) the caller has not answered yet
        "rate_limited",  # the tool's rate cap (calls per unit of time) is used up: try again later
    ]

LANGUAGES: tuple[Language, ...] = ("python", "bash", "typescript", "javascript")
# Every declaration format: `toolexec declarations --format …` and `Executor.declarations(format=…)` (here, not in
# toolexec.providers, so the CLI's parser names them without importing the providers).
DECLARATION_FORMATS = ("openai", "openai-strict", "responses", "anthropic", "gemini", "mcp")

# The one tool-name rule: the design card's characters, no leading dot (so never '.', '..' or one of
# toolexec's own hidden folders), and short enough to be a file name.
_NAME = re.compile(r"[a-zA-Z0-9_:-][a-zA-Z0-9_.:-]{0,127}")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a tool name, or None when it can."""
    if _NAME.fullmatch(name):
        return None
    if name.startswith("."):
        return f"invalid tool name {name!r}: a name may not start with '.'"
    if len(name) > 128:
        return f"invalid tool name {name[:40]!r}…: at most 128 characters"
    return f"invalid tool name {name!r}: names may use only letters, digits, '_', '.', ':' and '-'"


# --- how a runtime hands the validated arguments to the tool ------------------------------


@record
class Kwargs:
    """Python: ``run(**arguments)``.

    ``defaults`` are passed for parameters the call leaves out whose Python default is not their value
    (``x: int = Field(default=3)``, ``Annotated[int, Field(default=3)]``; None for a parameter optional by
    its type, ``x: int | None``). ``enums`` names the parameters that take a same-file ``Enum`` (or a list
    of one): (parameter, class, whether each item), so that ``run`` receives members, as pydantic gives.
    """

    defaults: tuple[tuple[str, Any], ...] = ()
    enums: tuple[tuple[str, str, bool], ...] = ()
    kind: Literal["kwargs"] = "kwargs"


@record
class Positional:
    """TypeScript / JavaScript flat parameters: ``run(a, b, c)`` in declaration order."""

    order: tuple[str, ...]
    kind: Literal["positional"] = "positional"


@record
class ObjectArgument:
    """llm-functions JavaScript: ``run(arguments)`` with the JSDoc ``[name=default]`` defaults filled in."""

    kind: Literal["object"] = "object"


@record
class Module:
    """A module tool (``export default {…}``, ``export const tool``/``meta``, named exports): ``run(input, context)``."""

    export: Literal["default", "tool", "meta", "named"]
    kind: Literal["module"] = "module"


@record
class ArgcParam:
    """What the Bash runtime needs of one ``@option`` / ``@flag`` / ``@arg`` to bind it as argc would."""

    kind: Literal["option", "flag", "arg"]
    name: str  # the property name
    var: str  # the shell variable, argc_<name>
    multi: bool = False
    split: bool = False  # `*,`: values are also split on commas
    default: str | None = None
    default_fn: str | None = None  # default computed by calling this script function
    choices_fn: str | None = None  # choices printed by this script function
    check_choices: bool = True
    long: str = ""  # the option's own name (``--long``), as an argc-built script's parser expects it


@record
class ArgcEnv:
    """One ``@env`` line: checked, defaulted or refused before the script starts."""

    name: str
    required: bool = False
    default: str | None = None
    choices: tuple[str, ...] = ()
    help: str = ""


@record
class Argc:
    """Bash: argc variables bound from the arguments, then ``main`` runs."""

    params: tuple[ArgcParam, ...] = ()
    env: tuple[ArgcEnv, ...] = ()
    require_tools: tuple[str, ...] = ()
    dotenv: str | None = None
    # The script carries argc's own parser (``argc --argc-build``): it is run with argc-style argv.
    built: bool = False
    kind: Literal["argc"] = "argc"


Invocation = Kwargs | Positional | ObjectArgument | Module | Argc


# The largest value each limit may take: a day of run time; 256 MiB kept in memory per stream.
LIMIT_BOUNDS: dict[str, float] = {
    "timeout": 86400.0,
    "max_output_bytes": float(256 << 20),
    "max_kept_bytes": float(1 << 40),
    "max_cache_bytes": float(1 << 50),
}


def limit_problem(name: str, value: Any, *, whole: bool = False) -> str | None:
    """Why ``value`` cannot be the limit ``name`` (see :data:`LIMIT_BOUNDS`), or None when it can."""
    import math

    number = isinstance(value, int) if whole else isinstance(value, (int, float))
    if not number or isinstance(value, bool) or not (isinstance(value, int) or math.isfinite(value)) or value <= 0:
        return "a positive whole number" if whole else "a positive number of seconds"
    bound = LIMIT_BOUNDS.get(name)
    if bound is not None and value > bound:
        return f"at most {bound:.0f}" + (" (one day)" if name == "timeout" else "")
    return None


@record
class Limits:
    """Per-tool call limits declared in the script; None means the config's value applies.

    Every limit, wherever it comes from (script, config, CLI, API), is finite, positive and at
    most :data:`LIMIT_BOUNDS`: a NaN, an infinity or 1e10 seconds would otherwise disable the
    timeout or overflow ``select``.
    """

    timeout: float | None = None
    max_output_bytes: int | None = None


@record
class Annotations:
    """Behaviour hints (MCP's tool annotations); None means not declared."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


@record
class Sandbox:
    """What a tool declares it needs (its isolation policy); what it does not declare, it does not get.

    ``network`` is ``"none"``, ``"all"`` or an allow-list of ``host[:port]`` names; ``writes`` the places it may
    write (``cache``, ``cwd``, absolute or ``~/`` paths) besides its private TMPDIR and LLM_OUTPUT; ``reads``
    the hidden paths it needs; ``env`` the variables it receives beyond the base set; the limits are bytes
    (``memory``, ``file_size``), CPU seconds and a process count. None means not declared (the baseline).
    """

    network: str | tuple[str, ...] | None = None
    writes: tuple[str, ...] | None = None
    reads: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    memory: int | None = None
    cpu: int | None = None
    processes: int | None = None
    file_size: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sandbox:
        """The record ``asdict`` wrote (lists back to tuples)."""
        network = data.get("network")
        writes = data.get("writes")
        return cls(
            **{
                **data,
                "network": tuple(network) if isinstance(network, list) else network,
                "writes": tuple(writes) if writes is not None else None,
                "reads": tuple(data.get("reads", ())),
                "env": tuple(data.get("env", ())),
            }
        )


@record
class Metadata:
    """What a script may declare besides its description and parameters, for agent surfaces."""

    title: str | None = None
    summary: str | None = None
    tags: tuple[str, ...] = ()
    examples: tuple[dict[str, Any], ...] = ()
    annotations: Annotations = field(default_factory=Annotations)
    output_schema: dict[str, Any] | None = None
    errors: tuple[str, ...] = ()
    # The isolation policy the script declares (None: it declares none).
    sandbox: Sandbox | None = None
    # OAuth scopes a caller's access token must grant (``Scope: repo:write``); checked only where there is a token.
    scopes: tuple[str, ...] = ()
    # The icon the script names, as a data: URI (the compiler reads the file: see toolexec.compilers.icon).
    icon: str | None = None
    # Whether MCP clients may (optional) or must (required) run it as a task (docs/mcp.md); None: never.
    task: Literal["optional", "required"] | None = None
    # Per-tool caps (docs/operations.md): calls in flight at once, and calls per unit of time ("30/minute").
    max_concurrency: int | None = None
    rate: str | None = None
    # Run warm (docs/performance.md): "fork" (a fresh process per call, forked from a server that loaded the tool
    # once) or, for JavaScript/TypeScript, "shared" (one worker process serves every call); None: cold.
    warm: Literal["fork", "shared"] | None = None


@record
class ToolDeclaration:
    """One compiled tool: the wire declaration plus where it came from and how to call it."""

    name: str
    description: str
    parameters: dict[str, Any]
    source: str
    language: Language
    invocation: Invocation
    # Interpreter named by the script's shebang, already split into argv.
    shebang: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    metadata: Metadata = field(default_factory=Metadata)
    warnings: tuple[str, ...] = ()
    # The function of a multi-function file (an agent's tools.sh/.py/.js) this tool calls; None: the file's
    # own entry point (``run`` / ``main``).
    function: str | None = None
    # Where the tool ("") and each parameter are declared in the source, as 1-based (line, column): for diagnostics
    # about a compiled tool (`toolexec check`). Known right after a compile only: never stored, never compared.
    positions: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False)

    @property
    def convention(self) -> Convention:
        """The calling convention's name."""
        return self.invocation.kind

    def to_function(self) -> dict[str, Any]:
        """The provider-neutral function declaration sent to a model (a copy: safe to change)."""
        import copy

        return {"name": self.name, "description": self.description, "parameters": copy.deepcopy(self.parameters)}

    def fingerprint(self) -> str:
        """A digest of everything a model or an agent surface sees of this tool: equal means unchanged."""
        import hashlib  # only builds and list changes compare fingerprints

        seen = {**self.to_function(), "metadata": asdict(self.metadata)}
        return hashlib.sha256(json.dumps(seen, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]

    def to_dict(self) -> dict[str, Any]:
        """The whole record as JSON-ready data (the catalog's storage form; :attr:`positions` is not stored, and
        ``function`` only when there is one)."""
        data = asdict(self)
        del data["positions"]
        if data["function"] is None:
            del data["function"]
        for key in (
            "sandbox",
            "icon",
            "task",
            "max_concurrency",
            "rate",
            "warm",
        ):  # kept out of records of tools that declare none
            if data["metadata"][key] is None:
                del data["metadata"][key]
        if not data["metadata"]["scopes"]:
            del data["metadata"]["scopes"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolDeclaration:
        """The record :meth:`to_dict` wrote."""
        metadata = dict(data.get("metadata") or {})
        return cls(
            name=data["name"],
            description=data["description"],
            parameters=data["parameters"],
            source=data["source"],
            language=data["language"],
            invocation=_invocation(data["invocation"]),
            shebang=tuple(data.get("shebang", ())),
            limits=Limits(**data.get("limits", {})),
            metadata=Metadata(
                **{
                    **metadata,
                    "tags": tuple(metadata.get("tags", ())),
                    "examples": tuple(metadata.get("examples", ())),
                    "errors": tuple(metadata.get("errors", ())),
                    "scopes": tuple(metadata.get("scopes", ())),
                    "annotations": Annotations(**metadata.get("annotations", {})),
                    "sandbox": Sandbox.from_dict(metadata["sandbox"]) if metadata.get("sandbox") else None,
                }
            ),
            warnings=tuple(data.get("warnings", ())),
            function=data.get("function"),
        )


def _invocation(data: dict[str, Any]) -> Invocation:
    kind = data["kind"]
    if kind == "argc":
        return Argc(
            params=tuple(ArgcParam(**p) for p in data["params"]),
            env=tuple(ArgcEnv(**{**e, "choices": tuple(e["choices"])}) for e in data["env"]),
            require_tools=tuple(data["require_tools"]),
            dotenv=data["dotenv"],
            built=data.get("built", False),
        )
    kind_class = {"kwargs": Kwargs, "positional": Positional, "object": ObjectArgument, "module": Module}[kind]
    values = {name: data[name] for name in field_names(kind_class) if name in data}
    if kind == "positional":
        values["order"] = tuple(values["order"])
    if kind == "kwargs":
        values.update({key: tuple(tuple(item) for item in values.get(key, ())) for key in ("defaults", "enums")})
    return kind_class(**values)  # type: ignore[no-any-return]


@record
class InputRequest:
    """A question a tool asks mid-call (see :mod:`toolexec.asking`): a message and a flat JSON Schema of the answer.

    ``key`` names the question: its answer reaches the tool's next run under that key.
    """

    key: str
    message: str
    schema: dict[str, Any]  # {"type": "object", "properties": {...}, "required": [...]}: MCP elicitation's flat form

    def to_dict(self) -> dict[str, Any]:
        """The question as JSON-ready data."""
        return {"key": self.key, "message": self.message, "schema": self.schema}


@record
class InputResponse:
    """The answer to an :class:`InputRequest`: accepted with ``content`` (the schema's fields), declined or cancelled."""

    action: Action
    content: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The answer as the tool reads it in ``LLM_INPUT_RESPONSES``."""
        return {"action": self.action} if self.content is None else {"action": self.action, "content": self.content}


@record
class Caller:
    """Who asked for a call, as the audit log records it."""

    surface: str  # "cli", "api" or "mcp"
    user: str | None = None  # the operating-system user running toolexec
    client: str | None = None  # the MCP client's name and version, as its initialize said
    subject: str | None = None  # the bearer token's subject ("static token" for mcp.token_env's)

    def to_dict(self) -> dict[str, str]:
        """The fields that are known, for the audit line."""
        data = {"surface": self.surface, "user": self.user, "client": self.client, "subject": self.subject}
        return {key: value for key, value in data.items() if value is not None}


@record
class ToolCall:
    """A request to run one tool with JSON arguments.

    ``input_responses`` are the answers to questions the tool asked in earlier runs of this call (by key):
    the tool sees them in ``LLM_INPUT_RESPONSES`` (see :mod:`toolexec.asking`).
    """

    name: str
    arguments: Any
    call_id: str | None = None
    timeout: float | None = None
    # The OAuth scopes the caller's access token grants; None: no token to check (stdio, the CLI, the API).
    scopes: frozenset[str] | None = None
    input_responses: dict[str, InputResponse] | None = None


@record
class Artifact:
    """One file a tool returned by writing it into ``LLM_ARTIFACTS_DIR`` (see :mod:`toolexec.artifacts`).

    A small file comes back in the result itself (``data``); one past the call's inline budget is kept in the
    state directory for ``artifacts.ttl`` seconds (``path``; MCP offers it as a ``resource_link``). Exactly one
    of ``data`` and ``path`` is set.
    """

    name: str  # the file's name, sanitised: no path separator, no control character, at most 128 characters
    mime_type: str  # sniffed from the bytes for the common image and audio types, else guessed from the name
    size: int  # bytes
    data: bytes | None = None
    path: str | None = None

    @property
    def kind(self) -> Literal["image", "audio", "file"]:
        """``image`` or ``audio`` by MIME type, else ``file``."""
        major = self.mime_type.split("/", 1)[0]
        return "image" if major == "image" else "audio" if major == "audio" else "file"

    def read_bytes(self) -> bytes:
        """The file's bytes: ``data``, or the kept file (OSError once its time has passed and it was pruned)."""
        if self.data is not None:
            return self.data
        assert self.path is not None
        with open(self.path, "rb") as handle:
            return handle.read()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``data`` as base64 text when held, else ``path``."""
        import base64

        data: dict[str, Any] = {"name": self.name, "mime_type": self.mime_type, "size": self.size}
        if self.data is not None:
            data["data"] = base64.b64encode(self.data).decode("ascii")
        else:
            data["path"] = self.path
        return data


@record
class ToolResult:
    """What came of one call. A failed tool is a result, never an exception."""

    ok: bool
    status: Status
    output: str
    error: str | None
    exit_code: int | None
    stderr: str
    duration_ms: float
    tool_call_id: str
    tool_name: str
    signal: int | None = None
    # Loki's wording for a failed call, so a model sees what it would see there.
    tool_call_error: str | None = None
    notes: tuple[str, ...] = ()
    # The complete output / stderr when they were longer than max_output_bytes.
    output_file: str | None = None
    stderr_file: str | None = None
    # Why the call failed, as a closed vocabulary (None when it succeeded).
    reason: Reason | None = None
    # The question the tool asked (status "input_required"): answer it and call again with input_responses.
    input_request: InputRequest | None = None
    # The files the tool wrote into LLM_ARTIFACTS_DIR (images, audio, anything), in name order.
    artifacts: tuple[Artifact, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data (``toolexec run --json`` prints this); ``input_request`` only when set,
        ``artifacts`` only when there are any."""
        data = asdict(self)
        data["notes"] = list(self.notes)
        if self.input_request is None:  # only a call that asked carries it
            del data["input_request"]
        if self.artifacts:  # only when there are files: the shape of every other result is as it was
            data["artifacts"] = [artifact.to_dict() for artifact in self.artifacts]
        else:
            del data["artifacts"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        """The result :meth:`to_dict` made (as a task queue carries it back); fields it does not know are ignored."""
        values = {name: data[name] for name in field_names(cls) if name in data}
        values["notes"] = tuple(values.get("notes", ()))
        return cls(**values)
