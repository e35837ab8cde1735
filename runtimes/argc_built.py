"""The command line of an argc-built script: words its own parser (``argc --argc-build``) reads back exactly.

What that parser does with a word, and so what it can receive (argc 1.22's generated ``_argc_parse``):

* ``--opt VALUE``: the next word is the value, unless it looks like an option: it starts with ``-``,
  is not ``-`` alone, does not start with ``---``, and its text before the first ``=`` has no space.
* ``--opt=VALUE``: the value is the text after the LAST ``=`` of the word, so it must hold no ``=``.
* ``*,`` options: each word is split on commas with ``read``, which keeps only its first line.
* after ``--`` every word is positional; positionals fill the ``@arg`` parameters in order, and a
  lone positional ``help`` prints the usage instead of running ``main``.

A value none of these forms carries is refused with the reason, never passed to be bound wrongly.
"""

from __future__ import annotations

import json

from toolexec.errors import BadRequest
from toolexec.records import Argc, ArgcParam, ToolDeclaration

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

# The characters bash's [[:space:]] matches in every locale (others depend on the tool's locale).
_SPACE = frozenset(" \t\n\v\f\r")


def built_argv(tool: ToolDeclaration, invocation: Argc, arguments: dict[str, Any]) -> list[str]:
    """The words after the script's path; BadRequest naming the parameter for a value argc cannot receive."""
    words: list[str] = []
    positional: list[tuple[ArgcParam, list[str]]] = []
    for param in invocation.params:
        value = arguments.get(param.name)
        if value is None:
            if param.kind == "arg":
                positional.append((param, []))
            continue  # the script's parser applies its own default
        if param.kind == "flag":
            words += [f"--{param.long}"] if value is True else []
            continue
        texts = [word_text(item) for item in (value if isinstance(value, list) else [value])]
        for text in texts:
            if "\0" in text:
                raise _refused(tool, param, text, "it contains a NUL character, which no command-line word can hold")
        if param.kind == "arg":
            positional.append((param, texts))
            continue
        for text in texts:
            if param.split and "\n" in text:
                raise _refused(
                    tool, param, text, "the parser splits a comma-separated value with `read`, which keeps only its first line"
                )
            words += _option_words(tool, param, text)
    return [*words, *_positional_words(tool, positional)]


def _option_words(tool: ToolDeclaration, param: ArgcParam, text: str) -> list[str]:
    """``--opt VALUE`` or ``--opt=VALUE``, whichever the parser reads back as exactly ``text``."""
    long = f"--{param.long}"
    if not _looks_like_option(text):
        return [long, text]
    if "=" not in text:
        return [f"{long}={text}"]
    raise _refused(
        tool,
        param,
        text,
        "it starts with '-' and has '=' with no space before the first '=': the parser takes such a word for an "
        "option, and --opt=VALUE keeps only the text after the last '='",
    )


def _looks_like_option(text: str) -> bool:
    """Whether the parser takes ``text``, as the word after an option, for another option (``_argc_maybe_flag_option``)."""
    if not text.startswith("-") or len(text) == 1 or text.startswith("---"):
        return False
    return not any(char in _SPACE for char in text.split("=", 1)[0])


def _positional_words(tool: ToolDeclaration, positional: list[tuple[ArgcParam, list[str]]]) -> list[str]:
    """``--`` and the positional values, when the parser fills the ``@arg`` parameters with exactly them."""
    values = [text for _, texts in positional for text in texts]
    if not values:
        return []
    if len(values) == 1 and values[0] == "help":
        param = next(p for p, texts in positional if texts)
        raise _refused(tool, param, "help", "an argc-built parser answers a lone positional 'help' with its usage")
    bound = _match_positionals([param.multi for param, _ in positional], len(values))
    start = 0
    for (param, texts), (index, size) in zip(positional, bound, strict=False):
        if (index, size) != (start, len(texts)):
            given = ", ".join(p.name for p, t in positional if t)
            raise BadRequest(
                f"parameter {param.name!r} of tool {tool.name!r}: the tool's own argc parser (an argc-built script) "
                f"fills positional parameters in order, so it cannot receive these values of {given}; "
                f"give the positional parameters before {param.name!r} too"
            )
        start += len(texts)
    return ["--", *values]


def _match_positionals(multi: list[bool], count: int) -> list[tuple[int, int]]:
    """(first index, how many) of the values each parameter binds, as ``_argc_match_positionals`` computes them."""
    bound: list[tuple[int, int]] = []
    at = 0
    for index, many in enumerate(multi):
        if at >= count:
            bound.append((at, 0))
            continue
        takes = max(count - at - (len(multi) - index) + 1, 1) if many else 1
        bound.append((at, takes))
        at += takes
    return bound


def _refused(tool: ToolDeclaration, param: ArgcParam, text: str, why: str) -> BadRequest:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return BadRequest(
        f"parameter {param.name!r} of tool {tool.name!r}: {shown!r} cannot reach the tool's own argc parser "
        f"(an argc-built script): {why}"
    )


def word_text(value: Any) -> str:
    """A JSON value as the text a Bash tool receives: strings as they are, others as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)
