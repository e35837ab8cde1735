"""Arguments checked against a tool's schema before anything is spawned.

Valid arguments are accepted by a compiled ``fastjsonschema`` validator (cheap
to import, fast to run); rejected ones are explained by ``jsonschema``, which
lists every problem at once. Unknown parameters are refused even though the
declaration shown to models does not say ``additionalProperties: false``.
"""

from __future__ import annotations

import functools
import json
import math
import sys

from toolexec import strictjson
from toolexec.errors import BadRequest, InvalidArguments, ToolBroken, brief, did_you_mean
from toolexec.strictjson import MAX_DIGITS

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    from toolexec.state import State

    Validator: TypeAlias = Callable[[str, dict[str, Any]], dict[str, Any]]

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


MAX_DEPTH = 100  # nesting of arguments; deeper would exhaust the recursion of the validators and encoders


def parse_arguments(raw: Any, tool: str) -> dict[str, Any]:
    """Arguments given as a JSON string (as OpenAI sends them) or already as an object.

    Only JSON is accepted (:mod:`toolexec.strictjson`: no NaN or Infinity, no number that overflows, no key
    twice), without a lone surrogate, at most :data:`MAX_DEPTH` levels deep (:func:`check_values`).
    """
    if isinstance(raw, (str, bytes)):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            return {}
        try:
            raw = strictjson.loads(text, MAX_DEPTH)
        except strictjson.NotJSON as exc:
            raise BadRequest(f"arguments for tool {tool!r} are not valid JSON: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BadRequest(f"arguments for tool {tool!r} must be a JSON object of parameter names to values, got {_kind(raw)}")
    check_values(raw, tool)
    return raw


def check_values(arguments: dict[str, Any], tool: str) -> None:
    """BadRequest unless every value is plain JSON a tool can be handed: finite numbers, integers
    Python can print, text without lone surrogates, string keys, at most MAX_DEPTH levels."""
    stack: list[tuple[Any, str, int]] = [(arguments, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadRequest(f"arguments for tool {tool!r} are nested more than {MAX_DEPTH} levels deep")
        problem = _value_problem(value)
        if problem is not None:
            raise BadRequest(f"parameter {where or '(arguments)'!r} of tool {tool!r} {problem}")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or _lone_surrogate(key):
                    raise BadRequest(f"arguments for tool {tool!r} have a key that is not text: {brief(key)}")
                stack.append((item, f"{where}.{key}" if where else key, depth + 1))
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value))


def _value_problem(value: Any) -> str | None:
    if value is None or isinstance(value, (bool, dict, list, tuple)):
        return None
    if isinstance(value, str):
        bad = _lone_surrogate(value)
        return f"holds a lone surrogate (U+{ord(bad):04X}), which is not Unicode text" if bad else None
    if isinstance(value, int):
        # 14,000 bits is about 4,200 digits: under Python's limit on converting to text
        return None if value.bit_length() <= 14000 else f"is an integer of more than {MAX_DIGITS} digits"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"is {value!r}, which is not a JSON number"
    return f"is not a JSON value (a {type(value).__name__})"


def _lone_surrogate(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None


def prepare_numbers(arguments: dict[str, Any], schema: dict[str, Any], tool: str, *, javascript: bool) -> dict[str, Any]:
    """Integral floats (``3.0``) for integer parameters become integers; for JavaScript, an integer
    a double cannot hold exactly (beyond 2^53 - 1) is refused rather than rounded."""
    properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    converted = dict(arguments)
    for name, value in arguments.items():
        spec = properties.get(name) if isinstance(properties, dict) else None
        if not isinstance(spec, dict):
            continue
        if spec.get("type") == "integer":
            converted[name] = _integral(value)
        elif spec.get("type") == "array" and isinstance(value, list) and (spec.get("items") or {}).get("type") == "integer":
            converted[name] = [_integral(item) for item in value]
    if javascript:
        stack: list[tuple[Any, str]] = [(converted, "")]
        while stack:
            value, where = stack.pop()
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > JS_SAFE_INTEGER:
                raise BadRequest(
                    f"parameter {where!r} of tool {tool!r} is {brief(value)}, beyond the integers a JavaScript number "
                    f"holds exactly (up to {JS_SAFE_INTEGER}); pass it as a string"
                )
            if isinstance(value, dict):
                stack.extend((item, f"{where}.{key}" if where else key) for key, item in value.items())
            elif isinstance(value, list):
                stack.extend((item, f"{where}[{index}]") for index, item in enumerate(value))
    return converted


JS_SAFE_INTEGER = 2**53 - 1


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


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
    """Python source of the fast validator of ``schema`` (made once per declaration, kept with the catalog).

    Made from what validation reads of the schema (no descriptions, titles or examples), once per such shape in a
    process: tools of one shape (``{"path": string}``…) share it, so a build generates code once per shape."""
    checked = _checked_part(schema)  # a new dict at every schema level: _strict's deep copy is not needed
    strict = {"type": "object", "properties": {}, **checked, "additionalProperties": False}
    return _code_for(json.dumps(strict, ensure_ascii=False))


@functools.lru_cache(maxsize=512)
def _code_for(strict_json: str) -> str:
    import fastjsonschema

    from toolexec.schemarefs import nonlocal_references

    strict = json.loads(strict_json)
    if nonlocal_references(strict):  # generating code resolves references: it would fetch them
        return ""
    try:
        # use_default=False: never write schema defaults into (the caller's) arguments
        code = fastjsonschema.compile_to_code(strict, use_default=False)
    except Exception:  # a schema it cannot turn into code: jsonschema alone checks it (see validator_from_code)
        return ""
    return _compact(code)


_RAISED = frozenset({"JsonSchemaValueException", "JsonSchemaValuesException", "JsonSchemaDefinitionException"})


def _compact(code: str) -> str:
    """``code`` whose raises carry nothing: a rejection is only a signal (:func:`explain` says what is wrong), and the
    message, value and sub-schema each raise builds are most of the text kept in every record and compiled per call."""
    import ast  # only a build generates validators

    try:
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                call = node.exc
                if isinstance(call.func, ast.Name) and call.func.id in _RAISED:
                    call.args, call.keywords = [], []
        return ast.unparse(tree)
    except (SyntaxError, RecursionError, ValueError):  # too deep to walk: kept as generated
        return code


# Keywords that only annotate (validation never reads them, nor does fastjsonschema with use_default=False) ...
_ANNOTATIONS = frozenset({"description", "title", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly"})
# ... and where a schema holds schemas: one, a list of them, or a map of names to them.
_SCHEMA = frozenset(
    {"items", "additionalItems", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
    | {"unevaluatedItems", "unevaluatedProperties"}
)
_SCHEMAS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def _checked_part(schema: Any) -> Any:
    """``schema`` without its annotations (values such as ``enum`` and ``const`` are kept as they are)."""
    if not isinstance(schema, dict):
        return schema
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _SCHEMAS and isinstance(value, list):
            value = [_checked_part(item) for item in value]
        elif key in _SCHEMA:
            value = _checked_part(value)
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            value = {name: _checked_part(item) for name, item in value.items()}
        kept[key] = value
    return kept


class _Rejected(ValueError):
    """Stands for fastjsonschema's exceptions in generated code, so running it imports nothing."""

    def __init__(self, message: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(message)


class _NoDecimal:
    """Stands for ``decimal.Decimal`` while nothing has imported decimal: no value can be one."""


# The generated code's own imports, replaced by the names above.
_IMPORTS = ("from decimal import Decimal", "from fastjsonschema import ")


def validator_from_code(schema: dict[str, Any], code: str, state: State | None = None) -> Validator:
    """The validator (see :func:`compile_validator`) whose fast check is ``code`` (from :func:`validator_code`); with
    ``state``, its compiled form is kept there for the next process (see :func:`_compiled`)."""
    strict = _strict(schema)
    refused = _unusable(strict)
    if refused is not None:
        return refused
    decimal = sys.modules.get("decimal")
    namespace: dict[str, Any] = {
        "Decimal": decimal.Decimal if decimal is not None else _NoDecimal,
        "JsonSchemaValueException": _Rejected,
        "JsonSchemaValuesException": _Rejected,
        "JsonSchemaDefinitionException": _Rejected,
    }
    source = "\n".join(line for line in code.splitlines() if not line.startswith(_IMPORTS))
    try:
        name = "<toolexec validator>"
        exec(compile(source, name, "exec") if state is None else state.compiled(source, name), namespace)
        fast = namespace["validate"]
    except Exception:  # no code, or code nesting past Python's limit (arrays ~20 deep): jsonschema alone
        fast = _slow(strict)
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


def _unusable(schema: dict[str, Any]) -> Validator | None:
    """A validator refusing every call when the schema refers outside itself: both validators would
    fetch the reference (over HTTP, or a ``file:`` path), and validation never touches the network."""
    from toolexec.schemarefs import describe, nonlocal_references

    found = nonlocal_references(schema)
    if not found:
        return None
    path, _, ref = found[0]
    return _refuse(f"its parameter schema refers to {ref!r} outside itself ({describe(path)}); toolexec never fetches a schema")


def _slow(schema: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A check like fastjsonschema's, by ``jsonschema``: raises ValueError when ``arguments`` do not match."""
    import jsonschema
    from referencing import Registry

    validator = jsonschema.Draft202012Validator(schema, registry=Registry())

    def check(arguments: dict[str, Any]) -> None:
        if not validator.is_valid(arguments):
            raise ValueError("invalid")

    return check


def _refuse(problem: str) -> Validator:
    def refuse(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolBroken(tool, [problem])

    return refuse


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


def _copied(value: Any) -> Any:
    """A deep copy of JSON data (what ``copy.deepcopy`` makes of it, without importing ``copy`` on a one-shot run)."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown parameters refused (models are shown it without additionalProperties)."""
    strict = _copied(schema)
    strict.setdefault("type", "object")
    strict.setdefault("properties", {})
    strict["additionalProperties"] = False
    return strict


def explain(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """Every way ``arguments`` breaks ``schema``, each naming the parameter, the expectation and the value."""
    import jsonschema
    from referencing import Registry

    # An empty registry: a reference outside the schema is unresolvable here, never fetched.
    validator = jsonschema.Draft202012Validator(schema, registry=Registry())
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
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):  # not a JSON value at all (an object, a cycle)
        text = "(not a JSON value)"
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
