"""Google-style docstrings: the description, the ``Args:`` entries and the metadata fields.

Metadata fields are written as Google sections: ``Title: …``, ``Summary: …``,
``Tags: a, b``, ``Read-only: true`` (and ``Destructive:``, ``Idempotent:``,
``Open-world:``), ``Timeout: 30``, ``Max output bytes: 65536`` on one line, and
``Examples:`` / ``Errors:`` with one entry per indented line. Every field keeps
the line it came from (an index into the cleaned docstring) so problems point at it.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

from toolexec.compilers.metadata import near_miss

# Section name -> metadata field; a field with one value on the header line (or continued below it).
META_FIELDS = {
    "Title": "title",
    "Summary": "summary",
    "Tags": "tags",
    "Read-only": "read_only",
    "Destructive": "destructive",
    "Idempotent": "idempotent",
    "Open-world": "open_world",
    "Timeout": "timeout",
    "Max output bytes": "max_output_bytes",
}
# Sections holding one entry per line.
LIST_FIELDS = {"Examples": "examples", "Example": "examples", "Errors": "errors"}
_ARG_SECTIONS = {"Args", "Arguments", "Parameters"}
# Google sections that are prose for the reader, not for the tool's declaration.
_PROSE_SECTIONS = {"Returns", "Raises", "Notes", "Yields", "Note", "Attributes"}
KNOWN = (*META_FIELDS, *LIST_FIELDS, *_ARG_SECTIONS, *_PROSE_SECTIONS)
# A line that looks like a section header: a capitalised phrase of up to four words and a colon.
_HEADER_LIKE = re.compile(r"^\s*([A-Z][A-Za-z]*(?:[ -][A-Za-z]+){0,3}):\s*(.*)$")
_ENTRY = re.compile(r"^(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


@dataclass
class ArgDoc:
    """One documented parameter: its text and the type written in parentheses, if any."""

    description: str
    type: str | None = None
    optional: bool = False


@dataclass
class Field:
    """One metadata section: its value (header line plus continuation) or its entries, with line indices."""

    section: str
    line: int
    value: str = ""
    entries: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Docstring:
    """A parsed Google-style docstring: description, documented arguments and fields."""

    description: str
    args: dict[str, ArgDoc] = field(default_factory=dict)
    # Inline section values such as ``Timeout: 30``.
    fields: dict[str, str] = field(default_factory=dict)
    meta: list[Field] = field(default_factory=list)
    # (line index, message, hint) for sections that are misspelt or not understood.
    warnings: list[tuple[int, str, str | None]] = field(default_factory=list)
    # Blank lines before the text that cleandoc removed: line index + leading = line in the literal.
    leading: int = 0


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _header(line: str, in_section: bool) -> tuple[str, str, str | None] | None:
    """(section, inline value, meant) when ``line`` opens a section; meant is the field a misspelling stands for."""
    found = _HEADER_LIKE.match(line)
    if not found:
        return None
    name, value = found.group(1), (found.group(2) or "").strip()
    if name in KNOWN:
        return name, value, None
    meant = near_miss(name, [*META_FIELDS, *LIST_FIELDS])
    if meant is not None or in_section:
        return name, value, meant
    return None  # prose in the description that happens to contain a colon


# Slightly over 50 lines: one line-by-line state machine (description, sections, fields); its states
# are clearest side by side.
def parse_docstring(raw: str) -> Docstring:
    """Parse a docstring's description, ``Args:`` and fields (``Timeout:``, ``Title:``, …)."""
    raw_lines = raw.expandtabs().split("\n")
    lines = inspect.cleandoc(raw).splitlines()
    summary: list[str] = []
    doc = Docstring(description="", leading=next((i for i, line in enumerate(raw_lines) if line.strip()), 0))
    section: str | None = None
    header_indent = 0
    entry_indent: int | None = None
    current: ArgDoc | None = None
    meta: Field | None = None
    for index, line in enumerate(lines):
        header = _header(line, section is not None) if section is None or _indent(line) <= header_indent else None
        if header is not None:
            name, value, meant = header
            section, header_indent, entry_indent, current, meta = name, _indent(line), None, None, None
            if name not in KNOWN:
                hint = (
                    f"did you mean {meant + ':'!r}?"
                    if meant
                    else f"metadata sections are {', '.join(META_FIELDS)}, Examples, Errors"
                )
                doc.warnings.append((index, f"unknown docstring section {name + ':'!r}; it is ignored", hint))
            elif name in META_FIELDS or name in LIST_FIELDS:
                meta = Field(name, index, value)
                doc.meta.append(meta)
            if value:
                doc.fields[name] = value
            continue
        if section is None:
            summary.append(line)
            continue
        if not line.strip():
            continue
        indent = _indent(line)
        if entry_indent is None:
            entry_indent = indent
        if meta is not None:
            if meta.section in LIST_FIELDS and indent <= entry_indent:
                meta.entries.append((line.strip(), index))
            elif meta.section in LIST_FIELDS and meta.entries:
                text, at = meta.entries[-1]
                meta.entries[-1] = (f"{text}\n{line.strip()}", at)
            else:
                meta.value = f"{meta.value} {line.strip()}".strip()
            continue
        if section not in _ARG_SECTIONS:
            continue
        if indent <= entry_indent and (entry := _ENTRY.match(line.strip())):
            type_text, optional = _split_type(entry.group(2))
            current = ArgDoc(entry.group(3).strip(), type_text, optional)
            doc.args[entry.group(1)] = current
        elif current is not None:
            current.description = f"{current.description} {line.strip()}".strip()
    doc.description = "\n".join(summary).strip()
    return doc


def _split_type(spec: str | None) -> tuple[str | None, bool]:
    spec = (spec or "").strip()
    optional = spec == "optional" or spec.endswith(", optional") or spec.endswith(",optional")
    if optional:
        spec = spec[: -len("optional")].rstrip().rstrip(",").rstrip()
    return (spec or None), optional
