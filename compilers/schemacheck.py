"""A module tool's hand-written ``inputSchema``, checked at build time.

It must be a valid JSON Schema (the 2020-12 meta-schema, patterns that compile),
refer only to itself (a remote ``$ref`` would be fetched on every call), and
require only parameters it declares (unknown parameters are refused at call time,
so such a tool could never be called). Each problem is reported at the place in
the literal that holds it.
"""

from __future__ import annotations

import re
from typing import Any

from tree_sitter import Node

from toolexec.compilers.common import Diagnostics, text
from toolexec.compilers.metadata import did_you_mean
from toolexec.schemarefs import describe, nonlocal_references, references, resolve_pointer

_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_REF_HINT = 'copy the schema it names under $defs and write $ref: "#/$defs/<name>"'


def check_input_schema(value: dict[str, Any], node: Node, diag: Diagnostics) -> bool:
    """Report every problem of ``value`` (the literal at ``node``); True when there is none."""
    before = len(diag.errors)
    for path, key, ref in nonlocal_references(value):
        at = node_at(node, path)
        if key == "$id":
            diag.error(
                at,
                f"inputSchema has a nested $id ({describe(path)}), which changes what '#' refers to",
                "remove it; put shared parts under $defs",
            )
        else:
            diag.error(
                at, f"inputSchema refers to {ref!r} outside itself ({describe(path)}); toolexec never fetches a schema", _REF_HINT
            )
    for path, _, ref in references(value):
        if ref.startswith("#/") or ref == "#":
            try:
                resolve_pointer(value, ref)
            except KeyError:
                diag.error(
                    node_at(node, path),
                    f"$ref {ref!r} points at nothing in inputSchema",
                    "define it under $defs, or fix the path",
                )
    if len(diag.errors) == before:
        _meta_schema(value, node, diag)
    if len(diag.errors) == before:
        _required(value, node, diag)
    return len(diag.errors) == before


def _meta_schema(value: dict[str, Any], node: Node, diag: Diagnostics) -> None:
    # slow (~20 ms): only for a tool that writes a schema literal of its own
    from jsonschema import Draft202012Validator  # noqa: PLC0415
    from jsonschema.exceptions import best_match  # noqa: PLC0415

    # What Draft202012Validator.check_schema does, keeping the error's place in the literal.
    checker = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)
    error = best_match(checker.iter_errors(value))
    if error is None:
        return
    path = tuple(error.absolute_path)
    where = describe(path) or "(the schema)"
    at = node_at(node, path)
    last = path[-1] if path else None
    if (error.validator == "format" and error.validator_value == "regex") or last == "patternProperties":
        pattern = error.instance if isinstance(error.instance, str) else _bad_pattern(error.instance)
        diag.error(
            at,
            f"inputSchema {where}: {pattern!r} is not a regular expression ({_regex_error(pattern)})",
            "toolexec checks patterns with Python's re module; fix or remove the pattern",
        )
    elif "type" in (last, path[-2] if len(path) > 1 else None) and isinstance(error.instance, str):
        meant = did_you_mean(error.instance, _TYPES)
        diag.error(
            at, f"inputSchema {where}: {error.instance!r} is not a JSON Schema type{meant}", f"use one of {', '.join(_TYPES)}"
        )
    else:
        diag.error(
            at, f"inputSchema {where} is not valid JSON Schema: {error.message}", "write it as JSON Schema 2020-12 describes it"
        )


def _bad_pattern(patterns: Any) -> str:
    for pattern in patterns if isinstance(patterns, dict) else ():
        if _regex_error(pattern):
            return str(pattern)
    return str(patterns)


def _regex_error(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return ""


def _required(value: dict[str, Any], node: Node, diag: Diagnostics) -> None:
    """Every name the top-level ``required`` lists must be a property (no others are ever accepted)."""
    properties = value.get("properties", {})
    for index, name in enumerate(value.get("required", [])):
        if name not in properties:
            diag.error(
                node_at(node, ("required", index)),
                f"inputSchema requires {name!r}, which is not in its properties{did_you_mean(name, properties)}",
                "add it to properties, or remove it from required (the tool could never be called)",
            )


def node_at(node: Node, path: tuple[str | int, ...]) -> Node:
    """The node of the literal at ``path`` (object keys and array indexes); the deepest one found."""
    for part in path:
        child = None
        if node.type == "object" and isinstance(part, str):
            for pair in node.named_children:
                key = pair.child_by_field_name("key") if pair.type == "pair" else None
                if key is not None and text(key).strip("'\"") == part:
                    child = pair.child_by_field_name("value")
                    break
        elif node.type == "array" and isinstance(part, int):
            items = [c for c in node.named_children if c.type != "comment"]
            child = items[part] if part < len(items) else None
        if child is None:
            return node
        node = child
    return node
