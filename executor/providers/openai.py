"""OpenAI Chat Completions: ``tools`` declarations out, ``tool_calls`` in, ``{"role": "tool"}`` messages out.

Accepted input (parsed JSON): a list of ``tool_calls`` items, ``{"tool_calls": [...]}``,
an assistant message carrying them, or a whole response (``{"choices": [{"message": …}]}``,
every choice's calls), as the API sends them or as the SDK dumps them (``model_dump()``,
``model_dump_json()``: ``null`` fields present; a message without calls has ``tool_calls: null``). ``function.arguments`` may be a JSON string (as the API sends it)
or an object. A call without an ``id`` gets ``call_<index>``.

Declarations: ``{"type": "function", "function": {name, description, parameters, strict}}``,
``strict`` always explicit. In strict mode every object gets ``additionalProperties: false``,
every property is required and the optional ones are made nullable (a ``null`` that comes
back means "absent"); a schema that strict mode would change falls back to ``strict: false``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolexec.providers import Batch, Declared, Sent, content, files, refusal, sent_of
from toolexec.providers.names import OPENAI_NAMES
from toolexec.providers.schema import strict_schema
from toolexec.records import ToolCall, ToolDeclaration, ToolResult

NAME = "openai"
SHAPE = "a list of tool_calls, {'tool_calls': [...]}, an assistant message carrying them, or a response with 'choices'"
ITEM = "{'id': …, 'type': 'function', 'function': {'name': …, 'arguments': …}}"
NAMES = OPENAI_NAMES


def declare(tool: ToolDeclaration, name: str, *, strict: bool = False) -> Declared:
    """The Chat Completions ``tools`` entry of ``tool`` under ``name``."""
    parameters, note = strict_parameters(tool) if strict else (tool.to_function()["parameters"], None)
    function = {"name": name, "description": tool.description, "parameters": parameters, "strict": strict and note is None}
    return Declared({"type": "function", "function": function}, note)


def strict_parameters(tool: ToolDeclaration) -> tuple[dict[str, Any], str | None]:
    """The strict form of ``tool``'s parameters; or, when strict mode would change them, them as they are
    and the note saying that the tool stays ``strict: false`` and why."""
    canonical = tool.to_function()["parameters"]
    made, why = strict_schema(canonical)
    return (made, None) if made is not None else (canonical, f"strict: false ({why})")


def claims(data: Any) -> bool:
    """A list of tool calls (not of other providers' typed items), an object with a ``tool_calls`` list, an
    assistant message whose ``tool_calls`` is ``null`` (as the SDK dumps one without calls), or a response
    with ``choices``."""
    if isinstance(data, list):
        return not any(isinstance(item, dict) and item.get("type") not in (None, "function") for item in data)
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("choices"), list) or isinstance(data.get("tool_calls"), list):
        return True
    return data.get("role") == "assistant" and "tool_calls" in data and data["tool_calls"] is None


def parse(data: Any) -> Batch:
    """Every item of the list as a call; a malformed item is refused in its place."""
    if isinstance(data, dict) and isinstance(data.get("choices"), list):
        items = [
            item
            for choice in data["choices"]
            if isinstance(choice, dict) and isinstance(choice.get("message"), dict)
            for item in choice["message"].get("tool_calls") or ()
        ]
    else:
        items = (data["tool_calls"] or []) if isinstance(data, dict) else data
    entries = tuple(_call(item, index) for index, item in enumerate(items))
    return Batch(NAME, entries, as_message=isinstance(data, dict), sent=sent_of(entries))


def _call(item: Any, index: int) -> ToolCall | ToolResult:
    call_id = str(item.get("id") or f"call_{index}") if isinstance(item, dict) else f"call_{index}"
    function = item.get("function") if isinstance(item, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        name = function.get("name") if isinstance(function, dict) else None
        return refusal(call_id, name if isinstance(name, str) else "", f"tool call {index}: expected {ITEM}")
    return ToolCall(name=function["name"], arguments=function.get("arguments"), call_id=call_id)


def message(result: ToolResult, sent: Sent) -> dict[str, Any]:
    """``{"role": "tool", "tool_call_id", "content"}``."""
    text = content(result)
    if result.artifacts:  # a Chat Completions tool message is text only: each file is named in it
        text = files.text_with_descriptions(text, result.artifacts, "OpenAI Chat Completions", frozenset())
    return {"role": "tool", "tool_call_id": sent.call_id or result.tool_call_id, "content": text}


def render(batch: Batch, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
    """One ``{"role": "tool", "tool_call_id", "content"}`` message per call, in input order."""
    return [message(r, batch.sent_as(i, r)) for i, r in enumerate(results)]
