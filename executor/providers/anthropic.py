"""Anthropic Messages: ``tool_use`` blocks in, ``tool_result`` blocks out.

Accepted input (parsed JSON): a list of content blocks holding ``tool_use`` blocks,
or a message whose ``content`` holds them; other blocks (text, thinking) are
ignored. The answer is a list of ``tool_result`` blocks, or a user message holding
them when a message came in. A block without an ``id`` gets ``toolu_<index>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolexec.providers import Batch, content, refusal
from toolexec.records import ToolCall, ToolResult

NAME = "anthropic"
SHAPE = "a list of content blocks holding tool_use blocks, or a message whose content holds them"


def claims(data: Any) -> bool:
    """A message with a ``content`` list (and no OpenAI ``tool_calls``), or a list with a ``tool_use`` block."""
    if isinstance(data, dict):
        return "tool_calls" not in data and isinstance(data.get("content"), list)
    return isinstance(data, list) and any(_is_tool_use(block) for block in data)


def parse(data: Any) -> Batch:
    """Every ``tool_use`` block as a call; one without a name is refused in its place."""
    blocks = data["content"] if isinstance(data, dict) else data
    calls = tuple(_call(block, index) for index, block in enumerate(blocks) if _is_tool_use(block))
    return Batch(NAME, calls, as_message=isinstance(data, dict))


def _is_tool_use(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use"


def _call(block: dict[str, Any], index: int) -> ToolCall | ToolResult:
    call_id = str(block.get("id") or f"toolu_{index}")
    if not isinstance(block.get("name"), str):
        return refusal(call_id, "", f"tool_use block {index}: expected a 'name'")
    return ToolCall(name=block["name"], arguments=block.get("input"), call_id=call_id)


def render(batch: Batch, results: Sequence[ToolResult]) -> list[dict[str, Any]] | dict[str, Any]:
    """``tool_result`` blocks (``is_error`` for every failure) in input order, in a user message if one came in."""
    blocks = [
        {"type": "tool_result", "tool_use_id": r.tool_call_id, "content": content(r), "is_error": not r.ok} for r in results
    ]
    return {"role": "user", "content": blocks} if batch.as_message else blocks
