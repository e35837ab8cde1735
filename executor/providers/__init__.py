"""Providers' wire formats for tool calls: one module per provider, the shared pieces here.

A provider module (``openai``, ``anthropic``) satisfies :class:`ProviderFormat`:
it recognises its input (:func:`claims`), parses it into a :class:`Batch` of
:class:`~toolexec.records.ToolCall` records, and renders the matching result
messages from :class:`~toolexec.records.ToolResult` records, in input order.
A call that is malformed becomes a refused result in its place; the others still run.

Later modules (the Responses API, Gemini) and per-provider exporters and
safe-name maps plug in here: a new module and one line in :func:`formats`.

>>> batch = parse_batch([{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}])
>>> [call.name for call in batch.calls]
['add']
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolexec import results
from toolexec.errors import BadRequest
from toolexec.records import ToolCall, ToolResult

__all__ = ["Batch", "ProviderFormat", "content", "formats", "parse_batch", "refusal", "render"]


class ProviderFormat(Protocol):
    """What a provider module offers; the modules themselves satisfy it (PEP 544)."""

    @property
    def NAME(self) -> str:  # a module constant in each provider module
        """The provider's name: ``"openai"``, ``"anthropic"``."""
        ...

    @property
    def SHAPE(self) -> str:  # a module constant in each provider module
        """The accepted input, in words, for error messages."""
        ...

    def claims(self, data: Any) -> bool:
        """Whether ``data`` (parsed JSON) is in this provider's shape."""
        ...

    def parse(self, data: Any) -> Batch:
        """The calls in ``data``; a malformed call becomes a refused result in its place."""
        ...

    def render(self, batch: Batch, results: Sequence[ToolResult]) -> Any:
        """The result messages for ``batch``, one per entry, in input order (JSON-ready)."""
        ...


@dataclass(frozen=True)
class Batch:
    """Parsed tool calls in input order, with what is needed to answer in the same shape.

    Each entry is either a :class:`ToolCall` to run or, for a call that could not be
    parsed, the refused :class:`ToolResult` that answers it.
    """

    provider: str
    entries: tuple[ToolCall | ToolResult, ...]
    # The input was a whole message (not a bare list), so the answer is a message too.
    as_message: bool = False

    @property
    def calls(self) -> list[ToolCall]:
        """The well-formed calls, in input order: what to hand to ``Executor.call_many``."""
        return [entry for entry in self.entries if isinstance(entry, ToolCall)]

    def complete(self, results: Sequence[ToolResult]) -> list[ToolResult]:
        """One result per entry: ``results`` (of :attr:`calls`, in order) with the refusals in their places."""
        if len(results) != len(self.calls):
            raise ValueError(f"got {len(results)} results for {len(self.calls)} calls")
        ran = iter(results)
        return [next(ran) if isinstance(entry, ToolCall) else entry for entry in self.entries]


def formats() -> tuple[ProviderFormat, ...]:
    """Every provider format, in the order they are tried on unlabelled input."""
    # Imported here: the provider modules import this module's shared pieces.
    from toolexec.providers import anthropic, openai

    # Anthropic first: its blocks are recognisable by type, OpenAI is the fallback shape of a bare list.
    return (anthropic, openai)


def format_named(name: str) -> ProviderFormat:
    """The provider format called ``name``; :class:`BadRequest` naming the known ones otherwise."""
    known = {provider.NAME: provider for provider in formats()}
    if name not in known:
        raise BadRequest(f"unknown provider {name!r}; known providers: {', '.join(sorted(known))}")
    return known[name]


def parse_batch(data: Any, provider: str | None = None) -> Batch:
    """Parse tool calls from ``data`` (parsed JSON) in ``provider``'s shape, or the first shape that fits.

    Raises :class:`BadRequest` only when ``data`` as a whole is no provider's shape;
    a single malformed call is refused in its place instead.
    """
    if provider is not None:
        named = format_named(provider)
        if not named.claims(data):
            raise BadRequest(f"expected tool calls in {named.NAME}'s shape: {named.SHAPE}")
        return named.parse(data)
    for candidate in formats():
        if candidate.claims(data):
            return candidate.parse(data)
    raise BadRequest("expected a list of OpenAI tool_calls or Anthropic tool_use blocks, or a message holding them")


def render(batch: Batch, results: Sequence[ToolResult]) -> Any:
    """The result messages answering ``batch`` in its provider's shape; ``results`` as from :meth:`Batch.complete`."""
    if len(results) != len(batch.entries):
        raise ValueError(f"got {len(results)} results for a batch of {len(batch.entries)} calls")
    return format_named(batch.provider).render(batch, results)


def content(result: ToolResult) -> str:
    """What a model reads: the output, or the error with any partial output after it."""
    if result.ok:
        return result.output
    return f"{result.error}\n{result.output}" if result.output else str(result.error)


def refusal(call_id: str, name: str, message: str) -> ToolResult:
    """The refused result (reason ``bad_request``) answering a call that could not be parsed (nothing ran)."""
    return results.refusal(name, call_id, BadRequest(message), time.monotonic())
