"""Python docstrings in the three styles pydantic-ai reads: Google, reST (Sphinx fields) and NumPy.

The style is inferred as pydantic-ai infers it (:func:`docstring_style`): a ``:param x:``-like
field line makes it reST, else a Google section header followed by an indented line makes it
Google, else a NumPy header underlined with dashes makes it NumPy, else Google. Whatever the
style, the description is the text before the first section, parameter descriptions go to
the parameters, and every other section (returns, raises, notes …) is left out.

toolexec's metadata fields are written as Google sections in every style: ``Title: …``,
``Summary: …``, ``Tags: a, b``, ``Read-only: true`` (and ``Destructive:``, ``Idempotent:``,
``Open-world:``), ``Timeout: 30``, ``Max output bytes: 65536`` on one line, and
``Examples:`` / ``Errors:`` with indented entries (in a NumPy docstring, also as underlined
sections). Every field keeps the line it came from (an index into the cleaned docstring) so
problems point at it.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, field
from typing import Literal

from toolexec.compilers.metadata import near_miss

Style = Literal["google", "sphinx", "numpy"]

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
    "Network": "network",
    "Writes": "writes",
    "Reads": "reads",
    "Env": "env",
    "Memory": "memory",
    "CPU": "cpu",
    "Processes": "processes",
    "File size": "file_size",
    "Scope": "scopes",
    "Icon": "icon",
    "Task": "task",
    "Max concurrency": "max_concurrency",
    "Rate": "rate",
    "Warm": "warm",
}
# Sections holding indented entries.
LIST_FIELDS = {"Examples": "examples", "Example": "examples", "Errors": "errors"}
_ARG_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Other Parameters", "Keyword Args", "Keyword Arguments"}
# Google sections that are prose for the reader, not for the tool's declaration.
_PROSE_SECTIONS = {"Returns", "Raises", "Notes", "Yields", "Note", "Attributes", "Warns", "Warnings", "See Also", "References"}
KNOWN = (*META_FIELDS, *LIST_FIELDS, *_ARG_SECTIONS, *_PROSE_SECTIONS)
_BY_LOWER = {name.lower(): name for name in KNOWN}
# A line that looks like a section header: a capitalised phrase of up to four words and a colon.
_HEADER_LIKE = re.compile(r"^\s*([A-Z][A-Za-z]*(?:[ -][A-Za-z]+){0,3}):\s*(.*)$")
_ENTRY = re.compile(r"^(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
# reST info fields: ":param int x: text", ":type x: int", ":returns: text", ":raises ValueError: text".
_FIELD = re.compile(r"^:(\w+)([^:]*):(.*)$")
_PARAM_FIELDS = {"param", "parameter", "arg", "argument", "key", "keyword"}
# NumPy parameter entries: "x : int", "x, y : float, optional", "mode : {'r', 'w'}", "x".
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::\s*(.*))?$")
_NUMPY_DEFAULT = re.compile(r"^(.+?),\s+default(?: |: |=).+$")

# How pydantic-ai infers a docstring's style (its _infer_docstring_style, after griffe's issue 329): the first
# style with a matching line wins; Google when none does.
_STYLE_PATTERNS: list[tuple[str, tuple[str, ...], Style]] = [
    (
        r"\n[ \t]*:{0}([ \t]+\w+)*:([ \t]+.+)?\n",
        ("param", "parameter", "arg", "argument", "key", "keyword", "type", "var", "ivar", "cvar", "vartype",
         "returns", "return", "rtype", "raises", "raise", "except", "exception"),
        "sphinx",
    ),
    (
        r"\n[ \t]*{0}:([ \t]+.+)?\n[ \t]+.+",
        ("args", "arguments", "params", "parameters", "keyword args", "keyword arguments", "other args",
         "other arguments", "other params", "other parameters", "raises", "exceptions", "returns", "yields",
         "receives", "examples", "attributes", "functions", "methods", "classes", "modules", "warns", "warnings"),
        "google",
    ),
    (
        r"\n[ \t]*{0}\n[ \t]*---+\n",
        ("deprecated", "parameters", "other parameters", "returns", "yields", "receives", "raises", "warns",
         "attributes", "functions", "methods", "classes", "modules"),
        "numpy",
    ),
]  # fmt: skip


def docstring_style(raw: str) -> Style:
    """The style of a docstring, inferred as pydantic-ai infers it."""
    for pattern, names, style in _STYLE_PATTERNS:
        if any(re.search(pattern.format(name), raw, re.IGNORECASE | re.MULTILINE) for name in names):
            return style
    return "google"


@dataclass
class ArgDoc:
    """One documented parameter: its text and the type written beside it, if any."""

    description: str
    type: str | None = None
    optional: bool = False


@dataclass
class Field:
    """One metadata section: its value (header line plus continuation) or its entries, with line indices.

    ``lines`` holds every line of an ``Examples:`` section as written (index, text), for :func:`split_examples`.
    """

    section: str
    line: int
    value: str = ""
    entries: list[tuple[str, int]] = field(default_factory=list)
    lines: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class Docstring:
    """A parsed docstring: description, documented arguments and fields."""

    description: str
    args: dict[str, ArgDoc] = field(default_factory=dict)
    # Inline section values such as ``Timeout: 30``.
    fields: dict[str, str] = field(default_factory=dict)
    meta: list[Field] = field(default_factory=list)
    # (line index, message, hint) for sections that are misspelt or not understood.
    warnings: list[tuple[int, str, str | None]] = field(default_factory=list)
    # Blank lines before the text that cleandoc removed: line index + leading = line in the literal.
    leading: int = 0
    style: Style = "google"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_dashes(line: str) -> bool:
    return bool(line.strip()) and not line.strip().strip("-")


def parse_docstring(raw: str) -> Docstring:
    """Parse a docstring's description, parameters and fields (``Timeout:``, ``Title:``, …), in its own style."""
    raw_lines = raw.expandtabs().split("\n")
    reader = _Reader(docstring_style(raw))
    reader.doc.leading = next((i for i, line in enumerate(raw_lines) if line.strip()), 0)
    lines = inspect.cleandoc(raw).splitlines()
    index = 0
    while index < len(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        index += reader.line(index, lines[index], following)
    reader.doc.description = "\n".join(reader.summary).strip()
    return reader.doc


class _Reader:
    """A line-by-line reader: the description, then sections (Google headers, NumPy headers or reST fields)."""

    def __init__(self, style: Style) -> None:
        self.doc = Docstring(description="", style=style)
        self.summary: list[str] = []
        self.section: str | None = None  # the canonical name of the section being read
        self.header_indent = 0
        self.entry_indent: int | None = None
        self.current: list[ArgDoc] = []  # the parameter(s) that continuation lines describe
        self.meta: Field | None = None
        self.types: dict[str, tuple[str | None, bool]] = {}  # reST ``:type x:`` lines read before ``:param x:``

    def line(self, index: int, line: str, following: str) -> int:
        """Read one line (and the dash line under a NumPy header); how many lines were used."""
        style = self.doc.style
        if style == "numpy" and line.strip() and _is_dashes(following) and not _indent(line):
            self.open(index, _BY_LOWER.get(line.strip().lower(), "Notes"), "", 0)
            return 2
        if style == "sphinx" and (found := _FIELD.match(line)):
            self.field(found.group(1), found.group(2).split(), found.group(3).strip())
            return 1
        header = self.header(line) if self.section is None or _indent(line) <= self.header_indent else None
        if header is not None:
            self.open(index, *header, _indent(line))
        elif self.section is None:
            self.summary.append(line)
        elif line.strip():
            self.content(index, line)
        elif self.meta is not None and self.meta.section in LIST_FIELDS:
            self.meta.lines.append((index, ""))
        return 1

    def header(self, line: str) -> tuple[str, str] | None:
        """(section, inline value) when ``line`` opens a Google section; a misspelt one is warned about."""
        found = _HEADER_LIKE.match(line)
        if not found:
            return None
        name, value = found.group(1), (found.group(2) or "").strip()
        if name in KNOWN:
            return name, value
        if self.doc.style != "google":
            return None  # in reST and NumPy docstrings only toolexec's own fields are Google headers
        meant = near_miss(name, [*META_FIELDS, *LIST_FIELDS])
        if meant is None and self.section is None:
            return None  # prose in the description that happens to contain a colon
        return name, value

    def open(self, index: int, name: str, value: str, indent: int) -> None:
        """Start a section at line ``index``, its header indented by ``indent``."""
        self.section, self.header_indent, self.entry_indent, self.current, self.meta = name, indent, None, [], None
        if name not in KNOWN:
            meant = near_miss(name, [*META_FIELDS, *LIST_FIELDS])
            hint = (
                f"did you mean {meant + ':'!r}?" if meant else f"metadata sections are {', '.join(META_FIELDS)}, Examples, Errors"
            )
            self.doc.warnings.append((index, f"unknown docstring section {name + ':'!r}; it is ignored", hint))
        elif name in META_FIELDS or name in LIST_FIELDS:
            self.meta = Field(name, index, value)
            self.doc.meta.append(self.meta)
        if value:
            self.doc.fields[name] = value

    def field(self, kind: str, parts: list[str], text: str) -> None:
        """A reST field line: ``:param [type] name: text`` and ``:type name: type`` describe parameters."""
        self.section, self.header_indent, self.entry_indent, self.meta, self.current = "Field", 0, None, None, []
        if kind in _PARAM_FIELDS and parts and parts[-1] not in self.doc.args:  # griffe keeps the first of two
            type_text, optional = _split_type(" ".join(parts[:-1]) or None)
            pending = self.types.pop(parts[-1], (None, False))
            self.current = [ArgDoc(text, type_text or pending[0], optional or pending[1])]
            self.doc.args[parts[-1]] = self.current[0]
        elif kind == "type" and len(parts) == 1:
            type_text, optional = _split_type(text.replace(" or ", " | "))
            arg = self.doc.args.get(parts[0])
            if arg is None:  # the type may come before the parameter's own field
                self.types[parts[0]] = (type_text, optional)
            elif arg.type is None:  # a type written in the :param: line wins
                arg.type, arg.optional = type_text, arg.optional or optional

    def content(self, index: int, line: str) -> None:
        """A non-blank line inside the current section."""
        indent = _indent(line)
        if self.entry_indent is None:
            self.entry_indent = indent
        meta = self.meta
        if meta is not None:
            if meta.section not in LIST_FIELDS:
                meta.value = f"{meta.value} {line.strip()}".strip()
            elif LIST_FIELDS[meta.section] == "examples":
                meta.lines.append((index, line))
            elif indent <= self.entry_indent or not meta.entries:
                meta.entries.append((line.strip(), index))
            else:
                text, at = meta.entries[-1]
                meta.entries[-1] = (f"{text} {line.strip()}", at)
            return
        if self.section == "Field":
            self.extend(line)
        elif self.section in _ARG_SECTIONS:
            if indent > self.entry_indent:
                self.extend(line)
            elif self.doc.style == "numpy":
                self.numpy_entry(line.strip())
            elif entry := _ENTRY.match(line.strip()):
                type_text, optional = _split_type(entry.group(2))
                self.current = [ArgDoc(entry.group(3).strip(), type_text, optional)]
                self.doc.args[entry.group(1)] = self.current[0]

    def numpy_entry(self, line: str) -> None:
        """``x : int`` / ``x, y : float, optional`` / ``mode : {'r', 'w'}``: its description follows, indented."""
        found = _NUMPY_ENTRY.match(line)
        if found is None:
            self.current = []
            return
        type_text, optional = _split_type(_NUMPY_DEFAULT.sub(r"\1", (found.group(2) or "").strip()) or None)
        if type_text and type_text.startswith("{") and type_text.endswith("}"):  # a set of choices
            type_text = f"Literal[{type_text[1:-1]}]"
        self.current = []
        for name in (n.strip().lstrip("*") for n in found.group(1).split(",")):
            if name not in self.doc.args:
                self.doc.args[name] = ArgDoc("", type_text, optional)
                self.current.append(self.doc.args[name])

    def extend(self, line: str) -> None:
        """A continuation line of the current parameter(s): joined with a space."""
        for arg in self.current:
            arg.description = f"{arg.description} {line.strip()}".strip()


def _split_type(spec: str | None) -> tuple[str | None, bool]:
    spec = (spec or "").strip()
    optional = spec == "optional" or spec.endswith(", optional") or spec.endswith(",optional")
    if optional:
        spec = spec[: -len("optional")].rstrip().rstrip(",").rstrip()
    return (spec or None), optional


def split_examples(meta: Field) -> tuple[list[tuple[object, int]], list[tuple[str, int, str]]]:
    """An ``Examples:`` section read as JSON objects, each on one line or pretty-printed over many.

    Returns the objects with the line index each starts on, and what is not one (a run of prose,
    a doctest, malformed JSON, text after an object) as (text, line index, why), to be dropped
    with a warning.
    """
    rows = ([(meta.line, meta.value)] if meta.value else []) + meta.lines
    text = "\n".join(line for _, line in rows)
    starts = [0]
    for _, line in rows:
        starts.append(starts[-1] + len(line) + 1)
    decoder = json.JSONDecoder()
    found: list[tuple[object, int]] = []
    dropped: list[tuple[str, int, str]] = []
    prose: list[tuple[int, str]] = []

    def end_prose() -> None:
        if prose:
            dropped.append(("\n".join(line for _, line in prose), prose[0][0], "not a JSON object of arguments"))
            prose.clear()

    row = 0
    while row < len(rows):
        index, line = rows[row]
        stripped = line.strip()
        if not stripped.startswith("{"):
            if stripped:
                prose.append((index, stripped))
            else:
                end_prose()
            row += 1
            continue
        end_prose()
        offset = starts[row] + line.index("{")
        try:
            value, end = decoder.raw_decode(text, offset)
        except json.JSONDecodeError as exc:
            dropped.append((stripped, index, f"not valid JSON: {exc.msg} (character {exc.pos - offset + 1})"))
            row += 1
            continue
        found.append((value, index))
        row = next(r for r in range(row, len(rows)) if starts[r + 1] > end - 1)
        rest = text[end : starts[row + 1] - 1].strip()
        if rest:
            dropped.append((rest, rows[row][0], "text after a JSON object"))
        row += 1
    end_prose()
    return found, dropped
