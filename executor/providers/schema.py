"""Rewriting the one canonical parameter schema into what a provider accepts, without changing its meaning.

* :func:`strict_schema`: OpenAI strict mode (Structured Outputs) — ``additionalProperties:
  false`` on every object, every property required, optional ones made nullable, ``default``
  moved into the description. A schema that cannot be made so without changing what it
  accepts (a free-form object, a keyword strict mode does not support) gets ``None`` and why.
* :func:`gemini_schema`: Gemini's OpenAPI subset — one upper-case ``type`` with ``nullable``,
  string-only ``enum``, no ``additionalProperties``. ``None`` and why when the subset cannot say it.
* :func:`drop_optional_nulls`: the inverse of "optional made nullable": a ``null`` sent for an
  optional parameter that does not itself accept ``null`` means "absent".
"""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ["Unsupported", "drop_optional_nulls", "gemini_schema", "strict_schema"]

# What OpenAI's strict mode accepts (its "Supported schemas" list); anything else is refused by the API.
_STRICT_KEYWORDS = {
    "type",
    "description",
    "title",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
}
_STRICT_MAX_DEPTH = 10  # strict mode's nesting limit

# Gemini's Schema object: these keywords carry over (type and nullable are rewritten).
_GEMINI_KEYWORDS = {
    "description",
    "title",
    "format",
    "enum",
    "items",
    "properties",
    "required",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "minProperties",
    "maxProperties",
    "default",
    "anyOf",
}
_GEMINI_FORMATS = {"STRING": ("enum", "date-time"), "NUMBER": ("float", "double"), "INTEGER": ("int32", "int64")}
_GEMINI_DROPPED = {"$schema", "$comment", "examples", "additionalProperties"}  # annotations, or implied


class Unsupported(Exception):
    """The schema cannot be rewritten without changing its meaning; the message says where and why."""


def strict_schema(schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``(strict schema, None)``, or ``(None, why not)`` when strict mode would change its meaning."""
    root = {"type": "object", "properties": {}, **copy.deepcopy(schema)}
    try:
        return _strict(root, "parameters", 0), None
    except Unsupported as why:
        return None, str(why)


def _strict(node: dict[str, Any], where: str, depth: int) -> dict[str, Any]:
    if depth > _STRICT_MAX_DEPTH:
        raise Unsupported(f"{where}: nested deeper than strict mode's {_STRICT_MAX_DEPTH} levels")
    node = dict(node)
    if "default" in node:  # strict mode refuses 'default'; the model still reads it, the tool applies it
        default = node.pop("default")
        note = f"(default: {json.dumps(default, ensure_ascii=False)})"
        node["description"] = f"{node['description']} {note}" if node.get("description") else note
    unknown = sorted(set(node) - _STRICT_KEYWORDS)
    if unknown:
        raise Unsupported(f"{where}: strict mode does not support {', '.join(unknown)}")
    kinds = _kinds(node)
    if "object" in kinds or "properties" in node:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise Unsupported(f"{where}: an object with additionalProperties (free-form keys) cannot be strict")
        properties = node.get("properties")
        if not properties and "object" in kinds and where != "parameters":
            raise Unsupported(f"{where}: an object without declared properties (free-form) cannot be strict")
        properties = properties or {}
        required = set(node.get("required", ()))
        node["properties"] = {
            name: _strict(prop, f"{where}.{name}", depth + 1)
            if name in required
            else _nullable(_strict(prop, f"{where}.{name}", depth + 1))
            for name, prop in properties.items()
        }
        node["required"] = list(properties)
        node["additionalProperties"] = False
    if isinstance(node.get("items"), dict):
        node["items"] = _strict(node["items"], f"{where}[]", depth + 1)
    elif "items" in node:
        raise Unsupported(f"{where}: tuple-form items cannot be strict")
    if "anyOf" in node:
        node["anyOf"] = [_strict(branch, f"{where}|{i}", depth + 1) for i, branch in enumerate(node["anyOf"])]
    for key in ("$defs", "definitions"):
        if key in node:
            node[key] = {name: _strict(sub, f"{key}.{name}", depth + 1) for name, sub in node[key].items()}
    return node


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` that also accepts ``null`` (an optional parameter under strict mode)."""
    if _accepts_null(node):
        return node
    node = dict(node)
    if "anyOf" in node or "$ref" in node or "const" in node or "type" not in node:
        description = node.pop("description", None)
        wrapped: dict[str, Any] = {"anyOf": [node, {"type": "null"}]}
        return {"description": description, **wrapped} if description else wrapped
    node["type"] = [*_kinds(node), "null"]
    if "enum" in node:
        node["enum"] = [*node["enum"], None]
    return node


def _kinds(node: dict[str, Any]) -> list[Any]:
    """The types a schema names, as a list (empty when it names none)."""
    kind = node.get("type")
    return list(kind) if isinstance(kind, list) else ([] if kind is None else [kind])


def _accepts_null(node: Any) -> bool:
    """Whether ``node`` (a schema) accepts ``null`` as it is."""
    if not isinstance(node, dict):
        return False
    kinds = _kinds(node)
    if "enum" in node:
        return None in node["enum"]
    if "null" in kinds or node.get("nullable") is True:
        return True
    return any(_accepts_null(branch) for key in ("anyOf", "oneOf") for branch in node.get(key, ()))


def drop_optional_nulls(schema: dict[str, Any], arguments: Any) -> Any:
    """``arguments`` without the ``null`` values sent for optional parameters that do not accept ``null``.

    Strict mode makes optional parameters nullable, so a model sends ``null`` for "not
    given"; dropping it lets the tool's own default apply. Nested objects and arrays of
    objects are treated the same way; everything else is left for validation to judge.
    """
    if not isinstance(arguments, dict) or not isinstance(schema, dict):
        return arguments
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return arguments
    required = set(schema.get("required", ()))
    kept: dict[str, Any] = {}
    for name, value in arguments.items():
        prop = properties.get(name)
        if value is None and name not in required and isinstance(prop, dict) and not _accepts_null(prop):
            continue
        if isinstance(prop, dict) and isinstance(value, dict):
            value = drop_optional_nulls(prop, value)
        elif isinstance(prop, dict) and isinstance(value, list) and isinstance(prop.get("items"), dict):
            value = [drop_optional_nulls(prop["items"], item) for item in value]
        kept[name] = value
    return kept


def gemini_schema(schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``(schema in Gemini's OpenAPI subset, None)``, or ``(None, why not)``; ``({}, None)`` for no parameters."""
    if not schema.get("properties"):
        return {}, None  # Gemini refuses an empty parameter object: omit it
    try:
        return _gemini(schema, "parameters"), None
    except Unsupported as why:
        return None, str(why)


def _gemini(node: dict[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(node) - _GEMINI_KEYWORDS - _GEMINI_DROPPED - {"type", "nullable"})
    if unknown:
        raise Unsupported(f"{where}: Gemini's schema subset has no {', '.join(unknown)}")
    extra = node.get("additionalProperties")
    if extra not in (None, False) and not (extra is True and node.get("properties")):
        raise Unsupported(f"{where}: Gemini's schema subset has no free-form objects (additionalProperties)")
    out: dict[str, Any] = {}
    kinds = _kinds(node)
    nullable = "null" in kinds or node.get("nullable") is True
    kinds = [k for k in kinds if k != "null"]
    if len(kinds) > 1:
        raise Unsupported(f"{where}: Gemini's schema subset allows one type, not {' or '.join(kinds)}")
    if kinds:
        out["type"] = kinds[0].upper()
    elif "anyOf" not in node:
        raise Unsupported(f"{where}: Gemini's schema subset needs a type")
    if nullable:
        out["nullable"] = True
    for key, value in node.items():
        if key in _GEMINI_DROPPED or key in ("type", "nullable"):
            continue
        if key == "enum":
            values = [v for v in value if v is not None]
            if not all(isinstance(v, str) for v in values):
                raise Unsupported(f"{where}: Gemini's enum takes strings only, this one has {json.dumps(values)}")
            out["enum"], out["format"] = values, "enum"
        elif key == "format" and value not in _GEMINI_FORMATS.get(out.get("type", ""), ()):
            continue  # a format Gemini does not know is refused by the API; it only annotates
        elif key == "properties":
            out["properties"] = {name: _gemini(prop, f"{where}.{name}") for name, prop in value.items()}
        elif key == "items":
            out["items"] = _gemini(value, f"{where}[]")
        elif key == "anyOf":
            out["anyOf"] = [_gemini(branch, f"{where}|{i}") for i, branch in enumerate(value)]
        else:
            out[key] = copy.deepcopy(value)
    return out
