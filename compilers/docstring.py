"""Google-style docstrings: the summary and the ``Args:`` entries."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

SECTIONS = ("Args", "Arguments", "Parameters", "Returns", "Raises", "Examples", "Notes")
_HEADER = re.compile(rf"^\s*({'|'.join(SECTIONS)}|Yields|Example|Note|Attributes|Timeout|Max output bytes):\s*(.*)$")
_ARG_SECTIONS = {"Args", "Arguments", "Parameters"}
_ENTRY = re.compile(r"^(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


@dataclass
class ArgDoc:
    description: str
    type: str | None = None
    optional: bool = False


@dataclass
class Docstring:
    description: str
    args: dict[str, ArgDoc] = field(default_factory=dict)
    # Inline section values such as ``Timeout: 30``.
    fields: dict[str, str] = field(default_factory=dict)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_docstring(raw: str) -> Docstring:
    lines = inspect.cleandoc(raw).splitlines()
    summary: list[str] = []
    doc = Docstring(description="")
    section: str | None = None
    header_indent = 0
    entry_indent: int | None = None
    current: ArgDoc | None = None
    for line in lines:
        header = _HEADER.match(line)
        if header and (section is None or _indent(line) <= header_indent):
            section, header_indent, entry_indent, current = header.group(1), _indent(line), None, None
            if header.group(2).strip():
                doc.fields[section] = header.group(2).strip()
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in _ARG_SECTIONS or not line.strip():
            continue
        indent = _indent(line)
        if entry_indent is None:
            entry_indent = indent
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
