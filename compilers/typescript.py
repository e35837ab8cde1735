"""TypeScript tools: ``export function run(...)`` with a JSDoc block and typed parameters.

The function-and-JSDoc reading here also serves JavaScript's flat-parameter dialect,
where types come from ``@param {type}`` instead of annotations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tree_sitter import Node

from toolexec.compilers.common import (
    LIMITS,
    Diagnostics,
    finish,
    is_literal,
    json_type_of,
    object_schema,
    parser,
    read_limits,
    syntax_errors,
    text,
    tool_name,
)
from toolexec.compilers.jsdoc import JSDoc, is_jsdoc, parse_jsdoc
from toolexec.compilers.metadata import MetadataReader, near_miss
from toolexec.compilers.tstypes import NotLiteral, TypeContext, js_literal, parse_type_text
from toolexec.policy import FIELDS as SANDBOX_FIELDS
from toolexec.records import Limits, Metadata, Positional, ToolDeclaration

if TYPE_CHECKING:
    from toolexec.records import Language

RUN_HINT = "write the tool as: export function run(city: string, days = 1) { ... }"


def compile_source(source: str, path: str) -> ToolDeclaration:
    """Compile a TypeScript tool: ``export function run(...)`` with its JSDoc and types."""
    return compile_flat(source, path, "typescript")


def compile_flat(source: str, path: str, language: Language) -> ToolDeclaration:
    """Compile the flat-parameter dialect shared by TypeScript and JavaScript."""
    diag = Diagnostics(path)
    root = parser(language).parse(source.encode("utf-8")).root_node
    syntax_errors(root, diag)
    name = tool_name(path, diag)
    found = find_run(root, diag)
    if found is None:
        diag.raise_if_any()
        diag.error(None, "no exported function 'run'", RUN_HINT)
        diag.raise_if_any()
    assert found is not None
    function, statement = found
    diag.place("", function.child_by_field_name("name") or function)
    doc = leading_jsdoc(statement, diag, function)
    context = TypeContext(root, diag)
    properties, required, order = flat_parameters(function, doc, context, diag, typed=language == "typescript")
    limits = jsdoc_limits(doc, function, diag)
    parameters = object_schema(properties, required)
    output = return_schema(function, context) if language == "typescript" else None
    return finish(
        diag,
        source=source,
        path=path,
        name=name,
        description=doc.description,
        parameters=parameters,
        language=language,
        invocation=Positional(order=tuple(order)),
        limits=limits,
        metadata=jsdoc_metadata(doc, diag, parameters, output),
    )


def return_schema(function: Node, context: TypeContext) -> dict[str, Any] | None:
    """The output shape: run's return type (``Promise<T>`` unwrapped) when it is an object type
    declared in the file (an interface, a type alias or an inline object type), or an array of one
    (``T[]``, ``Array<T>``: MCP 2026-07-28 carries any shape)."""
    node = function.child_by_field_name("return_type")
    while node is not None and node.type in ("type_annotation", "parenthesized_type") and node.named_children:
        node = node.named_children[-1]
    if node is not None and node.type == "generic_type" and text(node.named_children[0]) == "Promise":
        args = node.named_children[1].named_children if len(node.named_children) > 1 else []
        node = args[0] if len(args) == 1 else None
    if node is None:
        return None
    item = node
    if node.type == "array_type" and node.named_children:
        item = node.named_children[0]
    elif node.type == "generic_type" and text(node.named_children[0]) == "Array" and len(node.named_children) > 1:
        args = node.named_children[1].named_children
        item = args[0] if len(args) == 1 else node
    named = item.type == "type_identifier" and text(item) in context.named
    if not named and item.type != "object_type":
        return None
    schema = context.schema(item)[0]
    if schema.get("type") != "object":
        return None
    return schema if item is node else {"type": "array", "items": schema}


# The isolation policy's JSDoc tags (docs/sandbox.md): @network, @writes … @fileSize; a module tool's sandbox keys.
SANDBOX_TAGS = {("fileSize" if field == "file_size" else field): field for field in SANDBOX_FIELDS}
# JSDoc tag -> metadata field.
_META_TAGS = {
    "title": "title",
    "summary": "summary",
    "tags": "tags",
    "tag": "tags",
    "readOnly": "read_only",
    "destructive": "destructive",
    "idempotent": "idempotent",
    "openWorld": "open_world",
    "example": "examples",
    "throws": "errors",
    "exception": "errors",
    "error": "errors",
    "scope": "scopes",
    "icon": "icon",
    "task": "task",
    "maxConcurrency": "max_concurrency",
    "rate": "rate",
    "warm": "warm",
    **SANDBOX_TAGS,
}
# Tags of JSDoc itself (or read elsewhere) that are never reported as misspelt metadata.
_OTHER_TAGS = {
    *LIMITS,
    *[
        "param",
        "arg",
        "argument",
        "property",
        "prop",
        "typedef",
        "returns",
        "return",
        "type",
        "template",
        "callback",
        "async",
        "deprecated",
        "see",
        "since",
    ],
    *["author", "version", "license", "link", "description", "private", "public", "protected", "override", "module", "namespace"],
}
_JSDOC_SPELL = {
    **{field: f"@{tag}" for tag, field in _META_TAGS.items()},
    "tags": "@tags",
    "examples": "@example",
    "errors": "@throws",
}


def jsdoc_metadata(doc: JSDoc, diag: Diagnostics, parameters: dict[str, Any], output: dict[str, Any] | None) -> Metadata:
    """``@title``, ``@summary``, ``@tags``, ``@readOnly`` …, ``@example``, ``@throws`` from a JSDoc block."""
    reader = MetadataReader(diag, _JSDOC_SPELL)
    for tag in doc.tags:
        at = doc.at(tag)
        field = _META_TAGS.get(tag.tag)
        content = tag.text
        if field is None:
            meant = near_miss(tag.tag, _META_TAGS)
            if meant and (tag.tag not in _OTHER_TAGS or meant.lower() == tag.tag.lower()):
                diag.warn(at, f"unknown tag @{tag.tag}; it is ignored", f"did you mean @{meant}?")
        elif field in ("title", "summary"):
            reader.set_text(field, content, at)
        elif field == "icon":
            reader.set_icon(content, at)
        elif field == "tags":
            reader.add_tags(content, at)
        elif field == "scopes":
            reader.add_scopes(content, at)
        elif field == "examples":
            if content.startswith("{"):
                reader.add_example_text(content, at)
            else:
                diag.warn(
                    at,
                    "@example is not a JSON object of arguments; it is left out of the tool's metadata",
                    'write the arguments of one call: @example {"path": "."}',
                )
        elif field == "errors":
            kind = tag.type if tag.type not in ("Error", "*") else None  # a plain Error says nothing more
            reader.add_error(f"{kind}: {content}" if kind and content else (kind or content), at)
        elif field in SANDBOX_FIELDS:
            reader.set_sandbox(field, content, at)
        elif field == "task":
            reader.set_task(content, at)
        elif field == "warm":
            reader.set_warm(content, at, shared=True)
        elif field in ("max_concurrency", "rate"):
            reader.set_cap(field, content, at)
        else:
            reader.set_flag(field, content, at)
    if output is not None:
        reader.output_schema = output
    return reader.build(parameters, doc.description)


def find_run(root: Node, diag: Diagnostics) -> tuple[Node, Node] | None:
    """The exported ``run`` function and the statement that carries its JSDoc."""
    for statement in root.named_children:
        inner = statement.child_by_field_name("declaration") if statement.type == "export_statement" else statement
        if inner is None:
            continue
        if (
            inner.type in ("function_declaration", "generator_function_declaration")
            and text(inner.child_by_field_name("name")) == "run"
        ):
            if statement.type != "export_statement":
                diag.error(inner, "function 'run' is not exported", "add export: export function run(...)")
                return None
            return inner, statement
        if inner.type in ("lexical_declaration", "variable_declaration"):
            for declarator in inner.named_children:
                value = declarator.child_by_field_name("value")
                if text(declarator.child_by_field_name("name")) == "run" and value is not None and "function" in value.type:
                    form = "an arrow function" if value.type == "arrow_function" else "a function expression"
                    diag.error(declarator, f"'run' is {form} assigned to a variable", RUN_HINT)
                    return None
    return None


def leading_jsdoc(statement: Node, diag: Diagnostics, at: Node) -> JSDoc:
    """The JSDoc block right before the ``run`` statement (an error when there is none)."""
    comment = statement.prev_named_sibling
    while comment is not None and _is_overload(comment):  # overloads: the JSDoc before the first one
        comment = comment.prev_named_sibling
    if comment is not None and comment.type == "comment" and is_jsdoc(text(comment)):
        doc = parse_jsdoc(text(comment), comment.start_point)
        if doc.description:
            return doc
        diag.error(
            comment, "the JSDoc block has no description", "start it with what the tool does: /** Get the weather for a city. */"
        )
        return doc
    diag.error(at, "function 'run' has no JSDoc block", "put /** What the tool does. @param name - what it is */ right before it")
    return JSDoc(description="")


def _is_overload(statement: Node) -> bool:
    """Whether ``statement`` is an overload signature of run (``export function run(x: T): R;``)."""
    inner = statement.child_by_field_name("declaration") if statement.type == "export_statement" else statement
    return inner is not None and inner.type == "function_signature" and text(inner.child_by_field_name("name")) == "run"


# Long (~70 lines) on purpose: one pass over the parameter list keeps each parameter's order, type,
# default and JSDoc text together; split, the same per-parameter state would be passed around.
def flat_parameters(
    function: Node, doc: JSDoc, context: TypeContext, diag: Diagnostics, *, typed: bool
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The properties, required names and positional order of ``run``'s parameters."""
    params = {tag.name: tag for tag in doc.find("param") if tag.name}
    properties: dict[str, Any] = {}
    required: list[str] = []
    order: list[str] = []
    node_params = function.child_by_field_name("parameters")
    for param in node_params.named_children if node_params is not None else ():
        pattern = param.child_by_field_name("pattern") or param
        if pattern.type in ("rest_pattern", "rest_parameter"):
            diag.error(
                param,
                f"rest parameter '{text(pattern)}' cannot be described to a model",
                "declare each parameter by name: run(a: string, b?: number)",
            )
            continue
        if pattern.type in ("object_pattern", "array_pattern"):
            diag.error(
                param,
                "destructured parameter cannot be described to a model",
                "take named parameters instead: run(city: string, units?: string)",
            )
            continue
        if param.type == "assignment_pattern":  # JavaScript: name = default
            pattern = param.child_by_field_name("left") or param
        name = text(pattern)
        if pattern.type != "identifier" or name == "this":
            continue
        diag.place(name, pattern)
        if name in properties:
            diag.error(
                param,
                f"parameter {name!r} is declared twice",
                "rename one: a module refuses a function with two parameters of one name",
            )
            continue
        tag = params.get(name)
        annotation = param.child_by_field_name("type")
        if annotation is not None:
            schema, nullable = context.schema(annotation, top=True)
        elif tag is not None and tag.type:
            node, _ = parse_type_text(tag.type)
            schema, nullable = (
                context.schema(node, top=True, ignore_case=True) if node is not None else ({"type": "string"}, False)
            )
        else:
            schema, nullable = {"type": "string"}, False
        if typed and tag is not None and tag.type and tag.type.lower() in ("integer", "int") and schema.get("type") == "number":
            schema["type"] = "integer"
        if tag is not None and tag.text:
            schema["description"] = tag.text
        value = param.child_by_field_name("value") or param.child_by_field_name("right")
        optional = (
            param.type == "optional_parameter"
            or nullable
            or value is not None
            or (tag is not None and tag.optional and not typed)
        )
        default = (
            _default(value) if value is not None else (parse_default(tag.default) if tag is not None and tag.default else None)
        )
        if default is not None:
            if annotation is None and not (tag is not None and tag.type):
                schema = {**_inferred(default), **{k: v for k, v in schema.items() if k != "type"}}
            schema["default"] = default
        if not optional:
            required.append(name)
        properties[name] = schema
        order.append(name)
    return properties, required, order


def _inferred(default: Any) -> dict[str, Any]:
    """The type TypeScript infers from a literal default, for unannotated parameters."""
    if isinstance(default, list):
        return {"type": "array", "items": {"type": json_type_of(default[0])}} if default else {"type": "array"}
    kind = json_type_of(default)
    return {"type": "number" if kind == "integer" else kind}


def _default(node: Node) -> Any:
    try:
        value = js_literal(node)
    except NotLiteral:
        return None
    return value if is_literal(value) else None


def parse_default(raw: str) -> Any:
    """A JSDoc ``[name=default]`` value as a literal, or the raw text when it is not one."""
    root = parser("javascript").parse(f"({raw});".encode()).root_node
    expression = (
        root.named_children[0].named_children[0] if root.named_children and root.named_children[0].named_children else None
    )
    if expression is None or root.has_error:
        return raw
    if expression.type == "parenthesized_expression" and expression.named_children:
        expression = expression.named_children[0]
    value = _default(expression)
    return raw if value is None else value


def jsdoc_limits(doc: JSDoc, at: Node, diag: Diagnostics) -> Limits:
    """``@timeout 30`` and ``@max_output_bytes 65536`` from a JSDoc block."""
    found = {name: tags[0].text for name in LIMITS if (tags := doc.find(name))}
    return read_limits(found, diag, at, "@{name} {value}")
