"""OpenAI Responses API: flat function tools out, ``function_call`` items in, ``function_call_output`` items back.

Accepted input (parsed JSON): a list of output items holding ``function_call`` items, or
a whole response whose ``output`` holds them, as the API sends them or as the SDK dumps
them (``model_dump()``: ``null`` fields present); other items (messages, reasoning) are
ignored. ``arguments`` is a JSON string as the API sends it (an object is accepted too).
The answer is a list of ``function_call_output`` items, each naming the ``call_id``.

Declarations are flat: ``{"type": "function", name, description, parameters, strict}``.
The Responses API is strict by default, so the parameters are made strict as for
``openai-strict`` (with the same fallback to ``strict: false``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolexec.providers import Batch, Declared, Sent, content, files, refusal, sent_of
from toolexec.providers.names import OPENAI_NAMES
from toolexec.providers.openai import strict_parameters
from toolexec.providers.sdk import typed_without_calls
from toolexec.records import ToolCall, ToolDeclaration, ToolResult

NAME = "responses"
SHAPE = "a list of output items holding function_call items, or a response whose 'output' holds them"
NAMES = OPENAI_NAMES
# Items that mark a list as a response's output when it holds no function_call item.
OTHER_ITEMS = frozenset({"message", "reasoning"})


def declare(tool: ToolDeclaration, name: str) -> Declared:
    """The flat Responses API tool of ``tool`` under ``name``."""
    parameters, note = strict_parameters(tool)
    declaration = {
        "type": "function",
        "name": name,
        "description": tool.description,
        "parameters": parameters,
        "strict": note is None,
    }
    return Declared(declaration, note)


def claims(data: Any) -> bool:
    """A response with an ``output`` list, or a list with a ``function_call`` item."""
    if isinstance(data, dict):
        return isinstance(data.get("output"), list)
    if not isinstance(data, list):
        return False
    return any(_is_call(item) for item in data) or typed_without_calls(data, OTHER_ITEMS)


def parse(data: Any) -> Batch:
    """Every ``function_call`` item as a call; one without a name is refused in its place."""
    items = data["output"] if isinstance(data, dict) else data
    entries = tuple(_call(item, index) for index, item in enumerate(items) if _is_call(item))
    return Batch(NAME, entries, as_message=isinstance(data, dict), sent=sent_of(entries))


def _is_call(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "function_call"


def _call(item: dict[str, Any], index: int) -> ToolCall | ToolResult:
    call_id = str(item.get("call_id") or item.get("id") or f"call_{index}")
    if not isinstance(item.get("name"), str):
        return refusal(call_id, "", f"function_call item {index}: expected a 'name'")
    return ToolCall(name=item["name"], arguments=item.get("arguments"), call_id=call_id)


def message(result: ToolResult, sent: Sent) -> dict[str, Any]:
    """``{"type": "function_call_output", "call_id", "output"}``; with files, ``output`` is a list of an
    ``input_text`` item, then an ``input_image`` per image and an ``input_file`` per PDF (:mod:`toolexec.providers.files`)."""
    output = _output(result) if result.artifacts else content(result)
    return {"type": "function_call_output", "call_id": sent.call_id or result.tool_call_id, "output": output}


def _output(result: ToolResult) -> list[dict[str, Any]]:
    takes = files.RESPONSES_IMAGES | {files.PDF}
    text = files.text_with_descriptions(content(result), result.artifacts, "OpenAI Responses", takes)
    items: list[dict[str, Any]] = [{"type": "input_text", "text": text}] if text else []
    for artifact in result.artifacts:
        if not files.carried(artifact, takes):
            continue
        url = f"data:{artifact.mime_type};base64,{files.encoded(artifact)}"
        if artifact.mime_type == files.PDF:
            items.append({"type": "input_file", "filename": artifact.name, "file_data": url})
        else:
            items.append({"type": "input_image", "image_url": url})
    return items


def render(batch: Batch, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
    """One ``function_call_output`` item per call, in input order (the next request's ``input`` items)."""
    return [message(r, batch.sent_as(i, r)) for i, r in enumerate(results)]
