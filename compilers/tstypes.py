"""TypeScript type nodes (and JSDoc ``{type}`` strings) to JSON Schema; JS literals to values."""

from __future__ import annotations

import json
import re
from typing import Any

from tree_sitter import Node

from toolexec.compilers.common import Diagnostics, enum_schema, object_schema, parser, text

_PRIMITIVES = {
    "string": "string",
    "number": "number",
    "boolean": "boolean",
    "integer": "integer",
    "int": "integer",
    "bool": "boolean",
}
_NULLISH = {"null", "undefined", "void"}


class TypeContext:
    """Interfaces, type aliases and enums declared in the same file, by name."""

    def __init__(self, root: Node | None, diag: Diagnostics) -> None:
        self.diag = diag
        self.named: dict[str, Node] = {}
        self._active: set[str] = set()
        for node in root.named_children if root is not None else ():
            inner = node.child_by_field_name("declaration") if node.type == "export_statement" else node
            if inner is not None and inner.type in ("interface_declaration", "type_alias_declaration", "enum_declaration"):
                self.named[text(inner.child_by_field_name("name"))] = inner

    def schema(self, node: Node | None, *, top: bool = False, ignore_case: bool = False) -> tuple[dict[str, Any], bool]:
        """The schema of a type, and whether null/undefined was one of its members."""
        if node is None:
            return {"type": "string"}, False
        kind = node.type
        if kind in ("type_annotation", "parenthesized_type") and node.named_children:
            return self.schema(node.named_children[-1], top=top, ignore_case=ignore_case)
        if kind in ("predefined_type", "type_identifier"):
            name = text(node)
            key = name.lower() if ignore_case else name
            if key in _PRIMITIVES:
                return {"type": _PRIMITIVES[key]}, False
            if key in ("object", "Object"):
                return {"type": "object"}, False
            if key in ("array", "Array"):
                return {"type": "array"}, False
            if key in _NULLISH:
                return {}, True
            if name in self.named and name not in self._active:
                return self._named(name, node, top), False
            return self._unknown(name, node, top), False
        if kind == "literal_type":
            if text(node) in _NULLISH:
                return {}, True
            try:
                return enum_schema([js_literal(node.named_children[0])]), False
            except (NotLiteral, IndexError):
                return self._unknown(text(node), node, top), False
        if kind == "union_type":
            return self._union(_flatten(node), node, top, ignore_case)
        if kind == "array_type":
            return _array(self.schema(node.named_children[0], ignore_case=ignore_case)[0]), False
        if kind == "generic_type":
            head = text(node.named_children[0])
            args = [a for a in node.named_children[1].named_children] if len(node.named_children) > 1 else []
            if head in ("Array", "ReadonlyArray") and len(args) == 1:
                return _array(self.schema(args[0], ignore_case=ignore_case)[0]), False
            if head == "Record" and len(args) == 2:
                values = self.schema(args[1], ignore_case=ignore_case)[0]
                return ({"type": "object", "additionalProperties": values} if values else {"type": "object"}), False
            return self._unknown(text(node), node, top), False
        if kind in ("object_type", "interface_body"):
            return self._object(node), False
        if kind == "readonly_type" and node.named_children:
            return self.schema(node.named_children[0], top=top, ignore_case=ignore_case)
        return self._unknown(text(node), node, top), False

    def _union(self, members: list[Node], at: Node, top: bool, ignore_case: bool) -> tuple[dict[str, Any], bool]:
        schemas = [self.schema(m, ignore_case=ignore_case) for m in members]
        nullable = any(n for _, n in schemas)
        kept = [s for s, n in schemas if not n]
        if len(kept) == 1:
            return kept[0], nullable
        if kept and all("enum" in s for s in kept):
            values = [v for s in kept for v in s["enum"]]
            return enum_schema(values), nullable
        if kept and all(s == {"type": "boolean"} or s.get("enum") in ([True], [False]) for s in kept):
            return {"type": "boolean"}, nullable
        return self._unknown(" | ".join(text(m) for m in members), at, top), nullable

    def _named(self, name: str, at: Node, top: bool) -> dict[str, Any]:
        declaration = self.named[name]
        if declaration.type == "enum_declaration":
            values = _enum_values(declaration)
            return enum_schema(values) if values else self._unknown(f"{name} (an enum with computed members)", at, top)
        self._active.add(name)
        try:
            body = declaration.child_by_field_name("body") or declaration.child_by_field_name("value")
            return self.schema(body)[0]
        finally:
            self._active.discard(name)

    def _object(self, node: Node) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        required: list[str] = []
        for member in node.named_children:
            if member.type != "property_signature":
                continue
            name = text(member.child_by_field_name("name")).strip("'\"")
            optional = any(c.type == "?" for c in member.children)
            schema, nullable = self.schema(member.child_by_field_name("type"))
            properties[name] = schema or {"type": "string"}
            if not optional and not nullable:
                required.append(name)
        return object_schema(properties, required)

    def _unknown(self, what: str, at: Node, top: bool) -> dict[str, Any]:
        if not top:
            return {}
        self.diag.warn(at, f"type {what} has no JSON Schema equivalent; the parameter is declared as a string")
        return {"type": "string"}


def _enum_values(declaration: Node) -> list[str | int | float]:
    """The runtime values of a TypeScript enum's members (numbered on from the last number, as tsc
    does), or [] when a member is computed."""
    values: list[str | int | float] = []
    following: int | float | None = 0
    body = declaration.child_by_field_name("body")
    for member in body.named_children if body is not None else ():
        if member.type == "comment":
            continue
        if member.type == "enum_assignment":
            try:
                value = js_literal(member.named_children[-1])
            except NotLiteral:
                return []
        elif member.type == "property_identifier" and following is not None:
            value = following
        else:
            return []
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return []
        values.append(value)
        following = None if isinstance(value, str) else value + 1
    return values


def _flatten(node: Node) -> list[Node]:
    """The members of a union in order; iterative, as the grammar nests ``a | b | c`` one level per member."""
    members: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "union_type":
            stack.extend(reversed(current.named_children))
        else:
            members.append(current)
    return members


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items} if items else {"type": "array"}


def parse_type_text(type_text: str) -> tuple[Node | None, Node]:
    """A JSDoc type string parsed as a TypeScript type (the node, and the tree root)."""
    root = parser("typescript").parse(f"let _: {type_text};".encode()).root_node
    if root.has_error:
        return None, root
    annotation = next((n for n in _walk(root) if n.type == "type_annotation"), None)
    return annotation, root


def _walk(node: Node) -> list[Node]:
    found = [node]
    for child in node.named_children:
        found.extend(_walk(child))
    return found


class NotLiteral(ValueError):
    """The expression is not a literal value (a call, a variable, …)."""

    pass


def js_literal(node: Node) -> Any:
    """The value of a JS literal (strings, numbers, booleans, null, arrays and objects of those)."""
    kind = node.type
    if kind == "string":
        raw = text(node)
        body = raw[1:-1]
        if raw[0] == "'":
            body = body.replace('\\"', '"').replace('"', '\\"').replace("\\'", "'")
        try:
            return json.loads(f'"{body}"')
        except json.JSONDecodeError:
            return body
    if kind == "template_string" and not any(c.type == "template_substitution" for c in node.named_children):
        return text(node)[1:-1]
    if kind == "number":
        raw = text(node).replace("_", "")
        try:
            return int(raw, 0) if re.fullmatch(r"0[xob][0-9a-f]+|\d+", raw, re.I) else float(raw)
        except ValueError:
            raise NotLiteral(raw) from None
    if kind in ("true", "false"):
        return kind == "true"
    if kind == "null":
        return None
    if kind == "unary_expression" and text(node.child_by_field_name("operator")) in "-+" and node.named_children:
        value = js_literal(node.named_children[-1])
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if text(node.child_by_field_name("operator")) == "-" else value
    if kind == "array":
        return [js_literal(child) for child in node.named_children]
    if kind == "object":
        result: dict[str, Any] = {}
        for pair in node.named_children:
            if pair.type == "shorthand_property_identifier":
                raise NotLiteral(text(pair))
            if pair.type != "pair":
                raise NotLiteral(text(pair))
            key_node = pair.child_by_field_name("key")
            key = js_literal(key_node) if key_node is not None and key_node.type == "string" else text(key_node)
            value_node = pair.child_by_field_name("value")
            result[str(key)] = js_literal(value_node) if value_node is not None else None
        return result
    if kind in ("parenthesized_expression", "as_expression", "satisfies_expression") and node.named_children:
        return js_literal(node.named_children[0])
    raise NotLiteral(text(node))
