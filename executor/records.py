"""The records passed between stages: a compiled tool, a call, and its result.

A compiler produces a :class:`ToolDeclaration`; the catalog stores it, the
runtime receives it and the exporters read it. Only :meth:`ToolDeclaration.to_function`
is ever shown to a model; everything else is provenance for toolexec itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Language = Literal["python", "bash", "typescript", "javascript"]
# How a runtime hands the validated arguments to the tool's entry point.
Convention = Literal["kwargs", "positional", "object", "module", "argc"]
Status = Literal["ok", "error", "refused", "timeout", "cancelled", "unavailable"]

LANGUAGES: tuple[Language, ...] = ("python", "bash", "typescript", "javascript")


@dataclass(frozen=True, kw_only=True)
class ToolDeclaration:
    """One compiled tool: the wire declaration plus where it came from."""

    name: str
    description: str
    parameters: dict[str, Any]
    source: str
    language: Language
    convention: Convention
    # Interpreter named by the script's shebang, already split into argv.
    shebang: tuple[str, ...] = ()
    # Language-specific facts the runtime needs (positional order, @env, …).
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def to_function(self) -> dict[str, Any]:
        """The provider-neutral function declaration sent to a model."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolDeclaration:
        return cls(
            **{
                **data,
                "shebang": tuple(data.get("shebang", ())),
                "warnings": tuple(data.get("warnings", ())),
            }
        )


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A request to run one tool with JSON arguments."""

    name: str
    arguments: Any
    call_id: str | None = None
    timeout: float | None = None


@dataclass(frozen=True, kw_only=True)
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

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data
