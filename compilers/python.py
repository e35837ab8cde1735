"""Python tools: ``def run(...)`` with a Google-style docstring and type hints."""

from __future__ import annotations

import ast
import copy
from dataclasses import replace
from typing import Any

from tree_sitter import Node

from toolexec.compilers.common import (
    Diagnostics,
    enum_schema,
    finish,
    is_literal,
    object_schema,
    parser,
    read_limits,
    syntax_errors,
    text,
    tool_name,
)
from toolexec.compilers.docstring import LIST_FIELDS, META_FIELDS, Docstring, parse_docstring, split_examples
from toolexec.compilers.metadata import ANNOTATIONS, MetadataReader
from toolexec.compilers.pyannotated import (
    UNSET,
    Enums,
    Unset,
    apply_call,
    assignments,
    classes,
    constants,
    is_field_call,
    literal,
)
from toolexec.policy import FIELDS as SANDBOX_FIELDS
from toolexec.records import Kwargs, Limits, Metadata, ToolDeclaration

_SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_ARRAYS = {"list", "List", "Sequence", "MutableSequence", "Iterable", "set", "Set", "frozenset", "FrozenSet", "tuple", "Tuple"}
_OBJECTS = {"dict", "Dict", "Mapping", "MutableMapping"}
_KWARGS_HINT = "declare each parameter by name, e.g. def run(path: str, limit: int = 10)"


def compile_source(source: str, path: str) -> ToolDeclaration:
    """Compile a Python tool: ``def run(...)``, its docstring and type hints."""
    diag = Diagnostics(path)
    root = parser("python").parse(source.encode("utf-8")).root_node
    syntax_errors(root, diag)
    name = tool_name(path, diag)
    run = _find_run(root)
    if run is None:
        diag.error(None, "no top-level function 'run'", 'define the tool as def run(...): """What it does."""')
        diag.raise_if_any()
    assert run is not None
    diag.place("", run.child_by_field_name("name"))
    doc, literal = _docstring(run, diag)
    types = TypedDicts(root, diag)
    properties, required, call = _parameters(run.child_by_field_name("parameters"), doc, diag, types)
    for documented in doc.args.keys() - properties.keys():
        diag.warn(run, f"docstring documents {documented!r}, which is not a parameter of run")
    parameters = object_schema(properties, required)
    metadata, limits = _metadata(doc, literal or run, source, diag, parameters)
    output = _output_schema(run, types)
    if output is not None:
        metadata = replace(metadata, output_schema=output)
    return finish(
        diag,
        source=source,
        path=path,
        name=name,
        description=doc.description,
        parameters=parameters,
        language="python",
        invocation=call,
        limits=limits,
        metadata=metadata,
    )


_SPELL = {
    **{field: f"{section}:" for section, field in META_FIELDS.items()},
    "examples": "an Examples: entry",
    "errors": "an Errors: entry",
}


def _metadata(
    doc: Docstring, literal: Node, source: str, diag: Diagnostics, parameters: dict[str, Any]
) -> tuple[Metadata, Limits]:
    """The docstring's metadata fields, checked; positions point into the file."""
    lines = source.split("\n")

    def at(index: int, content: str = "") -> tuple[int, int]:
        row = literal.start_point[0] + doc.leading + index
        found = lines[row].find(content.split("\n", 1)[0][:30]) if row < len(lines) and content else -1
        return row, found if found >= 0 else literal.start_point[1]

    for index, message, hint in doc.warnings:
        diag.warn(at(index, message.split("'")[1]), message, hint)
    reader = MetadataReader(diag, _SPELL)
    limits: dict[str, str] = {}
    limit_at: tuple[int, int] | None = None
    for field in doc.meta:
        where = at(field.line, field.section)
        name = META_FIELDS.get(field.section) or LIST_FIELDS[field.section]
        if name in ("title", "summary"):
            reader.set_text(name, field.value, where)
        elif name == "tags":
            reader.add_tags(field.value, where)
        elif name == "scopes":
            reader.add_scopes(field.value, where)
        elif name in ANNOTATIONS:
            reader.set_flag(name, field.value, where)
        elif name == "icon":
            reader.set_icon(field.value, where)
        elif name in SANDBOX_FIELDS:
            reader.set_sandbox(name, field.value, where)
        elif name == "task":
            reader.set_task(field.value, where)
        elif name == "warm":
            reader.set_warm(field.value, where)
        elif name in ("max_concurrency", "rate"):
            reader.set_cap(name, field.value, where)
        elif name in ("timeout", "max_output_bytes"):
            limits[name], limit_at = field.value, where
        elif name == "examples":
            found, dropped = split_examples(field)
            if not found:
                diag.warn(
                    where,
                    f"{field.section}: holds no JSON object of arguments; it is left out of the tool's metadata",
                    'write each example as the arguments of a call, a JSON object: {"path": "."}',
                )
                continue
            for text, line, why in dropped:
                shown = text if len(text) <= 40 else text[:39] + "…"
                diag.warn(
                    at(line, text),
                    f"{field.section}: {shown!r} is {why}; it is left out of the tool's metadata",
                    'write each example as the arguments of a call, a JSON object: {"path": "."}',
                )
            for value, line in found:
                reader.add_example(value, at(line, "{"))
        else:
            for text, line in ([(field.value, field.line)] if field.value else []) + field.entries:
                reader.add_error(text, at(line, text))
    spelling = {"timeout": "Timeout", "max_output_bytes": "Max output bytes"}
    return reader.build(parameters, doc.description), read_limits(limits, diag, limit_at, "{name}: {value}", spelling)


def _output_schema(run: Node, types: TypedDicts) -> dict[str, Any] | None:
    """The output shape: run's return annotation when it names a TypedDict declared in the file, or a list of one
    (an array: MCP 2026-07-28 carries any shape)."""
    annotation = run.child_by_field_name("return_type")
    if annotation is None:
        return None
    expr = _type_expr(annotation)
    if expr[0] == "quoted" and expr[2] is not None:
        expr = expr[2]
    if expr[0] == "generic" and expr[1] in ("Awaitable", "Coroutine") and expr[2]:
        expr = expr[2][-1]
    if expr[0] == "name" and expr[1] in types:
        return types.schema(expr[1])
    if expr[0] == "generic" and expr[1] in ("list", "List", "Sequence") and len(expr[2]) == 1:
        item = expr[2][0]
        if item[0] == "name" and item[1] in types:
            return {"type": "array", "items": types.schema(item[1])}
    return None


class TypedDicts:
    """The types declared at the top of the file: ``TypedDict`` classes as object schemas by name, and with
    them the file's ``Enum`` classes and its literal constants (``Field(le=LIMIT)``)."""

    def __init__(self, root: Node, diag: Diagnostics) -> None:
        self.diag = diag
        self.names = constants(root)
        self.enums = Enums(root, diag, self.names)
        for enum, members in self.enums.members.items():
            self.names.update({f"{enum}.{member}": value for member, value in members.items()})
        self.classes: dict[str, Node] = {}
        self._done: dict[str, dict[str, Any]] = {}
        self._active: set[str] = set()
        for node, bases in classes(root):
            if "TypedDict" in bases:
                self.classes[text(node.child_by_field_name("name"))] = node

    def __contains__(self, name: object) -> bool:
        return name in self.classes

    def schema(self, name: str) -> dict[str, Any]:
        """The object schema of one TypedDict; a class that refers back to itself is an open object inside."""
        if name in self._done:
            return copy.deepcopy(self._done[name])
        if name in self._active:
            return {"type": "object"}
        node = self.classes[name]
        self._active.add(name)
        bases = node.child_by_field_name("superclasses")
        total = not any(
            b.type == "keyword_argument"
            and text(b.child_by_field_name("name")) == "total"
            and text(b.child_by_field_name("value")) == "False"
            for b in (bases.named_children if bases is not None else ())
        )
        properties: dict[str, Any] = {}
        required: list[str] = []
        for assignment in assignments(node.child_by_field_name("body")):
            annotation = assignment.child_by_field_name("type")
            if annotation is None:
                continue
            expr = _type_expr(annotation)
            wanted = total
            if expr[0] == "generic" and expr[1] in ("Required", "NotRequired") and expr[2]:
                wanted, expr = expr[1] == "Required", expr[2][0]
            field_schema, nullable = _schema(expr, self.diag, annotation, types=self)
            key = text(assignment.child_by_field_name("left"))
            properties[key] = field_schema
            if wanted and not nullable:
                required.append(key)
        self._active.discard(name)
        self._done[name] = object_schema(properties, required)
        return copy.deepcopy(self._done[name])


def _find_run(root: Node) -> Node | None:
    found = None
    for node in root.named_children:
        if node.type == "decorated_definition":
            node = node.child_by_field_name("definition") or node
        if node.type == "function_definition" and text(node.child_by_field_name("name")) == "run":
            found = node  # a later definition replaces an earlier one, as in Python
    return found


def _docstring(run: Node, diag: Diagnostics) -> tuple[Docstring, Node | None]:
    body = run.child_by_field_name("body")
    first = body.named_children[0] if body is not None and body.named_children else None
    literal = first.named_children[0] if first is not None and first.type == "expression_statement" else None
    raw = _literal(literal) if literal is not None and literal.type in ("string", "concatenated_string") else None
    doc = parse_docstring(raw) if isinstance(raw, str) else Docstring(description="")
    if not doc.description:
        what = "has no docstring" if raw is None else "has a docstring with no description"
        diag.error(
            run.child_by_field_name("name"),
            f"function 'run' {what}",
            'start the body with a docstring that says what the tool does: """Get the weather for a city."""',
        )
    return doc, literal if raw is not None else None


def _parameters(
    params: Node | None, doc: Docstring, diag: Diagnostics, types: TypedDicts
) -> tuple[dict[str, Any], list[str], Kwargs]:
    """The properties, the required names, and how run is called (what the runtime passes for a left-out
    parameter whose Python default is not a value: a ``Field(...)``, or none at all when optional by type)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    defaults: list[tuple[str, Any]] = []
    members: list[tuple[str, str, bool]] = []
    for node in params.named_children if params is not None else ():
        kind = node.type
        if kind == "positional_separator":
            diag.error(
                node, "positional-only marker '/' in run's parameters", "remove '/': toolexec passes every argument by keyword"
            )
            continue
        if kind == "keyword_separator":
            continue
        name_node = node.child_by_field_name("name") or (node.named_children[0] if node.named_children else node)
        if kind in ("list_splat_pattern", "dictionary_splat_pattern") or name_node.type.endswith("splat_pattern"):
            star = "**" if "dictionary" in (kind + name_node.type) else "*"
            diag.error(node, f"parameter '{star}{text(name_node).lstrip('*')}' cannot be described to a model", _KWARGS_HINT)
            continue
        name = text(name_node)
        diag.place(name, name_node)
        if name in properties:
            diag.error(
                node,
                f"parameter {name!r} is declared twice",
                "rename one: Python refuses a function with two parameters of one name",
            )
            continue
        annotation = node.child_by_field_name("type")
        arg_doc = doc.args.get(name)
        field_default: Any = UNSET
        if annotation is not None:
            expr = _unquoted(_type_expr(annotation))
            if expr[0] == "generic" and expr[1] == "Annotated" and expr[2]:
                schema, nullable, field_default = _annotated(expr[2], diag, annotation, True, types)
            else:
                schema, nullable = _schema(expr, diag, annotation, top=True, types=types)
            enum = _enum_of(expr, types)
            if enum is not None:
                members.append((name, *enum))
        elif arg_doc is not None and arg_doc.type:
            schema, nullable = _schema_from_text(arg_doc.type, diag, node)
        else:
            schema, nullable = {"type": "string"}, False
        if arg_doc is not None and arg_doc.description and "description" not in schema:  # Field's own wins, as in pydantic
            schema["description"] = arg_doc.description
        value = node.child_by_field_name("value")
        if value is not None and value.type == "call" and _call_name(value) == "Field":
            field_default = apply_call("Field", value, schema, diag, types.names)
            if isinstance(field_default, Unset):
                field_default = None if nullable else UNSET
            value = None  # the Python default is the Field itself: the runtime passes the value instead
        if value is not None:
            default = literal(value, types.names)
            default = list(default) if isinstance(default, tuple) else default
            if is_literal(default):
                schema["default"] = default
        elif field_default is not UNSET and not isinstance(field_default, Unset):
            if is_literal(field_default):
                schema["default"] = field_default
            defaults.append((name, field_default))
        elif nullable:
            defaults.append((name, None))
        else:
            required.append(name)
        properties[name] = schema
    return properties, required, Kwargs(defaults=tuple(defaults), enums=tuple(members))


def _annotated(
    args: list[TypeExpr], diag: Diagnostics, at: Node, top: bool, types: TypedDicts | None
) -> tuple[dict[str, Any], bool, Any]:
    """``Annotated[T, Field(...), Ge(1), …]``: T's schema with the constraints added, and Field's default."""
    schema, nullable = _schema(args[0], diag, at, top=top, types=types)
    default: Any = UNSET
    for meta in args[1:]:
        if meta[0] == "call" and is_field_call(meta[1]) and types is not None:
            given = apply_call(meta[1], meta[2], schema, diag, types.names)
            default = given if given is not UNSET else default
    return schema, nullable, default


def _enum_of(expr: TypeExpr, types: TypedDicts) -> tuple[str, bool] | None:
    """(class, whether each item) when a parameter takes a same-file Enum or a list of one; its members are passed."""
    expr = _unquoted(expr)
    if expr[0] == "generic" and expr[1] in ("Optional", "Annotated") and expr[2]:
        return _enum_of(expr[2][0], types)
    if (expr[0] == "generic" and expr[1] == "Union") or expr[0] == "union":
        members = [m for m in (expr[2] if expr[0] == "generic" else expr[1]) if m != ("name", "None")]
        return _enum_of(members[0], types) if len(members) == 1 else None
    if expr[0] == "name" and expr[1] in types.enums:
        return expr[1], False
    if expr[0] == "generic" and expr[1] in _ARRAYS and len(expr[2]) >= 1:
        inner = _enum_of(expr[2][0], types)
        return (inner[0], True) if inner is not None and not inner[1] else None
    return None


def _unquoted(expr: TypeExpr) -> TypeExpr:
    return expr[2] if expr[0] == "quoted" and expr[2] is not None else expr


def _call_name(node: Node) -> str:
    return text(node.child_by_field_name("function")).rsplit(".", 1)[-1]


# A normalised type expression: ("name", str) | ("generic", str, [args]) | ("union", [members])
# | ("value", literal) | ("ellipsis",) | ("unknown", source text).
TypeExpr = tuple[Any, ...]


def _type_expr(node: Node) -> TypeExpr:
    kind = node.type
    if kind == "type" and node.named_children:
        return _type_expr(node.named_children[0])
    if kind == "identifier":
        return ("name", text(node))
    if kind == "attribute":
        return ("name", text(node).rsplit(".", 1)[-1])
    if kind == "none":
        return ("name", "None")
    if kind == "ellipsis":
        return ("ellipsis",)
    if kind in ("string", "concatenated_string"):
        quoted = _literal(node)
        inner = _parse_annotation(quoted) if isinstance(quoted, str) else None
        return ("quoted", quoted, inner)
    if kind == "generic_type":
        head, *rest = node.named_children
        args = [a for r in rest if r.type == "type_parameter" for a in r.named_children]
        return ("generic", _type_expr(head)[1], [_type_expr(a) for a in args])
    if kind == "subscript":
        args = node.children_by_field_name("subscript")
        value = node.child_by_field_name("value")
        head_name = _type_expr(value)[1] if value is not None else text(node)
        return ("generic", head_name, [_type_expr(a) for a in args])
    if kind == "union_type" or (kind == "binary_operator" and text(node.child_by_field_name("operator")) == "|"):
        members = [_type_expr(child) for child in node.named_children]
        return ("union", [m for member in members for m in (member[1] if member[0] == "union" else [member])])
    if kind in ("integer", "float", "true", "false", "unary_operator"):
        return ("value", _literal(node))
    if kind == "call":
        return ("call", _call_name(node), node)
    return ("unknown", text(node))


def _schema(
    expr: TypeExpr, diag: Diagnostics, at: Node, *, top: bool = False, types: TypedDicts | None = None
) -> tuple[dict[str, Any], bool]:
    """JSON Schema for a type, and whether the type admits None (so it is optional)."""
    kind = expr[0]
    if kind == "quoted":
        _, quoted, inner = expr
        if inner is None:
            return _unknown(repr(quoted), diag, at, top), False
        return _schema(inner, diag, at, top=top, types=types)
    if kind == "name":
        name = expr[1]
        if types is not None and name in types:
            return types.schema(name), False
        if types is not None and name in types.enums:
            return types.enums.schema(name), False
        if name in _SCALARS:
            return {"type": _SCALARS[name]}, False
        if name in _ARRAYS:
            return {"type": "array"}, False
        if name in _OBJECTS:
            return {"type": "object"}, False
        if name == "None":
            return {}, True
        return _unknown(name, diag, at, top), False
    if kind == "union":
        members = [m for m in expr[1] if m != ("name", "None")]
        nullable = len(members) < len(expr[1])
        if len(members) == 1:
            return _schema(members[0], diag, at, top=top, types=types)[0], nullable
        return _unknown(" | ".join(_describe(m) for m in expr[1]), diag, at, top), nullable
    if kind == "generic":
        return _generic(expr[1], expr[2], diag, at, top, types)
    return _unknown(_describe(expr), diag, at, top), False


def _generic(
    head: str, args: list[TypeExpr], diag: Diagnostics, at: Node, top: bool, types: TypedDicts | None
) -> tuple[dict[str, Any], bool]:
    if head == "Optional" and len(args) == 1:
        return _schema(args[0], diag, at, top=top, types=types)[0], True
    if head == "Union":
        return _schema(("union", args), diag, at, top=top, types=types)
    if head == "Annotated" and args:
        return _annotated(args, diag, at, top, types)[:2]
    if head == "Literal":
        values = [a[1] for a in args if a[0] in ("value", "quoted")]
        nullable = ("name", "None") in args
        if len(values) + nullable != len(args) or not values:
            return _unknown(f"Literal[{', '.join(_describe(a) for a in args)}]", diag, at, top), nullable
        return enum_schema(values), nullable
    if head in _ARRAYS:
        schema: dict[str, Any] = {"type": "array"}
        item_args = args
        if head in ("tuple", "Tuple"):
            item_args = args[:1] if len(args) == 2 and args[1] == ("ellipsis",) else []
            if not item_args and len(set(map(repr, args))) == 1:
                item_args = args[:1]
        if item_args:
            items = _schema(item_args[0], diag, at, types=types)[0]
            if items:
                schema["items"] = items
        return schema, False
    if head in _OBJECTS:
        schema = {"type": "object"}
        if len(args) == 2:
            value_schema = _schema(args[1], diag, at, types=types)[0]
            if value_schema:
                schema["additionalProperties"] = value_schema
        return schema, False
    return _unknown(f"{head}[...]", diag, at, top), False


def _unknown(what: str, diag: Diagnostics, at: Node, top: bool) -> dict[str, Any]:
    # Inside a container an unknown type means "anything"; at the top a model
    # needs some type, so it gets a string and the author gets a warning.
    if not top:
        return {}
    diag.warn(at, f"type {what} has no JSON Schema equivalent; the parameter is declared as a string")
    return {"type": "string"}


def _describe(expr: TypeExpr) -> str:
    if expr[0] in ("name", "unknown"):
        return str(expr[1])
    if expr[0] in ("value", "quoted"):
        return repr(expr[1])
    if expr[0] == "generic":
        return f"{expr[1]}[...]"
    return expr[0]


def _parse_annotation(source: str) -> TypeExpr | None:
    root = parser("python").parse(f"def _(x: {source}): pass\n".encode()).root_node
    if root.has_error:
        return None
    params = root.named_children[0].child_by_field_name("parameters")
    annotation = params.named_children[0].child_by_field_name("type") if params and params.named_children else None
    return _type_expr(annotation) if annotation is not None else None


def _schema_from_text(type_text: str, diag: Diagnostics, at: Node) -> tuple[dict[str, Any], bool]:
    expr = _parse_annotation(type_text)
    if expr is None:
        return _unknown(repr(type_text), diag, at, True), False
    return _schema(expr, diag, at, top=True)


def _literal(node: Node) -> Any:
    """The value of a literal expression, or ``None`` when it is not one."""
    try:
        return ast.literal_eval(text(node))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
