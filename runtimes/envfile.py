"""``.env`` files read exactly as python-dotenv's ``load_dotenv`` reads them, without importing it.

python-dotenv itself costs a one-shot call about 12 ms of imports (``logging``, ``tempfile``,
``typing``, …: measured with ``python -X importtime``), where this reader costs nothing measurable;
so this module follows its grammar (python-dotenv 1.2's ``parser.py`` and ``variables.py``) and
``tests/runtimes/test_envfile.py`` checks it against python-dotenv on generated files:

* ``KEY=value``, ``export KEY=value``, ``'quoted key'=value``; spaces around ``=``;
* ``'single'`` (``\\'`` and ``\\\\`` escapes) and ``"double"`` quoted values (``\\n``, ``\\t``,
  ``\\"``, … escapes), both of which may span lines; unquoted values end at `` #`` (a comment);
* ``${NAME}`` and ``${NAME:-default}`` expanded from the environment first, then the values read
  before it (``load_dotenv`` without ``override``); a ``KEY`` without ``=`` sets nothing;
* a line that cannot be read is skipped, as python-dotenv skips it (with a warning there).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

_multiline_whitespace = re.compile(r"\s*", re.MULTILINE)
_whitespace = re.compile(r"[^\S\r\n]*")
_export = re.compile(r"(?:export[^\S\r\n]+)?")
_single_quoted_key = re.compile(r"'([^']+)'")
_unquoted_key = re.compile(r"([^=\#\s]+)")
_equal_sign = re.compile(r"(=[^\S\r\n]*)")
_single_quoted_value = re.compile(r"'((?:\\.|[^'\\])*)'", re.DOTALL)
_double_quoted_value = re.compile(r'"((?:\\.|[^"\\])*)"', re.DOTALL)
_unquoted_value = re.compile(r"([^\r\n]*)")
_inline_comment = re.compile(r"\s+#.*")
_comment = re.compile(r"(?:[^\S\r\n]*#[^\r\n]*)?")
_end_of_line = re.compile(r"[^\S\r\n]*(?:\r\n|\n|\r|$)")
_rest_of_line = re.compile(r"[^\r\n]*(?:\r|\n|\r\n)?")
_double_quote_escapes = re.compile(r"\\[\\'\"abfnrtv]")
_single_quote_escapes = re.compile(r"\\[\\']")
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_variable = re.compile(r"\$\{(?P<name>[^\}:]*)(?::-(?P<default>[^\}]*))?\}")


class _Unreadable(Exception):
    """The binding at this point does not follow the grammar: the rest of its line is skipped."""


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.at = text.removeprefix("\ufeff"), 0

    def take(self, pattern: re.Pattern[str]) -> str:
        """The pattern's first group (or whole match) at the current point, which moves past it."""
        found = pattern.match(self.text, self.at)
        if found is None:
            raise _Unreadable
        self.at = found.end()
        return found.group(1) if pattern.groups else found.group(0)

    def peek(self) -> str:
        return self.text[self.at : self.at + 1]


def bindings(text: str) -> Iterator[tuple[str, str | None]]:
    """Each ``(key, value)`` in the order written; ``value`` is None for a bare ``KEY``."""
    reader = _Reader(text)
    while reader.at < len(reader.text):
        try:
            reader.take(_multiline_whitespace)
            if reader.at >= len(reader.text):
                return
            reader.take(_export)
            key = _key(reader)
            reader.take(_whitespace)
            value = None
            if reader.peek() == "=":
                equal_sign = reader.take(_equal_sign)
                # `KEY= # comment` is empty; `KEY=#text` is the text
                value = "" if len(equal_sign) > 1 and reader.peek() == "#" else _value(reader)
            reader.take(_comment)
            reader.take(_end_of_line)
        except _Unreadable:
            reader.take(_rest_of_line)
            continue
        if key is not None:
            yield key, value


def _key(reader: _Reader) -> str | None:
    char = reader.peek()
    if char == "#":
        return None  # a comment line
    return reader.take(_single_quoted_key if char == "'" else _unquoted_key)


def _value(reader: _Reader) -> str:
    char = reader.peek()
    if char == "'":
        return _single_quote_escapes.sub(_unescape, reader.take(_single_quoted_value))
    if char == '"':
        return _double_quote_escapes.sub(_unescape, reader.take(_double_quoted_value))
    if char in ("", "\n", "\r"):
        return ""
    return _inline_comment.sub("", reader.take(_unquoted_value)).rstrip()


def _unescape(escape: re.Match[str]) -> str:
    return _ESCAPES[escape.group(0)[1]]


def expanded(pairs: Iterator[tuple[str, str | None]], environ: Mapping[str, str]) -> dict[str, str | None]:
    """The values with ``${NAME}`` / ``${NAME:-default}`` replaced: ``environ`` first, then earlier values."""
    values: dict[str, str | None] = {}
    for key, value in pairs:
        if value is not None and "${" in value:
            value = _variable.sub(lambda found: _lookup(found, values, environ), value)
        values[key] = value
    return values


def _lookup(found: re.Match[str], values: Mapping[str, str | None], environ: Mapping[str, str]) -> str:
    name, default = found.group("name"), found.group("default") or ""
    if name in environ:
        return environ[name]
    value = values.get(name, default)
    return value if value is not None else ""
