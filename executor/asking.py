"""Asking the user mid-call: how a tool's question travels out and its answer back in, on every surface.

The convention (docs/mcp.md, "Asking the user"), the same for the four languages:

1. When the caller can answer questions, the tool's environment names a file in ``LLM_INPUT_REQUEST`` (and
   ``LLM_INPUT_RESPONSES`` holds the answers so far, ``{}`` at first). Where it is not set, nobody can be asked:
   the tool does what it does without an answer (a default, a refusal).
2. To ask, the tool writes one JSON object there, ``{"key": ..., "message": ..., "schema": ...}`` (``schema``: a
   flat JSON Schema object whose properties are strings, numbers, integers, booleans, enums or multi-select
   string arrays, as MCP elicitation allows), and ends. Whatever else it did in that run (its output, its
   exit status) is discarded.
3. The caller answers: ``accept`` with the schema's fields, ``decline`` or ``cancel``. toolexec runs the tool
   again with the same arguments and every answer so far in ``LLM_INPUT_RESPONSES`` (JSON keyed by request
   key: ``{"action": "accept", "content": {...}}``) and, for shell scripts, flat variables:
   ``LLM_ANSWER_<key>`` (the action) and ``LLM_ANSWER_<key>__<field>`` (a field's value: booleans ``true`` /
   ``false``, numbers as JSON, arrays one item a line).
4. A run that asks again starts the next round: at most :data:`MAX_ROUNDS` per call.

Nothing is held between rounds (no process, no connection): the answers travel with the call
(:attr:`toolexec.records.ToolCall.input_responses`), and over MCP's 2026-07-28 revision in the sealed
``requestState`` (:mod:`toolexec.mcp_asking`). This module parses and checks the tool's side (the request file)
and the caller's side (an answer against the question's schema); it imports nothing of the protocol.
"""

from __future__ import annotations

import json
import re

from toolexec.errors import BadRequest
from toolexec.records import InputRequest, InputResponse

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Mapping
    from typing import Any, TypeAlias

    from toolexec.runtimes.process import CallControl

    # The call path's answerer (toolexec.calls): called on the call's thread, it returns the answer (an
    # InputResponse or its JSON form), or None to hand the question back to the caller (an ``input_required``
    # result, answered by calling again with ``input_responses``).
    Asker: TypeAlias = Callable[[InputRequest], Any]
    from toolexec.approval import OnInput

__all__ = [
    "MAX_ROUNDS",
    "REQUEST_LIMIT",
    "REQUEST_VARIABLE",
    "RESPONSES_LIMIT",
    "RESPONSES_VARIABLE",
    "Asker",
    "OnInput",
    "answer_environment",
    "check_response",
    "parse_request",
    "parse_response",
]

REQUEST_VARIABLE = "LLM_INPUT_REQUEST"
RESPONSES_VARIABLE = "LLM_INPUT_RESPONSES"
ANSWER_PREFIX = "LLM_ANSWER_"
# Questions one call may ask (rounds): past it the call ends with an error, never a loop without end.
MAX_ROUNDS = 16
# The request file is read up to this size; a larger one is the tool's error.
REQUEST_LIMIT = 64 * 1024
# Every answer of one call together, as JSON: what one environment string can carry on Linux, with room.
RESPONSES_LIMIT = 64 * 1024

# A key names a shell variable part: letters, digits, single underscores between them (``__`` separates fields).
_KEY = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*")
_FIELD = re.compile(r"[A-Za-z0-9_]+")
_KEY_LIMIT = 64
_ACTIONS = ("accept", "decline", "cancel")
# What a property of a flat schema may say, by type (MCP's PrimitiveSchemaDefinition).
_COMMON = {"type", "title", "description", "default"}
_ALLOWED = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "enumNames", "oneOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
    "array": _COMMON | {"items", "minItems", "maxItems"},
}
_FORMATS = ("email", "uri", "date", "date-time")


def parse_request(text: str, tool: str) -> InputRequest:
    """The question a tool wrote to ``LLM_INPUT_REQUEST``; BadRequest naming what is wrong with it."""
    where = f"tool {tool!r} asked for input, but its request in $LLM_INPUT_REQUEST"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadRequest(f"{where} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRequest(f'{where} must be a JSON object {{"key", "message", "schema"}}, got {type(data).__name__}')
    unknown = sorted(set(data) - {"key", "message", "schema"})
    if unknown:
        raise BadRequest(f"{where} has unknown field {unknown[0]!r}: expected key, message and schema")
    key, message = data.get("key"), data.get("message")
    if not isinstance(key, str) or len(key) > _KEY_LIMIT or not _KEY.fullmatch(key):
        raise BadRequest(
            f"{where}: key must be letters and digits with single underscores between them, "
            f"at most {_KEY_LIMIT} characters, got {key!r}"
        )
    if not isinstance(message, str) or not message.strip():
        raise BadRequest(f"{where}: message must be the question's text, got {message!r}")
    schema = data.get("schema", {"type": "object", "properties": {}})
    _check_schema(schema, where)
    return InputRequest(key=key, message=message, schema=schema)


def _check_schema(schema: Any, where: str) -> None:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise BadRequest(f'{where}: schema must be a JSON Schema object {{"type": "object", "properties": {{...}}}}')
    unknown = sorted(set(schema) - {"type", "properties", "required", "title", "description", "$schema"})
    if unknown:
        raise BadRequest(f"{where}: schema has {unknown[0]!r}, which a flat elicitation schema does not allow")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise BadRequest(f"{where}: schema.properties must be an object")
    for name, prop in properties.items():
        _check_property(name, prop, f"{where}: schema.properties.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(not isinstance(name, str) or name not in properties for name in required):
        raise BadRequest(f"{where}: schema.required must list names of schema.properties, got {required!r}")


def _check_property(name: str, prop: Any, where: str) -> None:
    kind = prop.get("type") if isinstance(prop, dict) else None
    if kind not in _ALLOWED:
        raise BadRequest(f"{where} must have type string, number, integer, boolean or array, got {kind!r} (no nesting)")
    extra = sorted(set(prop) - _ALLOWED[kind])
    if extra:
        raise BadRequest(f"{where}: {extra[0]!r} is not allowed on a {kind} property of an elicitation schema")
    if "format" in prop and prop["format"] not in _FORMATS:
        raise BadRequest(f"{where}: format must be one of {', '.join(_FORMATS)}, got {prop['format']!r}")
    enum = prop.get("enum")
    if enum is not None and (not isinstance(enum, list) or not enum or any(not isinstance(v, str) for v in enum)):
        raise BadRequest(f"{where}: enum must be a non-empty list of strings")
    if kind == "array":
        items = prop.get("items")
        choices = items.get("enum") if isinstance(items, dict) else None
        if not (isinstance(choices, list) and choices and all(isinstance(v, str) for v in choices)):
            raise BadRequest(f'{where}: an array must be a multi-select, items {{"type": "string", "enum": [...]}}')


def parse_response(data: Any, where: str) -> InputResponse:
    """An answer given as JSON data (``{"action": ..., "content": {...}}``); BadRequest saying what is wrong."""
    if isinstance(data, InputResponse):
        return data
    if not isinstance(data, dict) or data.get("action") not in _ACTIONS:
        raise BadRequest(f'{where} must be {{"action": "accept" | "decline" | "cancel", "content": {{...}}}}, got {data!r:.200}')
    content = data.get("content")
    if content is not None and not isinstance(content, dict):
        raise BadRequest(f"{where}: content must be an object of the question's fields, got {type(content).__name__}")
    return InputResponse(action=data["action"], content=content if data["action"] == "accept" else None)


def check_response(request: InputRequest, response: Any) -> InputResponse:
    """``response`` (an :class:`InputResponse` or its JSON form) as an answer to ``request``: an accepted answer's
    content must fit the question's schema. BadRequest naming the field and what it expected."""
    where = f"the answer to {request.key!r}"
    answer = parse_response(response, where)
    if answer.action != "accept":
        return answer
    content = answer.content or {}
    import jsonschema  # only an answered question needs it
    from referencing import Registry

    checker = jsonschema.Draft202012Validator(
        {**request.schema, "additionalProperties": False}, registry=Registry(), format_checker=None
    )
    problems = sorted(checker.iter_errors(content), key=lambda e: list(e.absolute_path))
    if problems:
        at = ".".join(str(p) for p in problems[0].absolute_path)
        raise BadRequest(f"{where}{f' at {at}' if at else ''}: {problems[0].message}")
    return InputResponse(action="accept", content=content)


def responses_json(responses: Mapping[str, InputResponse]) -> str:
    """``LLM_INPUT_RESPONSES``: every answer so far, keyed; BadRequest past :data:`RESPONSES_LIMIT`."""
    text = json.dumps({key: answer.to_dict() for key, answer in responses.items()}, ensure_ascii=False)
    if len(text.encode("utf-8", "surrogatepass")) > RESPONSES_LIMIT:
        raise BadRequest(f"the answers to this call's questions come to more than {RESPONSES_LIMIT} bytes of JSON")
    return text


def answer_environment(responses: Mapping[str, InputResponse]) -> dict[str, str]:
    """The variables a tool reads its answers from: ``LLM_INPUT_RESPONSES`` and the flat ``LLM_ANSWER_*`` ones."""
    env = {RESPONSES_VARIABLE: responses_json(responses)}
    for key, answer in responses.items():
        env[f"{ANSWER_PREFIX}{key}"] = answer.action
        for name, value in (answer.content or {}).items():
            if value is None or not _FIELD.fullmatch(name):
                continue
            env[f"{ANSWER_PREFIX}{key}__{name}"] = _flat(value)
    return {name: value.replace("\0", "") for name, value in env.items()}


def _flat(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_flat(item) for item in value)
    return json.dumps(value)


def read_request(path: str, tool: str) -> InputRequest | None:
    """The question in the request file at ``path`` (None when the tool asked nothing); BadRequest when it is
    not a regular file or not a well-formed question."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadRequest(f"tool {tool!r} replaced $LLM_INPUT_REQUEST with a link ({exc.strerror})") from None
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadRequest(f"tool {tool!r} replaced $LLM_INPUT_REQUEST with something not a regular file")
        data = handle.read(REQUEST_LIMIT + 1)
    if not data.strip():
        return None
    if len(data) > REQUEST_LIMIT:
        raise BadRequest(f"tool {tool!r} wrote more than {REQUEST_LIMIT} bytes to $LLM_INPUT_REQUEST")
    return parse_request(data.decode("utf-8", "replace"), tool)


def on_thread(callback: OnInput) -> Asker:
    """``callback`` as the call path's answerer on a thread with no event loop: an async one is run to completion."""

    def ask(request: InputRequest) -> Any:
        answer = callback(request)
        if hasattr(type(answer), "__await__"):
            import asyncio

            return asyncio.run(_awaited(answer))
        return answer

    return ask


def on_loop(callback: OnInput, loop: asyncio.AbstractEventLoop, control: CallControl) -> Asker:
    """``callback`` as the answerer of a call awaited on ``loop`` (:meth:`toolexec.api.Executor.acall`): called on
    the loop (an async one awaited there), the call's thread waiting for it until the call is cancelled."""
    import asyncio
    import concurrent.futures

    async def answer(request: InputRequest) -> Any:
        given: Any = callback(request)
        return await given if hasattr(type(given), "__await__") else given

    def ask(request: InputRequest) -> Any:
        future = asyncio.run_coroutine_threadsafe(answer(request), loop)
        while True:
            try:
                return future.result(0.05)
            except concurrent.futures.TimeoutError:
                if control.cancelled:
                    future.cancel()
                    return None

    return ask


async def _awaited(answer: Any) -> Any:
    return await answer
