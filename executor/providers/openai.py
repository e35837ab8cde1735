"""OpenAI Chat Completions: ``tool_calls`` in, ``{"role": "tool"}`` messages out.

Accepted input (parsed JSON): a list of ``tool_calls`` items, ``{"tool_calls": [...]}``,
or an assistant message carrying them. ``function.arguments`` may be a JSON string
(as the API sends it) or an object. A call without an ``id`` gets ``call_<index>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolexec.providers import Batch, content, refusal
from toolexec.records import ToolCall, ToolResult

NAME = "openai"
SHAPE = "a list of tool_calls, {'tool_calls': [...]}, or an assistant message carrying them"
ITEM = "{'id': …, 'type': 'function', 'function': {'name': …, 'arguments': …}}"


def claims(data: Any) -> bool:
    """A list (of tool calls), or an object with a ``tool_calls`` list."""
    return isinstance(data, list) or (isinstance(data, dict) and isinstance(data.get("tool_calls"), list))


def parse(data: Any) -> Batch:
    """Every item of the list as a call; a malformed item is refused in its place."""
    items = data["tool_calls"] if isinstance(data, dict) else data
    return Batch(NAME, tuple(_call(item, index) for index, item in enumerate(items)), as_message=isinstance(data, dict))


def _call(item: Any, index: int) -> ToolCall | ToolResult:
    call_id = str(item.get("id") or f"call_{index}") if isinstance(item, dict) else f"call_{index}"
    function = item.get("function") if isinstance(item, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        name = function.get("name") if isinstance(function, dict) else None
        return refusal(call_id, name if isinstance(name, str) else "", f"tool call {index}: expected {ITEM}")
    return ToolCall(name=function["name"], arguments=function.get("arguments"), call_id=call_id)


def render(batch: Batch, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
    """One ``{"role": "tool", "tool_call_id", "content"}`` message per call, in input order."""
    return [{"role": "tool", "tool_call_id": r.tool_call_id, "content": content(r)} for r in results]
