"""Batches of tool calls in a provider's shape, and the matching tool-result messages.

Accepted input (as parsed JSON):

* OpenAI: a list of ``tool_calls`` items, ``{"tool_calls": [...]}``, or an assistant
  message carrying them; ``function.arguments`` may be a JSON string or an object.
* Anthropic: a list of content blocks, or an assistant message whose ``content``
  holds ``tool_use`` blocks (other blocks are ignored).

The output mirrors the input: OpenAI ``{"role": "tool", "tool_call_id", "content"}``
messages, or Anthropic ``tool_result`` blocks (inside a user message when a
message came in), in the input order. One bad call never spoils the others.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from toolexec.errors import BadRequest
from toolexec.records import ToolCall, ToolResult

Provider = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Batch:
    provider: Provider
    calls: list[ToolCall]
    as_message: bool


def parse_batch(data: Any) -> Batch:
    message = isinstance(data, dict)
    items = data.get("tool_calls", data.get("content")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise BadRequest("expected a list of OpenAI tool_calls or Anthropic tool_use blocks, or a message holding them")
    if any(isinstance(i, dict) and i.get("type") == "tool_use" for i in items):
        calls = [_anthropic(i, n) for n, i in enumerate(items) if isinstance(i, dict) and i.get("type") == "tool_use"]
        return Batch("anthropic", calls, message)
    return Batch("openai", [_openai(item, n) for n, item in enumerate(items)], message)


def _openai(item: Any, index: int) -> ToolCall:
    function = item.get("function") if isinstance(item, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise BadRequest(
            f"tool call {index}: expected {{'id': …, 'type': 'function', 'function': {{'name': …, 'arguments': …}}}}"
        )
    return ToolCall(name=function["name"], arguments=function.get("arguments"), call_id=str(item.get("id") or f"call_{index}"))


def _anthropic(block: dict[str, Any], index: int) -> ToolCall:
    if not isinstance(block.get("name"), str):
        raise BadRequest(f"tool_use block {index}: expected a 'name'")
    return ToolCall(name=block["name"], arguments=block.get("input"), call_id=str(block.get("id") or f"toolu_{index}"))


def run_batch(batch: Batch, call: Callable[[ToolCall], ToolResult], max_parallel: int) -> list[ToolResult]:
    """Run every call, at most ``max_parallel`` at once; results in input order."""
    if not batch.calls:
        return []
    with ThreadPoolExecutor(max_workers=min(max_parallel, len(batch.calls))) as pool:
        return list(pool.map(call, batch.calls))


def result_messages(batch: Batch, results: list[ToolResult]) -> Any:
    if batch.provider == "openai":
        return [{"role": "tool", "tool_call_id": r.tool_call_id, "content": content(r)} for r in results]
    blocks = [
        {"type": "tool_result", "tool_use_id": r.tool_call_id, "content": content(r), "is_error": not r.ok} for r in results
    ]
    return {"role": "user", "content": blocks} if batch.as_message else blocks


def content(result: ToolResult) -> str:
    """What a model reads: the output, or the error with any partial output after it."""
    if result.ok:
        return result.output
    return f"{result.error}\n{result.output}" if result.output else str(result.error)
