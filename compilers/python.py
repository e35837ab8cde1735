"""Python tools: ``def run(...)`` with a Google-style docstring and type hints."""

from __future__ import annotations

import ast
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
from toolexec.compilers.docstring import Docstring, parse_docstring
from toolexec.records import Kwargs, ToolDeclaration

_SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_ARRAYS = {"list", "List", "Sequence", "MutableSequence", "Iterable", "set", "Set", "frozenset", "FrozenSet", "tuple", "Tuple"}
_OBJECTS = {"dict", "Dict", "Mapping", "MutableMapping"}
_KWARGS_HINT = "declare each parameter by name, e.g. def run(path: str, limit: int = 10)"


def compile_source(source: str, path: str) -> ToolDeclaration:
    diag = Diagnostics(path)
    root = parser("python").parse(source.encode("utf-8")).root_node
    syntax_errors(root, diag)
    name = tool_name(path, diag)
    run = _find_run(root)
    if run is None:
        diag.error(None, "no top-level function 'run'", 'define the tool as def run(...): """What it does."""')
        diag.raise_if_any()
    assert run is not None
    doc = _docstring(run, diag)
    properties, required = _parameters(run.child_by_field_name("parameters"), doc, diag)
    for documented in doc.args.keys() - properties.keys():
        diag.warn(run, f"docstring documents {documented!r}, which is not a parameter of run")
    spelling = {"timeout": "Timeout", "max_output_bytes": "Max output bytes"}
    declared = {key: doc.fields[field] for key, field in spelling.items() if field in doc.fields}
    limits = read_limits(declared, diag, run, "{name}: {value}", spelling)
    return finish(
        diag,
        source=source,
        path=path,
        name=name,
        description=doc.description,
        parameters=object_schema(properties, required),
        language="python",
        invocation=Kwargs(),
        limits=limits,
    )


def _find_run(root: Node) -> Node | None:
    found = None
    for node in root.named_children:
        if node.type == "decorated_definition":
            node = node.child_by_field_name("definition") or node
        if node.type == "function_definition" and text(node.child_by_field_name("name")) == "run":
            found = node  # a later definition replaces an earlier one, as in Python
    return found


def _docstring(run: Node, diag: Diagnostics) -> Docstring:
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
    return doc


def _parameters(params: Node | None, doc: Docstring, diag: Diagnostics) -> tuple[dict[str, Any], list[str]]:
    properties: dict[str, Any] = {}
    required: list[str] = []
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
        annotation = node.child_by_field_name("type")
        arg_doc = doc.args.get(name)
        if annotation is not None:
            schema, nullable = _schema(_type_expr(annotation), diag, annotation, top=True)
        elif arg_doc is not None and arg_doc.type:
            schema, nullable = _schema_from_text(arg_doc.type, diag, node)
        else:
            schema, nullable = {"type": "string"}, False
        if arg_doc is not None and arg_doc.description:
            schema["description"] = arg_doc.description
        value = node.child_by_field_name("value")
        if value is not None:
            default = _literal(value)
            default = list(default) if isinstance(default, tuple) else default
            if is_literal(default):
                schema["default"] = default
        elif not nullable:
            required.append(name)
        properties[name] = schema
    return properties, required


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
    return ("unknown", text(node))


def _schema(expr: TypeExpr, diag: Diagnostics, at: Node, *, top: bool = False) -> tuple[dict[str, Any], bool]:
    """JSON Schema for a type, and whether the type admits None (so it is optional)."""
    kind = expr[0]
    if kind == "quoted":
        _, quoted, inner = expr
        if inner is None:
            return _unknown(repr(quoted), diag, at, top), False
        return _schema(inner, diag, at, top=top)
    if kind == "name":
        name = expr[1]
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
            return _schema(members[0], diag, at, top=top)[0], nullable
        return _unknown(" | ".join(_describe(m) for m in expr[1]), diag, at, top), nullable
    if kind == "generic":
        return _generic(expr[1], expr[2], diag, at, top)
    return _unknown(_describe(expr), diag, at, top), False


def _generic(head: str, args: list[TypeExpr], diag: Diagnostics, at: Node, top: bool) -> tuple[dict[str, Any], bool]:
    if head == "Optional" and len(args) == 1:
        return _schema(args[0], diag, at, top=top)[0], True
    if head == "Union":
        return _schema(("union", args), diag, at, top=top)
    if head == "Annotated" and args:
        return _schema(args[0], diag, at, top=top)
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
            items = _schema(item_args[0], diag, at)[0]
            if items:
                schema["items"] = items
        return schema, False
    if head in _OBJECTS:
        schema = {"type": "object"}
        if len(args) == 2:
            value_schema = _schema(args[1], diag, at)[0]
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
