"""Anthropic Messages: ``tools`` out, ``tool_use`` blocks in, ``tool_result`` blocks back.

Accepted input (parsed JSON): a list of content blocks holding ``tool_use`` blocks,
a message whose ``content`` holds them, or a whole response (a message with ``id``,
``type: message``…); other blocks (text, thinking) are ignored. The answer is a list of
``tool_result`` blocks (``is_error`` on every failure), or one user message holding them
when a message came in. A block without an ``id`` gets ``toolu_<index>``.

Declarations: ``{name, description, input_schema}``, plus ``input_examples`` when the
tool declares examples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolexec.providers import Batch, Declared, Sent, content, files, refusal, sent_of
from toolexec.providers.names import OPENAI_NAMES
from toolexec.providers.sdk import typed_without_calls
from toolexec.records import ToolCall, ToolDeclaration, ToolResult

NAME = "anthropic"
SHAPE = "a list of content blocks holding tool_use blocks, or a message (or response) whose content holds them"
NAMES = OPENAI_NAMES  # the same rule: [A-Za-z0-9_-]{1,64}


def declare(tool: ToolDeclaration, name: str) -> Declared:
    """The Messages API ``tools`` entry of ``tool`` under ``name``."""
    declaration: dict[str, Any] = {
        "name": name,
        "description": tool.description,
        "input_schema": {"type": "object", **tool.to_function()["parameters"]},
    }
    if tool.metadata.examples:
        declaration["input_examples"] = [dict(example) for example in tool.metadata.examples]
    return Declared(declaration)


# Blocks that mark a list as a message's content when it holds no tool_use block.
OTHER_BLOCKS = frozenset({"text", "thinking", "redacted_thinking"})


def claims(data: Any) -> bool:
    """A message with a ``content`` list (and no OpenAI ``tool_calls``), or a list with a ``tool_use`` block
    (or of typed blocks with text or thinking and no call)."""
    if isinstance(data, dict):
        return "tool_calls" not in data and isinstance(data.get("content"), list)
    if not isinstance(data, list):
        return False
    return any(_is_tool_use(block) for block in data) or typed_without_calls(data, OTHER_BLOCKS)


def parse(data: Any) -> Batch:
    """Every ``tool_use`` block as a call; one without a name is refused in its place."""
    blocks = data["content"] if isinstance(data, dict) else data
    entries = tuple(_call(block, index) for index, block in enumerate(blocks) if _is_tool_use(block))
    return Batch(NAME, entries, as_message=isinstance(data, dict), sent=sent_of(entries))


def _is_tool_use(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use"


def _call(block: dict[str, Any], index: int) -> ToolCall | ToolResult:
    call_id = str(block.get("id") or f"toolu_{index}")
    if not isinstance(block.get("name"), str):
        return refusal(call_id, "", f"tool_use block {index}: expected a 'name'")
    return ToolCall(name=block["name"], arguments=block.get("input"), call_id=call_id)


def message(result: ToolResult, sent: Sent) -> dict[str, Any]:
    """``{"type": "tool_result", "tool_use_id", "content", "is_error"}``; with files, ``content`` is a list of a text
    block, then an ``image`` block per image and a ``document`` block per PDF (see :mod:`toolexec.providers.files`)."""
    return {
        "type": "tool_result",
        "tool_use_id": sent.call_id or result.tool_call_id,
        "content": _content(result) if result.artifacts else content(result),
        "is_error": not result.ok,
    }


def _content(result: ToolResult) -> list[dict[str, Any]]:
    takes = files.ANTHROPIC_IMAGES | {files.PDF}
    text = files.text_with_descriptions(content(result), result.artifacts, "Anthropic", takes)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for artifact in result.artifacts:
        if files.carried(artifact, takes):
            kind = "document" if artifact.mime_type == files.PDF else "image"
            source = {"type": "base64", "media_type": artifact.mime_type, "data": files.encoded(artifact)}
            blocks.append({"type": kind, "source": source})
    return blocks


def render(batch: Batch, results: Sequence[ToolResult]) -> list[dict[str, Any]] | dict[str, Any]:
    """``tool_result`` blocks in input order, in one user message if a message came in."""
    blocks = [message(r, batch.sent_as(i, r)) for i, r in enumerate(results)]
    return {"role": "user", "content": blocks} if batch.as_message else blocks
