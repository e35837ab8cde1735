"""Provider-safe tool names, both ways.

toolexec names may hold ``.`` and ``:`` and run to 128 characters; providers accept
less (OpenAI and Anthropic ``[A-Za-z0-9_-]{1,64}``, Gemini the same with a leading
letter or ``_``, MCP ``[A-Za-z0-9_.-]{1,128}``). A :class:`NameMap` is built over
every tool of a catalog at once, so it is collision-free and the same for any subset
(a toolkit shows the names the whole catalog would), and it maps a name that comes
back from the model to the tool it stands for.

>>> names = NameMap(["fs.cat", "fs_cat", "web:search"], OPENAI_NAMES)
>>> names.safe("fs.cat"), names.safe("fs_cat"), names.safe("web:search")
('fs_cat_2', 'fs_cat', 'web_search')
>>> names.original("fs_cat_2")
'fs.cat'
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["GEMINI_NAMES", "MCP_NAMES", "OPENAI_NAMES", "NameMap", "NameRule"]


@dataclass(frozen=True)
class NameRule:
    """What a provider accepts as a function name."""

    label: str
    pattern: re.Pattern[str]  # the whole-name rule
    bad_char: re.Pattern[str]  # one character the provider does not accept
    max_length: int
    leading: re.Pattern[str] | None = None  # what the first character must be, when restricted

    def accepts(self, name: str) -> bool:
        """Whether ``name`` can be sent as it is."""
        return bool(self.pattern.fullmatch(name)) and (self.leading is None or bool(self.leading.match(name)))

    def coerce(self, name: str) -> str:
        """A name the provider accepts, made from ``name`` (not yet checked for collisions)."""
        safe = self.bad_char.sub("_", name) or "_"
        if self.leading is not None and not self.leading.match(safe):
            safe = "_" + safe
        if len(safe) > self.max_length:  # a digest of the whole name keeps long names apart
            digest = hashlib.sha256(name.encode()).hexdigest()[:8]
            safe = f"{safe[: self.max_length - 9]}_{digest}"
        return safe


OPENAI_NAMES = NameRule("openai", re.compile(r"[A-Za-z0-9_-]{1,64}"), re.compile(r"[^A-Za-z0-9_-]"), 64)
GEMINI_NAMES = NameRule(
    "gemini", re.compile(r"[A-Za-z0-9_-]{1,64}"), re.compile(r"[^A-Za-z0-9_-]"), 64, leading=re.compile(r"[A-Za-z_]")
)
MCP_NAMES = NameRule("mcp", re.compile(r"[A-Za-z0-9_.-]{1,128}"), re.compile(r"[^A-Za-z0-9_.-]"), 128)


class NameMap:
    """Tool name ↔ provider-safe name for one provider's rule, over one set of tool names.

    A name the provider accepts is kept; the others are coerced, and a coerced name
    that another tool already has gets ``_2``, ``_3``… (names are taken in sorted
    order, so the map does not depend on the order tools are listed in).
    """

    def __init__(self, names: Iterable[str], rule: NameRule) -> None:
        self.rule = rule
        ordered = sorted(set(names))
        taken = {n for n in ordered if rule.accepts(n)}
        self._safe: dict[str, str] = {n: n for n in taken}
        for name in ordered:
            if name in taken:
                continue
            base = candidate = rule.coerce(name)
            n = 2
            while candidate in taken:
                suffix = f"_{n}"
                candidate, n = base[: rule.max_length - len(suffix)] + suffix, n + 1
            taken.add(candidate)
            self._safe[name] = candidate
        self._original = {safe: name for name, safe in self._safe.items()}

    def safe(self, name: str) -> str:
        """The name to send for tool ``name`` (an unknown name is coerced on its own)."""
        return self._safe.get(name) or self.rule.coerce(name)

    def original(self, sent: str) -> str:
        """The tool a name that came back stands for; an unmapped name is returned as it is."""
        return self._original.get(sent, sent)

    def renamed(self) -> dict[str, str]:
        """Every tool whose name had to change: tool name → safe name."""
        return {name: safe for name, safe in self._safe.items() if name != safe}
