"""JavaScript tools in three dialects, recognised by shape.

1. object-argument (llm-functions): ``@typedef {Object} Args`` + ``@property`` lines
   before ``exports.run = …`` / ``module.exports.run = …`` / ``export function run(args)``;
   called as ``run(args)``.
2. flat parameters: as TypeScript, types from ``@param {type}``; called positionally.
3. module (loaf): ``name``, ``description``, ``inputSchema`` (alias ``args``) and ``run``
   exported directly, as ``export default {…}``, ``export const tool = {…}`` or
   ``export const meta = {…}`` plus ``run``; called as ``run(input, context)``.
"""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from toolexec.compilers.common import Diagnostics, check_name, finish, object_schema, parser, syntax_errors, text, tool_name
from toolexec.compilers.jsdoc import JSDoc, is_jsdoc, parse_jsdoc
from toolexec.compilers.metadata import MetadataReader, did_you_mean, near_miss
from toolexec.compilers.schemacheck import check_input_schema, node_at
from toolexec.compilers.tstypes import NotLiteral, TypeContext, js_literal, parse_type_text
from toolexec.compilers.typescript import SANDBOX_TAGS, compile_flat, jsdoc_limits, jsdoc_metadata, parse_default
from toolexec.records import Metadata, Module, ObjectArgument, ToolDeclaration

_MODULE_KEYS = ("name", "description", "inputSchema", "args", "run")
# Metadata a module tool may export too (read by _module_metadata).
_MODULE_META_KEYS = (
    "title",
    "summary",
    "tags",
    "examples",
    "errors",
    "annotations",
    "outputSchema",
    "sandbox",
    "scope",
    "icon",
    "task",
    "maxConcurrency",
    "rate",
    "warm",
)


def compile_source(source: str, path: str) -> ToolDeclaration:
    """Compile a JavaScript tool in whichever dialect it is written (flat, object or module)."""
    if "node_modules" in path.replace("\\", "/").split("/"):
        diag = Diagnostics(path)
        diag.error(None, "files under node_modules/ are never tools", "move the tool into functions/tools/")
        diag.raise_if_any()
    root = parser("javascript").parse(source.encode("utf-8")).root_node
    module = _module_object(root)
    if module is not None:
        return _compile_module(source, path, root, *module)
    assigned = _assigned_run(root)
    doc_node = assigned[1] if assigned else _exported_run_statement(root)
    doc = _jsdoc_before(doc_node)
    if doc is not None and doc.find("typedef") and doc.find("property"):
        return _compile_object_args(source, path, root, doc, doc_node)
    return compile_flat(source, path, "javascript")


def _jsdoc_before(statement: Node | None) -> JSDoc | None:
    comment = statement.prev_named_sibling if statement is not None else None
    if comment is not None and comment.type == "comment" and is_jsdoc(text(comment)):
        return parse_jsdoc(text(comment), comment.start_point)
    return None


def _assigned_run(root: Node) -> tuple[Node, Node] | None:
    """``exports.run = fn`` or ``module.exports.run = fn``: (the function, its statement)."""
    for statement in root.named_children:
        expression = (
            statement.named_children[0] if statement.type == "expression_statement" and statement.named_children else None
        )
        if expression is None or expression.type != "assignment_expression":
            continue
        target = text(expression.child_by_field_name("left")).replace(" ", "")
        if target in ("exports.run", "module.exports.run"):
            value = expression.child_by_field_name("right")
            return (value if value is not None else expression), statement
    return None


def _exported_run_statement(root: Node) -> Node | None:
    for statement in root.named_children:
        declaration = statement.child_by_field_name("declaration") if statement.type == "export_statement" else None
        if declaration is not None and "function" in declaration.type and text(declaration.child_by_field_name("name")) == "run":
            return statement
    return None


def _compile_object_args(source: str, path: str, root: Node, doc: JSDoc, statement: Node | None) -> ToolDeclaration:
    diag = Diagnostics(path)
    diag.place("", statement)
    syntax_errors(root, diag)
    name = tool_name(path, diag)
    context = TypeContext(root, diag)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for tag in doc.find("property"):
        if not tag.name:
            diag.error(statement, "@property without a name", "write @property {string} name - what it is")
            continue
        diag.place(tag.name, doc.at(tag))
        node, _ = parse_type_text(tag.type or "string")
        schema = context.schema(node, top=True, ignore_case=True)[0] if node is not None else {"type": "string"}
        if tag.text:
            schema["description"] = tag.text
        if tag.default is not None:
            schema["default"] = parse_default(tag.default)
        if not tag.optional:
            required.append(tag.name)
        properties[tag.name] = schema
    if not doc.description:
        diag.error(statement, "the JSDoc block has no description", "start it with what the tool does: /** Get the weather. */")
    parameters = object_schema(properties, required)
    return finish(
        diag,
        source=source,
        path=path,
        name=name,
        description=doc.description,
        parameters=parameters,
        language="javascript",
        invocation=ObjectArgument(),
        limits=jsdoc_limits(doc, statement or root, diag),
        metadata=jsdoc_metadata(doc, diag, parameters, None),
    )


def _module_object(root: Node) -> tuple[str, dict[str, Node], Node] | None:
    """Where a module tool's fields live: (form, field nodes, anchor node), or None."""
    named: dict[str, Node] = {}
    for statement in root.named_children:
        if statement.type != "export_statement":
            continue
        value = statement.child_by_field_name("value")
        if value is not None and value.type == "object" and any(c.type == "default" for c in statement.children):
            return "default", _fields(value), statement
        declaration = statement.child_by_field_name("declaration")
        if declaration is None:
            continue
        if "function" in declaration.type and text(declaration.child_by_field_name("name")) == "run":
            named["run"] = declaration
        for declarator in declaration.named_children if declaration.type == "lexical_declaration" else ():
            key, init = text(declarator.child_by_field_name("name")), declarator.child_by_field_name("value")
            if init is None:
                continue
            if key in ("tool", "meta") and init.type == "object":
                fields = _fields(init)
                if key == "tool" or "run" in named or _has_exported_run(root):
                    return key, fields, statement
            named[key] = init  # every export, so a misspelt metadata field can be reported
    if "name" in named and ("inputSchema" in named or "args" in named or "description" in named):
        return "named", named, root
    return None


def _has_exported_run(root: Node) -> bool:
    return _exported_run_statement(root) is not None or any(
        text(d.child_by_field_name("name")) == "run"
        for s in root.named_children
        if s.type == "export_statement"
        and (decl := s.child_by_field_name("declaration")) is not None
        and decl.type == "lexical_declaration"
        for d in decl.named_children
    )


def _fields(node: Node) -> dict[str, Node]:
    fields: dict[str, Node] = {}
    for member in node.named_children:
        if member.type == "pair":
            key = member.child_by_field_name("key")
            value = member.child_by_field_name("value")
            if key is not None and value is not None:
                fields[text(key).strip("'\"")] = value
        elif member.type == "method_definition":
            fields[text(member.child_by_field_name("name"))] = member
        elif member.type == "shorthand_property_identifier":
            fields[text(member)] = member
    return fields


def _place_properties(properties: Node, diag: Diagnostics) -> None:
    """Where each property of an inputSchema's ``properties`` object literal is written (its key)."""
    for pair in properties.named_children if properties.type == "object" else ():
        key = pair.child_by_field_name("key") if pair.type == "pair" else None
        if key is not None:
            diag.place(text(key).strip("'\"`"), key)


def _compile_module(source: str, path: str, root: Node, form: str, fields: dict[str, Node], anchor: Node) -> ToolDeclaration:
    diag = Diagnostics(path)
    diag.place("", fields.get("run") or anchor)
    syntax_errors(root, diag)
    name = _string_field(fields, "name", diag, anchor)
    description = _string_field(fields, "description", diag, anchor)
    if name and check_name(name, diag, fields["name"]):
        diag.name = name
    schema_node = fields.get("inputSchema") or fields.get("args")
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    if schema_node is not None:
        try:
            value = js_literal(schema_node)
        except NotLiteral:
            value = None
        if not isinstance(value, dict):
            diag.error(
                schema_node, "inputSchema must be an object literal", 'write inputSchema: { type: "object", properties: { … } }'
            )
        elif value.get("type", "object") != "object":
            diag.error(
                schema_node,
                f"inputSchema must describe an object, not {value.get('type')!r}",
                'use type: "object" with properties',
            )
        elif check_input_schema(value, schema_node, diag):
            parameters = {"type": "object", **value}
            _place_properties(node_at(schema_node, ("properties",)), diag)
    if "run" not in fields and not (form in ("meta", "named") and _has_exported_run(root)):
        diag.error(anchor, "the module tool has no run function", "add run: async (input, context) => { … }")
    return finish(
        diag,
        source=source,
        path=path,
        name=name or tool_name(path, diag),
        description=description or "",
        parameters=parameters,
        language="javascript",
        invocation=Module(export=form),  # type: ignore[arg-type]
        metadata=_module_metadata(fields, diag, parameters, description or ""),
    )


# Module fields -> metadata fields; annotations are MCP's hint names inside `annotations`.
_MODULE_META = {
    "title": "title",
    "summary": "summary",
    "tags": "tags",
    "examples": "examples",
    "errors": "errors",
    "scope": "scopes",
    "icon": "icon",
}
_HINTS = {
    "readOnlyHint": "read_only",
    "destructiveHint": "destructive",
    "idempotentHint": "idempotent",
    "openWorldHint": "open_world",
}
_MODULE_SPELL = {
    **{field: key for key, field in _MODULE_META.items()},
    **{field: f"annotations.{hint}" for hint, field in _HINTS.items()},
    "examples": "an entry of examples",
    "errors": "an entry of errors",
    "output_schema": "outputSchema",
}


# Slightly over 50 lines: one check per exported metadata field, each a few lines, in field order.
def _module_metadata(fields: dict[str, Node], diag: Diagnostics, parameters: dict[str, Any], description: str) -> Metadata:
    """``title``, ``summary``, ``tags``, ``examples``, ``errors``, ``annotations`` and ``outputSchema`` literals."""
    reader = MetadataReader(diag, _MODULE_SPELL)
    known = [*_MODULE_KEYS, *_MODULE_META_KEYS, *_HINTS]
    for key, node in fields.items():
        if key in known and key not in _HINTS:
            continue
        meant = (
            near_miss(key, [*_MODULE_META, "annotations", "outputSchema", "sandbox", "task", "maxConcurrency", "rate", "warm"])
            if key not in _HINTS
            else "annotations"
        )
        if meant is not None:
            hint = f"write annotations: {{ {key}: true }}" if key in _HINTS else f"did you mean {meant!r}?"
            diag.warn(node, f"unknown field {key!r} in the module tool; it is ignored", hint)
    for key, field in _MODULE_META.items():
        found = fields.get(key)
        if found is None:
            continue
        node = found
        value = _literal_or_error(node, key, diag)
        if value is _MISSING:
            continue
        if field in ("title", "summary"):
            reader.set_text(field, value, node)
        elif field == "icon":
            reader.set_icon(value, node)
        elif field == "tags":
            reader.add_tags(value if isinstance(value, list) else None, node)
        elif field == "scopes":
            reader.add_scopes(value, node)
        else:
            items = node.named_children if node.type == "array" else []
            if not isinstance(value, list):
                diag.error(node, f"{key} must be an array", f"write {key}: [ … ]")
                continue
            for item, item_node in zip(value, items, strict=False):
                (reader.add_example if field == "examples" else reader.add_error)(item, item_node)
    annotations = fields.get("annotations")
    if annotations is not None:
        value = _literal_or_error(annotations, "annotations", diag)
        if value is not _MISSING and not isinstance(value, dict):
            diag.error(annotations, "annotations must be an object", "write annotations: { readOnlyHint: true }")
        elif isinstance(value, dict):
            hint_nodes = _fields(annotations)
            for hint, flag in value.items():
                at = hint_nodes.get(hint, annotations)
                if hint in _HINTS:
                    reader.set_flag(_HINTS[hint], flag, at, text=False)
                elif hint == "title":
                    if reader.title is None:
                        reader.set_text("title", flag, at)
                else:
                    diag.warn(
                        at,
                        f"unknown annotation {hint!r}; it is ignored",
                        f"annotations are {', '.join(_HINTS)}{did_you_mean(hint, _HINTS)}",
                    )
    if "sandbox" in fields:
        _module_sandbox(fields["sandbox"], reader, diag)
    if "task" in fields and (value := _literal_or_error(fields["task"], "task", diag)) is not _MISSING:
        reader.set_task(value, fields["task"])
    if "warm" in fields and (value := _literal_or_error(fields["warm"], "warm", diag)) is not _MISSING:
        reader.spell.setdefault("warm", "warm:")
        reader.set_warm(value, fields["warm"], shared=True)
    for key, field in (("maxConcurrency", "max_concurrency"), ("rate", "rate")):
        if key in fields and (value := _literal_or_error(fields[key], key, diag)) is not _MISSING:
            reader.spell.setdefault(field, key)
            reader.set_cap(field, value, fields[key])
    schema = fields.get("outputSchema")
    if schema is not None and (value := _literal_or_error(schema, "outputSchema", diag)) is not _MISSING:
        reader.set_output_schema(value, schema)
    return reader.build(parameters, description)


_MISSING = object()


def _module_sandbox(node: Node, reader: MetadataReader, diag: Diagnostics) -> None:
    """A module tool's ``sandbox: {network: "none", writes: ["cache"], fileSize: "10MiB", …}``."""
    value = _literal_or_error(node, "sandbox", diag)
    if value is _MISSING:
        return
    if not isinstance(value, dict):
        diag.error(node, "sandbox must be an object", 'write sandbox: { network: "none", writes: ["cache"] }')
        return
    at = _fields(node)
    for key, item in value.items():
        field = SANDBOX_TAGS.get(key)
        if field is None:
            diag.error(
                at.get(key, node),
                f"unknown sandbox key {key!r}",
                f"sandbox keys are {', '.join(SANDBOX_TAGS)}{did_you_mean(key, SANDBOX_TAGS)}",
            )
        else:
            reader.spell.setdefault(field, f"sandbox.{key}")
            reader.set_sandbox(field, item, at.get(key, node))


def _literal_or_error(node: Node, key: str, diag: Diagnostics) -> Any:
    try:
        return js_literal(node)
    except NotLiteral:
        diag.error(
            node, f"{key} must be a literal value", f"write {key} as a literal in the exported object, not a computed value"
        )
        return _MISSING


def _string_field(fields: dict[str, Node], key: str, diag: Diagnostics, anchor: Node) -> str | None:
    node = fields.get(key)
    try:
        value = js_literal(node) if node is not None else None
    except NotLiteral:
        value = None
    if not isinstance(value, str) or not value.strip():
        diag.error(
            node if node is not None else anchor,
            f"the module tool needs a literal string '{key}'",
            f'write {key}: "…" in the exported object',
        )
        return None
    return value.strip()
