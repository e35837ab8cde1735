"""What the providers' SDKs hand over, made plain: their pydantic objects and their dumps.

The ``openai``, ``anthropic`` and ``google-genai`` SDKs return pydantic models; a program
hands toolexec either the objects themselves (``Executor.answer(response)``) or their dumps
(``model_dump()``, ``model_dump_json()``, ``to_json_dict()``), which carry every unset
field as ``null`` and, for google-genai, spell the fields in snake_case.
"""

from __future__ import annotations

from typing import Any

# Every provider's call item or block type: a list holding one of them is that provider's calls.
CALL_TYPES = frozenset({"function", "function_call", "tool_use"})


def plain(data: Any) -> Any:
    """``data`` with an SDK object (anything with pydantic's ``model_dump``) dumped to JSON-ready values,
    at the top level, as an item of a top-level list, or as a value of a top-level dict."""
    if isinstance(data, list | tuple):
        return [_dumped(item) for item in data]
    if isinstance(data, dict):
        return {key: _dumped(value) for key, value in data.items()}
    return _dumped(data)


def _dumped(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if not callable(dump) or isinstance(value, type):
        return value
    if isinstance(value, list | tuple):
        return [_dumped(item) for item in value]
    return dump(mode="json")


def typed_without_calls(items: list[Any], marks: frozenset[str]) -> bool:
    """Whether ``items`` are all typed blocks (``{"type": …}``), none of them any provider's call, and one of them
    of a type in ``marks``: one provider's content (or output) holding no call."""
    types = {item.get("type") if isinstance(item, dict) else None for item in items}
    return all(isinstance(t, str) for t in types) and not CALL_TYPES & types and bool(marks & types)
