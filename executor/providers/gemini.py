"""Google Gemini: ``functionDeclarations`` out, ``functionCall`` parts in, ``functionResponse`` parts back.

Accepted input (parsed JSON): a list of parts holding ``functionCall`` parts, a content
(``{"role": "model", "parts": [...]}``), a whole response (``{"candidates": [...]}``,
every candidate's calls), or the google-genai SDK's ``response.function_calls`` (a list
of ``{"name", "args", "id"}``); other parts (text, thought) are ignored. The SDK's own
dumps are read as they come (``model_dump()`` spells ``function_call``, ``to_json_dict()``
and the API ``functionCall``; a ``null`` field is an absent one). The answer is a list
of ``functionResponse`` parts (``response.output`` on success, ``response.error`` on
failure), or one ``user`` content holding them when a content or response came in. A
call's ``id`` is echoed back when the model sent one.

Declarations: ``{name, description, parameters}`` with the parameters in Gemini's
OpenAPI subset; a tool with no parameters has none; a schema the subset cannot say
(non-string enums, several types, free-form objects) is sent as ``parametersJsonSchema``
instead, as it is when ``json_schema`` is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolexec.providers import Batch, Declared, Sent, content, files, refusal, sent_of
from toolexec.providers.names import GEMINI_NAMES
from toolexec.providers.schema import gemini_schema
from toolexec.records import ToolCall, ToolDeclaration, ToolResult

NAME = "gemini"
SHAPE = (
    "a list of parts holding functionCall parts, a content with 'parts', a response with 'candidates', "
    "or the SDK's function_calls list"
)
NAMES = GEMINI_NAMES


def declare(tool: ToolDeclaration, name: str, *, json_schema: bool = False) -> Declared:
    """The ``functionDeclarations`` entry of ``tool`` under ``name``."""
    declaration: dict[str, Any] = {"name": name, "description": tool.description}
    canonical = tool.to_function()["parameters"]
    if json_schema:
        return Declared({**declaration, "parametersJsonSchema": canonical})
    parameters, why = gemini_schema(canonical)
    if parameters is None:
        return Declared({**declaration, "parametersJsonSchema": canonical}, f"sent as parametersJsonSchema ({why})")
    return Declared({**declaration, "parameters": parameters} if parameters else declaration)


# A part's call and a call's fields, as the API spells them (camelCase) and as the google-genai SDK's
# model_dump() does (snake_case, every unset field present as None).
CALL_KEYS = ("functionCall", "function_call")
FUNCTION_CALL_FIELDS = frozenset({"id", "name", "args", "partialArgs", "partial_args", "willContinue", "will_continue"})
# Parts that hold no call: text, thoughts.
OTHER_PART_KEYS = ("text", "thought", "thoughtSignature", "thought_signature")


def claims(data: Any) -> bool:
    """A response with ``candidates``, a content with ``parts``, a list with a ``functionCall`` part or of parts
    holding none, or the SDK's ``response.function_calls`` (a list of ``{name, args, id}``)."""
    if isinstance(data, dict):
        return ("candidates" in data and isinstance(data["candidates"], list | None)) or isinstance(data.get("parts"), list)
    if not isinstance(data, list) or not data:
        return False
    return any(_call_of(part) is not None for part in data) or all(_is_part(part) for part in data)


def parse(data: Any) -> Batch:
    """Every ``functionCall`` part as a call; one without a name is refused in its place."""
    if isinstance(data, dict) and "candidates" in data:
        parts = [
            part
            for candidate in data["candidates"] or ()
            if isinstance(candidate, dict) and isinstance(candidate.get("content"), dict)
            for part in candidate["content"].get("parts") or ()
        ]
    else:
        parts = data["parts"] if isinstance(data, dict) else data
    calls = [(index, call) for index, part in enumerate(parts) if (call := _call_of(part)) is not None]
    entries = tuple(_call(call, index) for index, call in calls)
    return Batch(NAME, entries, as_message=isinstance(data, dict), sent=sent_of(entries))


def _call_of(part: Any) -> Any:
    """The part's ``functionCall`` (either spelling; a ``null`` one is none), the part itself when it is a call
    (an item of the SDK's ``response.function_calls``), or None."""
    if _is_function_call(part):
        return part
    if not isinstance(part, dict):
        return None
    return next((part[key] for key in CALL_KEYS if part.get(key) is not None), None)


def _is_part(part: Any) -> bool:
    return isinstance(part, dict) and "type" not in part and any(key in part for key in (*CALL_KEYS, *OTHER_PART_KEYS))


def _is_function_call(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("name"), str) and item.keys() <= FUNCTION_CALL_FIELDS


def _call(call: Any, index: int) -> ToolCall | ToolResult:
    given = call.get("id") if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"] else None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return refusal(given or f"gemini_{index}", "", f"functionCall part {index}: expected {{'name': …, 'args': {{…}}}}")
    return ToolCall(name=call["name"], arguments=call.get("args"), call_id=given)


def message(result: ToolResult, sent: Sent) -> dict[str, Any]:
    """``{"functionResponse": {"name", "id"?, "response": {"output"} | {"error"}}}``."""
    response = {"output": result.output} if result.ok else {"error": content(result)}
    reply: dict[str, Any] = {"name": sent.name}
    if sent.call_id is not None:
        reply["id"] = sent.call_id
    reply["response"] = response
    if result.artifacts:  # images and PDFs as the response's parts; the others named in its text
        key = "output" if result.ok else "error"
        response[key] = files.text_with_descriptions(response[key], result.artifacts, "Gemini", files.GEMINI_FILES)
        parts = [
            {"inlineData": {"mimeType": a.mime_type, "data": files.encoded(a)}}
            for a in result.artifacts
            if files.carried(a, files.GEMINI_FILES)
        ]
        if parts:
            reply["parts"] = parts
    return {"functionResponse": reply}


def render(batch: Batch, results: Sequence[ToolResult]) -> list[dict[str, Any]] | dict[str, Any]:
    """``functionResponse`` parts in input order, in one ``user`` content if a content or response came in."""
    parts = [message(r, batch.sent_as(i, r)) for i, r in enumerate(results)]
    return {"role": "user", "parts": parts} if batch.as_message else parts
