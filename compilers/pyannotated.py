"""What pydantic reads from a Python tool's types, read statically: ``Field(...)`` and ``Enum`` classes.

``Annotated[int, Field(ge=1, le=5, description="…")]`` (and ``x: int = Field(…)``) carries
bounds, a description, a title, examples and a default; ``annotated_types``' ``Ge``, ``Gt``,
``Le``, ``Lt``, ``Interval``, ``MultipleOf``, ``MinLen``, ``MaxLen`` and ``Len`` carry bounds,
and pydantic's ``StringConstraints`` a string's. Each becomes the JSON Schema keyword pydantic
writes for it. A ``class Color(str, Enum)`` (also ``IntEnum``, ``StrEnum``, a plain ``Enum``)
declared in the file becomes an ``enum`` of its members' values. Nothing is imported: values
must be literals, or names of module-level literal constants.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

from tree_sitter import Node

from toolexec.compilers.common import Diagnostics, enum_schema, text

_NUMERIC = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum", "multiple_of": "multipleOf"}
_SIZES = {  # min_length / max_length, by the type they bound
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}
# annotated_types' one-argument constraints, as the Field keyword they stand for.
_SINGLE = {
    "Ge": "ge",
    "Gt": "gt",
    "Le": "le",
    "Lt": "lt",
    "MultipleOf": "multiple_of",
    "MinLen": "min_length",
    "MaxLen": "max_length",
}
_FIELD_CALLS = {"Field", "StringConstraints", "Interval", "Len", *_SINGLE}
_ENUM_BASES = {"Enum", "IntEnum", "StrEnum"}
_ONLY = "it applies to {} parameters: drop it, or change the parameter's type"
UNSET = object()  # no value: not a literal, or no default given


class Unset:
    """A Field with no default (``Field()``, ``Field(...)``): the parameter is required."""


def assignments(block: Node | None) -> Iterator[Node]:
    """The assignment statements directly in a module or class body (``x = 1``, ``x: int``, ``x: int = 1``)."""
    for statement in block.named_children if block is not None else ():
        first = statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
        if first is not None and first.type == "assignment":
            yield first


def classes(root: Node) -> Iterator[tuple[Node, list[str]]]:
    """The classes defined at the top of a module (decorated ones too), each with its bases' last names."""
    for node in root.named_children:
        if node.type == "decorated_definition":
            node = node.child_by_field_name("definition") or node
        if node.type == "class_definition":
            bases = node.child_by_field_name("superclasses")
            yield node, [text(b).rsplit(".", 1)[-1] for b in bases.named_children] if bases is not None else []


def constants(root: Node) -> dict[str, Any]:
    """Module-level ``NAME = literal`` assignments (the last one wins, as when the module runs)."""
    found: dict[str, Any] = {}
    for assignment in assignments(root):
        left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
        if left is not None and left.type == "identifier" and right is not None:
            value = literal(right, {})
            if value is not UNSET:
                found[text(left)] = value
            else:
                found.pop(text(left), None)
    return found


def literal(node: Node, names: dict[str, Any]) -> Any:
    """The value of a literal expression or of a known constant's name; ``UNSET`` when it is neither."""
    if node.type in ("identifier", "attribute") and text(node) in names:
        return names[text(node)]
    try:
        return ast.literal_eval(text(node))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return UNSET


def is_field_call(name: str) -> bool:
    """Whether a call named ``name`` (``Field``, ``Ge`` …) is one whose constraints are read."""
    return name in _FIELD_CALLS


def apply_call(name: str, call: Node, schema: dict[str, Any], diag: Diagnostics, names: dict[str, Any]) -> Any:
    """Add what ``name(...)`` (at ``call``) says to ``schema``; the default it gives, :class:`Unset` or ``UNSET``."""
    arguments = call.child_by_field_name("arguments")
    positional: list[Node] = []
    keywords: dict[str, Node] = {}
    for child in arguments.named_children if arguments is not None else ():
        if child.type == "keyword_argument":
            keywords[text(child.child_by_field_name("name"))] = child.child_by_field_name("value")  # type: ignore[assignment]
        elif child.type != "comment":
            positional.append(child)
    if name in _SINGLE and positional:
        keywords.setdefault(_SINGLE[name], positional[0])
    elif name == "Len":
        for keyword, node in zip(("min_length", "max_length"), positional, strict=False):
            keywords.setdefault(keyword, node)
    default: Any = UNSET
    if name == "Field":
        default = Unset()
        given = keywords.pop("default", positional[0] if positional else None)
        if given is not None and text(given) != "...":
            default = _value(f"{name}(default=…)", given, diag, names)
        if "default_factory" in keywords:
            diag.warn(
                keywords.pop("default_factory"),
                "Field(default_factory=…) is not run when the tool is compiled; the parameter is required",
                "give a literal default instead: Field(default=[])",
            )
    for keyword, node in keywords.items():
        value = _value(f"{name}({keyword}=…)", node, diag, names)
        if value is not UNSET:
            written = f"{name}({value!r})" if name in _SINGLE and _SINGLE[name] == keyword else f"{name}({keyword}={value!r})"
            _constrain(schema, keyword, value, node, diag, written)
    return default


def _value(what: str, node: Node, diag: Diagnostics, names: dict[str, Any]) -> Any:
    value = literal(node, names)
    if value is UNSET:
        diag.warn(
            node,
            f"{what} is not a literal value; it is left out of the declaration",
            "write the value itself, or a module-level constant assigned a literal",
        )
    return list(value) if isinstance(value, tuple) else value


def _constrain(schema: dict[str, Any], keyword: str, value: Any, at: Node, diag: Diagnostics, written: str) -> None:
    """Add one constraint (``ge``, ``min_length`` …, written in the source as ``written``) to ``schema``."""
    kind = schema.get("type")
    call = written.split("(", 1)[0]
    if keyword in _NUMERIC:
        if not _number(value) or (keyword == "multiple_of" and value <= 0):
            diag.error(at, f"{written}: the bound must be a number", f"write {call}({keyword}=1)")
        elif kind not in ("integer", "number"):
            diag.error(at, f"{written} bounds a number, but the parameter is {_a(kind)}", _ONLY.format("int and float"))
        else:
            schema[_NUMERIC[keyword]] = value
    elif keyword in ("min_length", "max_length"):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            diag.error(at, f"{written}: a length is a whole number, 0 or more", f"write {call}({keyword}=1)")
        elif kind not in _SIZES:
            diag.error(
                at,
                f"{written} bounds a string, list or dict, but the parameter is {_a(kind)}",
                _ONLY.format("str, list and dict"),
            )
        else:
            schema[_SIZES[kind][keyword == "max_length"]] = value
    elif keyword == "pattern":
        _pattern(schema, value, written, at, diag)
    elif keyword in ("description", "title"):
        if not isinstance(value, str):
            diag.error(at, f"{written}: a {keyword} is text", f'write {call}({keyword}="…")')
        else:
            schema[keyword] = value
    elif keyword == "examples":
        if not isinstance(value, list):
            diag.error(at, f"{written}: examples are a list of values", f"write {call}(examples=[1, 2])")
        else:
            schema["examples"] = value
    elif keyword == "json_schema_extra" and isinstance(value, dict):
        schema.update(value)
    elif keyword == "deprecated" and value is True:
        schema["deprecated"] = True


def _pattern(schema: dict[str, Any], value: Any, written: str, at: Node, diag: Diagnostics) -> None:
    if not isinstance(value, str):
        diag.error(at, f"{written}: a pattern is text", 'write pattern=r"^[a-z]+$"')
    elif schema.get("type") != "string":
        diag.error(at, f"{written} matches text, but the parameter is {_a(schema.get('type'))}", _ONLY.format("str"))
    else:
        try:
            re.compile(value)
        except re.error as exc:
            diag.error(at, f"{written} is not a regular expression: {exc}", "fix the pattern")
            return
        schema["pattern"] = value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _a(kind: Any) -> str:
    names = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean"}
    return names.get(kind, f"an {kind}" if kind in ("array", "object") else "of another type")


class Enums:
    """The ``Enum`` classes declared at the top of the file, with their members' values."""

    def __init__(self, root: Node, diag: Diagnostics, names: dict[str, Any]) -> None:
        self.members: dict[str, dict[str, Any]] = {}
        for node, base_names in classes(root):
            if any(b in _ENUM_BASES for b in base_names):
                self._read(node, base_names, diag, names)

    def _read(self, node: Node, bases: list[str], diag: Diagnostics, names: dict[str, Any]) -> None:
        name = text(node.child_by_field_name("name"))
        members: dict[str, Any] = {}
        for assignment in assignments(node.child_by_field_name("body")):
            left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
            if left is None or right is None or left.type != "identifier" or text(left).startswith("_"):
                continue
            member = text(left)
            value = (
                self._auto(member, members, bases)
                if text(right).replace(" ", "") in ("auto()", "enum.auto()")
                else literal(right, names)
            )
            if value is UNSET or isinstance(value, (tuple, dict, set, bytes, type(None))):
                diag.warn(
                    right,
                    f"enum {name}.{member} has a value toolexec cannot read; {name} is declared as a string",
                    "give each member a literal string or number",
                )
                return
            members[member] = value
        if members:
            self.members[name] = members

    @staticmethod
    def _auto(member: str, members: dict[str, Any], bases: list[str]) -> Any:
        if "StrEnum" in bases:
            return member.lower()
        if "str" in bases:
            return UNSET  # str mix-in with auto(): the value depends on the Python version
        numbers = [v for v in members.values() if isinstance(v, int) and not isinstance(v, bool)]
        return max(numbers) + 1 if numbers else 1

    def __contains__(self, name: object) -> bool:
        return name in self.members

    def schema(self, name: str) -> dict[str, Any]:
        """An ``enum`` of the class's distinct values (aliases are one member), in order."""
        values: list[Any] = []
        for value in self.members[name].values():
            if value not in values:
                values.append(value)
        return enum_schema(values)

    def value(self, name: str, member: str) -> Any:
        """The value of ``name.member``, or ``UNSET``."""
        return self.members.get(name, {}).get(member, UNSET)
