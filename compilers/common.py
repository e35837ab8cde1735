"""What every language compiler shares: parsers, diagnostics and naming rules."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import tree_sitter

from toolexec.compilers.shebang import read_shebang
from toolexec.errors import CompileError, Problem
from toolexec.records import Invocation, Limits, Metadata, ToolDeclaration, limit_problem, name_problem
from toolexec.recordtype import replace

if TYPE_CHECKING:
    from toolexec.records import Language


@cache
def parser(grammar: str) -> tree_sitter.Parser:
    """A tree-sitter parser for one grammar, loaded on first use only."""
    loaders: dict[str, Callable[[], Any]] = {
        "python": lambda: __import__("tree_sitter_python").language(),
        "bash": lambda: __import__("tree_sitter_bash").language(),
        "javascript": lambda: __import__("tree_sitter_javascript").language(),
        "typescript": lambda: __import__("tree_sitter_typescript").language_typescript(),
    }
    return tree_sitter.Parser(tree_sitter.Language(loaders[grammar]()))


class Diagnostics:
    """Collects every problem in one file so they are reported together."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.errors: list[Problem] = []
        self.warnings: list[Problem] = []
        self.name: str | None = None  # the tool's name, once known: a broken tool is filed under it
        # Where the tool ("") and each of its parameters are declared, 1-based: for advice such as `check`'s.
        self.positions: dict[str, tuple[int, int]] = {}

    def place(self, key: str, at: tree_sitter.Node | tuple[int, int] | None) -> None:
        """Remember where parameter ``key`` (or the tool itself, for ``""``) is declared; the first place wins."""
        if at is not None:
            self.positions.setdefault(key, position(at))

    def error(self, at: tree_sitter.Node | tuple[int, int] | None, message: str, hint: str | None = None) -> None:
        """Record an error at a node or (row, column); reported with every other one."""
        self.errors.append(Problem(self.path, *position(at), message, hint))

    def warn(self, at: tree_sitter.Node | tuple[int, int] | None, message: str, hint: str | None = None) -> None:
        """Record a warning; the tool still builds."""
        self.warnings.append(Problem(self.path, *position(at), message, hint, severity="warning"))

    def raise_if_any(self) -> None:
        """Raise one CompileError holding every error recorded, in source order."""
        if self.errors:
            raise CompileError(self.path, sorted(self.errors, key=lambda p: (p.line, p.col)), name=self.name)

    def warning_texts(self) -> tuple[str, ...]:
        """The warnings as ``path:line:col: warning: …`` lines."""
        return tuple(str(w) for w in self.warnings)


def position(at: tree_sitter.Node | tuple[int, int] | None) -> tuple[int, int]:
    """1-based (line, column) of a node, or of a 0-based (row, column) pair."""
    if at is None:
        return (1, 1)
    row, col = at.start_point if isinstance(at, tree_sitter.Node) else at
    return (row + 1, col + 1)


def text(node: tree_sitter.Node | None) -> str:
    """A node's source text ('' for no node)."""
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def stem_name(path: str | PurePath) -> str:
    """The tool name a file gives: its name up to the first '.', with '-' turned into '_'."""
    return PurePath(path).name.split(".")[0].replace("-", "_")


def tool_name(path: str, diagnostics: Diagnostics) -> str:
    """The tool name from a file name, checked by the one name rule."""
    name = stem_name(path)
    if check_name(name, diagnostics, None) and diagnostics.name is None:
        diagnostics.name = name
    return name


def check_name(name: str, diagnostics: Diagnostics, at: tree_sitter.Node | None) -> bool:
    """Whether the one rule (:func:`toolexec.records.name_problem`) accepts ``name``; reported when not."""
    problem = name_problem(name)
    if problem is not None:
        diagnostics.error(at, problem, "rename the file (or the name field) to something like 'my_tool'")
    return problem is None


def syntax_errors(root: tree_sitter.Node, diagnostics: Diagnostics, limit: int = 5) -> None:
    """Report where tree-sitter could not parse the file at all."""
    found = 0
    stack = [root]
    while stack and found < limit:
        node = stack.pop()
        if not node.has_error:
            continue
        if node.is_error or node.is_missing:
            snippet = text(node).strip().split("\n", 1)[0][:40]
            what = f"missing {node.type!r}" if node.is_missing else f"unexpected text near {snippet!r}"
            diagnostics.error(node, f"syntax error: {what}", "fix the syntax so the file runs")
            found += 1
            continue
        stack.extend(reversed(node.children))


def is_literal(value: Any) -> bool:
    """Defaults worth showing a model: strings, numbers, booleans and lists of them."""
    if isinstance(value, (str, bool, int, float)):
        return True
    return isinstance(value, list) and all(isinstance(v, (str, bool, int, float)) for v in value)


def json_type_of(value: Any) -> str:
    """The JSON Schema type of a literal value."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "string"


def enum_schema(values: list[Any]) -> dict[str, Any]:
    """An enum typed by its values: one type, or a list when they are mixed."""
    types = list(dict.fromkeys(json_type_of(v) for v in values))
    if types == ["integer", "number"] or types == ["number", "integer"]:
        types = ["number"]
    return {"type": types[0] if len(types) == 1 else types, "enum": values}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An object schema with these properties, and ``required`` only when something is."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


# Per-tool call limits a script may declare: name -> (unit text, whether a whole number).
LIMITS = {"timeout": ("a number of seconds", False), "max_output_bytes": ("a whole number of bytes", True)}
# Units a limit may be written with ("2 hours", "90s", "1 MiB"); a bare number is seconds or bytes.
_UNITS: dict[str, dict[str, float]] = {
    "timeout": {"": 1, "ms": 0.001, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60,
                "mins": 60, "minute": 60, "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600},
    "max_output_bytes": {"": 1, "b": 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30},
}  # fmt: skip
_AMOUNT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")


def parse_limit(name: str, raw: str) -> float | int | None:
    """The value of limit ``name`` written as ``raw`` (a number and an optional unit), or None."""
    match = _AMOUNT.fullmatch(raw)
    factor = _UNITS[name].get(match.group(2).lower()) if match else None
    if match is None or factor is None:
        return None
    if LIMITS[name][1]:
        return int(match.group(1)) * int(factor) if match.group(1).isdigit() else None
    return float(match.group(1)) * factor


def read_limits(
    found: dict[str, str],
    diag: Diagnostics,
    at: tree_sitter.Node | tuple[int, int] | None,
    syntax: str,
    spelling: dict[str, str] | None = None,
) -> Limits:
    """Validated per-tool limits from ``{name: text}``: finite, positive and bounded (``LIMIT_BOUNDS``).

    ``syntax`` shows how the language writes one (``{name}``, ``{value}``) and
    ``spelling`` how it spells a limit's name, for messages.
    """
    limits: dict[str, Any] = {}
    for name, raw in found.items():
        unit, whole = LIMITS[name]
        spelled = (spelling or {}).get(name, name)
        value = parse_limit(name, raw)
        example = syntax.format(name=spelled, value=1048576 if whole else 30)
        written = syntax.format(name=spelled, value=raw[:40])
        problem = limit_problem(name, value, whole=whole) if value is not None else None
        if value is None or (problem is not None and value <= 0):
            units = "seconds, or a unit: ms, s, min, h" if not whole else "bytes, or a unit: KiB, MiB, GiB"
            diag.error(at, f"{written!r} is not {unit}", f"write {example} ({units})")
            continue
        if problem is not None:
            diag.error(at, f"{written!r} is too large: a {name} is {problem}", f"write {example}")
            continue
        limits[name] = value
    return Limits(**limits)


def finish(
    diag: Diagnostics,
    *,
    source: str,
    path: str,
    name: str,
    description: str,
    parameters: dict[str, Any],
    language: Language,
    invocation: Invocation,
    limits: Limits | None = None,
    metadata: Metadata | None = None,
    shebang: tuple[str, ...] | None = None,
) -> ToolDeclaration:
    """Raise every collected error, or assemble the declaration with its warnings."""
    diag.raise_if_any()
    return ToolDeclaration(
        name=name,
        description=description,
        parameters=parameters,
        source=path,
        language=language,
        invocation=invocation,
        shebang=read_shebang(source) if shebang is None else shebang,
        limits=limits or Limits(),
        metadata=metadata or Metadata(),
        warnings=diag.warning_texts(),
        positions=dict(diag.positions),
    )


def with_warnings(declarations: list[ToolDeclaration], diag: Diagnostics) -> list[ToolDeclaration]:
    """The declarations of one multi-function file, its warnings carried by the first (reported once per file)."""
    if not declarations and diag.warnings:  # what was skipped is why nothing is declared: said as errors
        found = [Problem(w.path, w.line, w.col, w.message, w.hint) for w in diag.warnings]
        nothing = Problem(diag.path, 1, 1, "this agent tools file declares no function a model can call")
        raise CompileError(diag.path, [nothing, *found])
    warnings = diag.warning_texts()
    if not warnings or not declarations:
        return declarations
    return [replace(declarations[0], warnings=warnings), *declarations[1:]]
