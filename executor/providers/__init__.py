"""Providers' wire formats: declarations out, tool calls in, result messages back.

One module per provider owns its shapes: ``openai`` (Chat Completions, plain and
strict declarations), ``responses`` (the Responses API), ``anthropic``, ``gemini``,
and ``mcp`` (declarations and results only: MCP calls arrive through the server).
A call-shape module satisfies :class:`ProviderFormat`: it recognises its input
(:func:`claims`), parses it into a :class:`Batch` of :class:`~toolexec.records.ToolCall`
records, and renders the result messages in input order. A call that is malformed
becomes a refused result in its place; the others still run.

Every module also declares tools (:func:`declarations`) from the one canonical schema,
under provider-safe names (:mod:`toolexec.providers.names`) that are mapped back when
a model's call comes in (:func:`parse_batch` with ``names``).

>>> batch = parse_batch([{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}])
>>> [call.name for call in batch.calls]
['add']
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

from toolexec import results, strictjson
from toolexec.errors import BadRequest
from toolexec.providers.names import GEMINI_NAMES, MCP_NAMES, OPENAI_NAMES, NameMap, NameRule
from toolexec.providers.sdk import plain
from toolexec.records import DECLARATION_FORMATS, ToolCall, ToolDeclaration, ToolResult
from toolexec.validation import MAX_DEPTH

__all__ = [
    "DECLARATION_FORMATS",
    "Batch",
    "Declarations",
    "Declared",
    "Names",
    "ProviderFormat",
    "Sent",
    "content",
    "declarations",
    "format_named",
    "format_tool_result",
    "format_tool_result_as_text",
    "formats",
    "mixed_shapes",
    "parse_batch",
    "parse_batch_text",
    "refusal",
    "render",
    "sent_of",
]


class Sent(NamedTuple):
    """How the model named one call: the provider-safe name and the call id it gave (None when it gave none)."""

    name: str
    call_id: str | None


class Declared(NamedTuple):
    """One tool's declaration in a provider's format, and what had to give way (for ``--verbose``)."""

    declaration: dict[str, Any]
    note: str | None = None


class ProviderFormat(Protocol):
    """What a provider module offers; the modules themselves satisfy it (PEP 544)."""

    @property
    def NAME(self) -> str:  # a module constant in each provider module
        """The provider's name: ``"openai"``, ``"responses"``, ``"anthropic"``, ``"gemini"``."""
        ...

    @property
    def SHAPE(self) -> str:  # a module constant in each provider module
        """The accepted input, in words, for error messages."""
        ...

    @property
    def NAMES(self) -> NameRule:  # a module constant in each provider module
        """What the provider accepts as a function name."""
        ...

    def claims(self, data: Any) -> bool:
        """Whether ``data`` (parsed JSON) is in this provider's shape."""
        ...

    def parse(self, data: Any) -> Batch:
        """The calls in ``data``, named as sent; a malformed call becomes a refused result in its place."""
        ...

    def message(self, result: ToolResult, sent: Sent) -> dict[str, Any]:
        """The result of one call as this provider expects it back."""
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
    # Per entry: the name and call id as the model sent them (the answer repeats them).
    sent: tuple[Sent, ...] = field(default=(), compare=False)

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

    def sent_as(self, index: int, result: ToolResult) -> Sent:
        """How entry ``index`` was sent (its result's name and id when the parser recorded nothing)."""
        return self.sent[index] if index < len(self.sent) else Sent(result.tool_name, result.tool_call_id)


class Names:
    """Provider-safe names for one set of tools, one :class:`NameMap` per provider rule (made on first use)."""

    def __init__(self, tools: Iterable[str]) -> None:
        self.tools = tuple(sorted(set(tools)))
        self._maps: dict[str, NameMap] = {}

    def _map(self, rule: NameRule) -> NameMap:
        """The map under ``rule``."""
        if rule.label not in self._maps:
            self._maps[rule.label] = NameMap(self.tools, rule)
        return self._maps[rule.label]

    def original(self, sent: str) -> str:
        """The tool a provider-safe name stands for under any provider's rule (the name itself when none maps it)."""
        if sent in self.tools:
            return sent
        found = {self._map(rule).original(sent) for rule in (OPENAI_NAMES, GEMINI_NAMES, MCP_NAMES)} - {sent}
        return found.pop() if len(found) == 1 else sent


def formats() -> tuple[ProviderFormat, ...]:
    """Every call-shape provider format, in the order they are tried on unlabelled input."""
    # A cycle: the provider modules import this module's shared pieces.
    from toolexec.providers import anthropic, gemini, openai, responses  # noqa: PLC0415

    # By what marks each shape: Anthropic's typed blocks, Responses' function_call items,
    # Gemini's parts; OpenAI last, as the fallback shape of a bare list.
    return (anthropic, responses, gemini, openai)


def format_named(name: str) -> ProviderFormat:
    """The provider format called ``name``; :class:`BadRequest` naming the known ones otherwise."""
    known = {provider.NAME: provider for provider in formats()}
    if name == "openai-strict":
        name = "openai"
    if name not in known:
        raise BadRequest(f"unknown provider {name!r}; known providers: {', '.join(sorted(known))}")
    return known[name]


def accepted_shapes() -> str:
    """Every accepted input shape, in words (for the refusal of input that is none of them)."""
    return "expected tool calls in one of these shapes: " + "; ".join(f"{p.NAME}: {p.SHAPE}" for p in formats())


def parse_batch(data: Any, provider: str | None = None, *, names: Names | None = None) -> Batch:
    """Parse tool calls from ``data`` (parsed JSON) in ``provider``'s shape, or the first shape that fits.

    With ``names``, a provider-safe name the model sent is mapped back to the tool's own
    name. Raises :class:`BadRequest` only when ``data`` as a whole is no provider's shape
    (the message lists the accepted shapes) or holds calls of several providers' shapes (one
    provider's reading would drop the others' calls unanswered); a single malformed call is
    refused in its place instead.
    An SDK's own objects (pydantic models, or lists of them) are read through their dumps;
    ``null`` and ``[]`` (what the SDKs' ``function_calls`` and ``tool_calls`` hold when there
    are none) are a batch of no calls.
    """
    data = plain(data)
    if data is None or data == []:
        return Batch(format_named(provider).NAME if provider is not None else "openai", ())
    mixed = mixed_shapes(data)
    if mixed is not None:
        raise BadRequest(mixed)
    if provider is not None:
        named = format_named(provider)
        if not named.claims(data):
            raise BadRequest(f"expected tool calls in {named.NAME}'s shape: {named.SHAPE}")
        batch = named.parse(data)
    else:
        found = next((candidate for candidate in formats() if candidate.claims(data)), None)
        if found is None:
            raise BadRequest(accepted_shapes())
        batch = found.parse(data)
    if names is None:
        return batch
    rule = format_named(batch.provider).NAMES
    mapped = tuple(
        replace(entry, name=names._map(rule).original(entry.name)) if isinstance(entry, ToolCall) else entry
        for entry in batch.entries
    )
    return replace(batch, entries=mapped)


# The containers of calls in a provider's message or response, by the key holding them.
_CALL_LISTS = ("tool_calls", "content", "output", "parts")


def _call_items(data: Any) -> list[tuple[str, Any]]:
    """The items of ``data`` that could be calls, each with where it is: a list's items, or those of a message's
    or response's lists."""
    if isinstance(data, list):
        return [(f"[{index}]", item) for index, item in enumerate(data)]
    if not isinstance(data, dict):
        return []
    items = [(f"{key}[{i}]", item) for key in _CALL_LISTS if isinstance(data.get(key), list) for i, item in enumerate(data[key])]
    for nested, inner, key in (("choices", "message", "tool_calls"), ("candidates", "content", "parts")):
        entries = data.get(nested)
        for n, entry in enumerate(entries if isinstance(entries, list) else []):
            holder = entry.get(inner) if isinstance(entry, dict) else None
            if isinstance(holder, dict) and isinstance(holder.get(key), list):
                items += [(f"{nested}[{n}].{inner}.{key}[{i}]", item) for i, item in enumerate(holder[key])]
    return items


def _shape_of(item: Any) -> str | None:
    """Which provider's call ``item`` is, by what marks it (None for a block that is no call: text, thinking…)."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind == "tool_use":
        return "anthropic"
    if kind == "function_call":
        return "responses"
    if item.get("functionCall") is not None or item.get("function_call") is not None:
        return "gemini"
    if kind == "function" or isinstance(item.get("function"), dict):
        return "openai"
    return None


def mixed_shapes(data: Any) -> str | None:
    """Why ``data`` cannot be answered as one provider's batch (it holds calls of several shapes), or None."""
    found: dict[str, list[str]] = {}
    for where, item in _call_items(data):
        shape = _shape_of(item)
        if shape is not None:
            found.setdefault(shape, []).append(where)
    if len(found) < 2:
        return None
    listed = "; ".join(f"{shape} at {', '.join(at[:3])}{' …' if len(at) > 3 else ''}" for shape, at in found.items())
    return (
        f"the input mixes tool calls of {len(found)} providers' shapes ({listed}): one provider's reading would leave "
        "the others unanswered; send each provider's calls separately"
    )


def parse_batch_text(text: str, where: str = "on stdin") -> Any:
    """JSON text of a batch as data, refused with :class:`BadRequest` (never a traceback) when it is not JSON, is
    nested deeper than any batch of valid arguments can be, or holds an integer Python cannot read."""
    limit = MAX_DEPTH + BATCH_ENVELOPE_DEPTH
    if strictjson.too_deep(text, limit):
        raise BadRequest(f"the batch {where} is nested more than {limit} levels deep: no tool call's arguments can be")
    try:
        return strictjson.loads(text, limit)
    except strictjson.NotJSON as exc:
        raise BadRequest(f"the batch {where} is not valid JSON: {exc}") from None


# Levels a batch adds around a call's arguments: a response's choices, message, tool_calls, a call, its function.
BATCH_ENVELOPE_DEPTH = 8


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


def format_tool_result_as_text(result: ToolResult) -> str:
    """The result as plain text for any model: the output, or ``[Tool Error] …`` when the call failed."""
    return result.output if result.ok else f"[Tool Error] {content(result)}"


def format_tool_result(result: ToolResult, format: str = "openai", *, names: Names | None = None) -> dict[str, Any]:
    """One result as ``format``'s provider expects it back (``openai``, ``responses``, ``anthropic``, ``gemini``, ``mcp``).

    Where the shape names the tool (Gemini), it is the provider-safe name from ``names``
    (the name coerced on its own without them).
    """
    if format == "mcp":
        from toolexec.providers import mcp  # noqa: PLC0415 - a cycle: it imports this module's shared pieces

        return mcp.message(result)
    provider = format_named(format)
    known = names._map(provider.NAMES) if names is not None else NameMap([result.tool_name], provider.NAMES)
    return provider.message(result, Sent(known.safe(result.tool_name), result.tool_call_id))


class Declarations(list[dict[str, Any]]):
    """Tools declared in one format: a list, ready for a request's ``tools`` (or JSON), which also says its
    ``format`` and has a note per tool whose declaration had to give way (renamed, not strict) in ``notes``."""

    def __init__(self, format: str, declarations: Iterable[dict[str, Any]] = (), notes: Iterable[str] = ()) -> None:
        super().__init__(declarations)
        self.format = format
        self.notes = list(notes)

    def __repr__(self) -> str:
        return f"Declarations({self.format!r}, {list.__repr__(self)}, notes={self.notes!r})"


def declarations(
    tools: Sequence[ToolDeclaration], format: str = "openai", *, names: Names | None = None, json_schema: bool = False
) -> Declarations:
    """Declare ``tools`` in ``format`` (one of :data:`DECLARATION_FORMATS`) from their canonical schemas.

    Names are made provider-safe with ``names`` (built over ``tools`` without it).
    ``json_schema`` asks Gemini for ``parametersJsonSchema`` instead of its OpenAPI subset.
    """
    from toolexec.providers import anthropic, gemini, mcp, openai, responses  # noqa: PLC0415 - a cycle (see formats)

    if format not in DECLARATION_FORMATS:
        raise BadRequest(f"unknown declaration format {format!r}; known formats: {', '.join(DECLARATION_FORMATS)}")
    if json_schema and format != "gemini":
        raise BadRequest("json_schema applies to the gemini format only (parametersJsonSchema)")
    names = names if names is not None else Names(t.name for t in tools)
    declared_tools: list[dict[str, Any]] = []
    notes: list[str] = []
    for tool in tools:
        if format in ("openai", "openai-strict"):
            rule = openai.NAMES
            safe = names._map(rule).safe(tool.name)
            declared = openai.declare(tool, safe, strict=format == "openai-strict")
        elif format == "responses":
            safe = names._map(responses.NAMES).safe(tool.name)
            declared = responses.declare(tool, safe)
        elif format == "anthropic":
            safe = names._map(anthropic.NAMES).safe(tool.name)
            declared = anthropic.declare(tool, safe)
        elif format == "gemini":
            safe = names._map(gemini.NAMES).safe(tool.name)
            declared = gemini.declare(tool, safe, json_schema=json_schema)
        else:
            safe = names._map(mcp.NAMES).safe(tool.name)
            declared = mcp.declare(tool, safe)
        declared_tools.append(declared.declaration)
        if safe != tool.name:
            notes.append(f"{tool.name}: declared as {safe!r} ({format} does not accept the name as it is)")
        if declared.note:
            notes.append(f"{tool.name}: {declared.note}")
    return Declarations(format, declared_tools, notes)


def sent_of(entries: Iterable[ToolCall | ToolResult]) -> tuple[Sent, ...]:
    """How each entry was sent: a call's name and id as parsed, a refusal's as it names them."""
    return tuple(Sent(e.name, e.call_id) if isinstance(e, ToolCall) else Sent(e.tool_name, e.tool_call_id) for e in entries)


def refusal(call_id: str, name: str, message: str) -> ToolResult:
    """The refused result (reason ``bad_request``) answering a call that could not be parsed (nothing ran)."""
    return results.refusal(name, call_id, BadRequest(message), time.monotonic())
