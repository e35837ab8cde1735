"""Arguments checked against a tool's schema before anything is spawned.

Valid arguments are accepted by a compiled ``fastjsonschema`` validator (cheap
to import, fast to run); rejected ones are explained by ``jsonschema``, which
lists every problem at once. Unknown parameters are refused even though the
declaration shown to models does not say ``additionalProperties: false``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from toolexec.errors import BadRequest, InvalidArguments, did_you_mean

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def parse_arguments(raw: Any, tool: str) -> dict[str, Any]:
    """Arguments given as a JSON string (as OpenAI sends them) or already as an object."""
    if isinstance(raw, (str, bytes)):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            return {}
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadRequest(
                f"arguments for tool {tool!r} are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        except RecursionError:
            raise BadRequest(f"arguments for tool {tool!r} are nested too deeply") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BadRequest(f"arguments for tool {tool!r} must be a JSON object of parameter names to values, got {_kind(raw)}")
    return raw


Validator = Callable[[str, dict[str, Any]], dict[str, Any]]


def compile_validator(schema: dict[str, Any]) -> Validator:
    """A validator for one tool's schema: ``validator(tool_name, arguments)`` returns the arguments to
    run with, or raises InvalidArguments.

    What models send is accepted as Loki and llm-functions accept it: a number or boolean for a
    ``string`` parameter (or item of a string array) becomes its JSON text, and ``null`` for an
    optional parameter means absent. Nothing else is loosened. Arguments that already match are
    returned as they are, after one compiled check.
    """
    return validator_from_code(schema, validator_code(schema))


def validator_code(schema: dict[str, Any]) -> str:
    """Python source of the fast validator of ``schema`` (made once per declaration, kept with the catalog)."""
    import fastjsonschema

    # use_default=False: never write schema defaults into (the caller's) arguments
    return fastjsonschema.compile_to_code(_strict(schema), use_default=False)


class _Rejected(ValueError):
    """Stands for fastjsonschema's exceptions in generated code, so running it imports nothing."""

    def __init__(self, message: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(message)


class _NoDecimal:
    """Stands for ``decimal.Decimal`` while nothing has imported decimal: no value can be one."""


# The generated code's own imports, replaced by the names above.
_IMPORTS = ("from decimal import Decimal", "from fastjsonschema import ")


def validator_from_code(schema: dict[str, Any], code: str) -> Validator:
    """The validator (see :func:`compile_validator`) whose fast check is ``code`` (from :func:`validator_code`)."""
    import sys

    strict = _strict(schema)
    decimal = sys.modules.get("decimal")
    namespace: dict[str, Any] = {
        "Decimal": decimal.Decimal if decimal is not None else _NoDecimal,
        "JsonSchemaValueException": _Rejected,
        "JsonSchemaValuesException": _Rejected,
        "JsonSchemaDefinitionException": _Rejected,
    }
    source = "\n".join(line for line in code.splitlines() if not line.startswith(_IMPORTS))
    exec(compile(source, "<toolexec validator>", "exec"), namespace)
    fast = namespace["validate"]
    loosen = _loosener(strict)

    def validate(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            fast(arguments)
            return arguments
        except RecursionError:
            raise InvalidArguments(tool, ["the arguments are nested too deeply"]) from None
        except Exception:  # the fast check's rejection; loosened, or explained below
            pass
        loosened = loosen(arguments)
        if loosened is not arguments:
            try:
                fast(loosened)
                return loosened
            except Exception:  # still wrong: explained below (without the loosened values)
                pass
        problems = explain(strict, loosened)
        raise InvalidArguments(tool, problems or ["the arguments do not match the tool's parameters"])

    return validate


def _loosener(schema: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """What turns a model's near-miss arguments into valid ones (see :func:`compile_validator`)."""
    properties = schema["properties"]
    required = set(schema.get("required", ()))
    strings = {n for n, s in properties.items() if isinstance(s, dict) and s.get("type") == "string"}
    string_lists = {
        n
        for n, s in properties.items()
        if isinstance(s, dict)
        and s.get("type") == "array"
        and isinstance(s.get("items"), dict)
        and s["items"].get("type") == "string"
    }

    def text(value: Any) -> Any:
        return json.dumps(value) if isinstance(value, (bool, int, float)) else value

    def loosen(arguments: dict[str, Any]) -> dict[str, Any]:
        changed: dict[str, Any] = {}
        for name, value in arguments.items():
            if value is None and name in properties and name not in required:
                changed[name] = _ABSENT
            elif name in strings and isinstance(value, (bool, int, float)):
                changed[name] = text(value)
            elif name in string_lists and isinstance(value, list) and any(isinstance(v, (bool, int, float)) for v in value):
                changed[name] = [text(v) for v in value]
        if not changed:
            return arguments
        merged = {**arguments, **changed}
        return {k: v for k, v in merged.items() if v is not _ABSENT}

    return loosen


_ABSENT = object()


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown parameters refused (models are shown it without additionalProperties)."""
    strict = copy.deepcopy(schema)
    strict.setdefault("type", "object")
    strict.setdefault("properties", {})
    strict["additionalProperties"] = False
    return strict


def explain(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """Every way ``arguments`` breaks ``schema``, each naming the parameter, the expectation and the value."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    problems: list[str] = []
    for error in errors:
        if error.validator == "enum" and tuple(error.absolute_path) in mistyped:
            continue  # "expected a string" already says it; the choices would only add noise
        problems.extend(_describe(error, schema))
    return list(dict.fromkeys(problems))  # 'required' is reported once per missing name


def _describe(error: Any, root: dict[str, Any]) -> list[str]:
    where = _path(error.absolute_path)
    rule, expected, value = error.validator, error.validator_value, error.instance
    if rule == "required":
        properties = error.schema.get("properties", {})
        missing = [name for name in expected if isinstance(value, dict) and name not in value]
        return [f"missing required parameter {_join(where, n)!r} ({_expected(properties.get(n, {}))})" for n in missing]
    if rule == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        extra = [k for k in value if k not in known] if isinstance(value, dict) else []
        return [f"unknown parameter {_join(where, k)!r}{did_you_mean(k, known) or _known(known)}" for k in extra]
    if rule == "type":
        return [f"parameter {where!r}: expected {_expected(error.schema)}, got {_kind(value)}"]
    if rule == "enum":
        allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in expected)
        return [f"parameter {where!r}: expected one of {allowed}, got {_show(value)}"]
    return [f"parameter {where or '(arguments)'!r}: {error.message}"]


def _expected(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "any value")
    kinds = kind if isinstance(kind, list) else [kind]
    text = " or ".join(_TYPE_NAMES.get(k, str(k)) for k in kinds)
    if kind == "array" and isinstance(schema.get("items"), dict) and "type" in schema["items"]:
        text += f" of {schema['items']['type']}s"
    return text


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array", dict: "an object"}
    if value is None:
        return "null"
    return f"{names.get(type(value), type(value).__name__)} {_show(value)}"


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _known(known: list[str]) -> str:
    return f"; known parameters: {', '.join(known)}" if known else "; this tool takes no parameters"
