"""The argc comment-tag language: one ``@option`` / ``@flag`` / ``@arg`` / ``@env`` line at a time.

``--name!`` required, ``--name*`` / ``--name+`` many (``*,`` splits on commas),
``--name=value`` or ``--name=`_fn``` a default, ``--name[a|b]`` / ``[=a|b]`` /
``[`_fn`]`` choices, ``<INT>`` / ``<NUM>`` a typed notation, then the help text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from toolexec.records import ArgcEnv, ArgcParam

ParamKind = Literal["option", "flag", "arg"]
_LONG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ARG = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHORT = re.compile(r"-([A-Za-z0-9])(?=\s|$)")


class TagError(ValueError):
    """A malformed tag: where in the line (``offset``), what is wrong and what to write instead."""

    def __init__(self, offset: int, message: str, hint: str) -> None:
        super().__init__(message)
        self.offset, self.message, self.hint = offset, message, hint


@dataclass
class Param:
    """One ``@option`` / ``@flag`` / ``@arg`` as argc reads it."""

    kind: ParamKind
    name: str  # the property name: the long name with '-' and '.' turned into '_'
    long: str
    short: str | None = None
    required: bool = False
    multi: bool = False
    split: bool = False
    default: str | None = None
    default_fn: str | None = None
    choices: list[str] | None = None
    choices_fn: str | None = None
    check_choices: bool = True
    notation: str | None = None
    help: str = ""

    @property
    def var(self) -> str:
        """The shell variable argc binds: ``argc_<name>``."""
        return f"argc_{self.name}"

    def invocation(self) -> ArgcParam:
        """What the Bash runtime needs of this parameter at call time."""
        return ArgcParam(
            kind=self.kind,
            name=self.name,
            var=self.var,
            multi=self.multi,
            split=self.split,
            default=self.default,
            default_fn=self.default_fn,
            choices_fn=self.choices_fn,
            check_choices=self.check_choices,
            long=self.long if self.kind != "arg" else "",
        )


@dataclass
class EnvVar:
    """One ``@env`` line as argc reads it."""

    name: str
    required: bool = False
    default: str | None = None
    choices: list[str] = field(default_factory=list)
    help: str = ""

    def invocation(self) -> ArgcEnv:
        """The runtime's immutable copy of this ``@env`` line."""
        return ArgcEnv(name=self.name, required=self.required, default=self.default, choices=tuple(self.choices), help=self.help)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_space(self) -> None:
        while self.peek().isspace():
            self.pos += 1

    def match(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        found = pattern.match(self.text, self.pos)
        if found:
            self.pos = found.end()
        return found

    def until(self, closer: str, what: str, example: str) -> str:
        end = self.text.find(closer, self.pos)
        if end < 0:
            raise TagError(self.pos, f"unclosed {what}: expected {closer!r}", f"write it as {example}")
        value, self.pos = self.text[self.pos : end], end + 1
        return value

    def word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and not self.text[self.pos].isspace():
            self.pos += 1
        return self.text[start : self.pos]


def parse_param(kind: ParamKind, text: str) -> Param:
    """Read the rest of an ``@option`` / ``@flag`` / ``@arg`` line; TagError when it is malformed."""
    scan = _Scanner(text)
    scan.skip_space()
    short = None
    if kind != "arg":
        if (found := scan.match(_SHORT)) is not None:
            short = found.group(1)
            scan.skip_space()
        if not text.startswith("--", scan.pos):
            raise TagError(scan.pos, "expected a long name such as --path", f"write # @{kind} --name <help text>")
        scan.pos += 2
    found = scan.match(_LONG if kind != "arg" else _ARG)
    if found is None:
        example = f"# @{kind} {'--' if kind != 'arg' else ''}name <help text>"
        raise TagError(scan.pos, "expected a name", f"write {example}")
    # argc binds --foo-bar and --foo.bar both to argc_foo_bar
    param = Param(kind=kind, name=re.sub(r"[-.]", "_", found.group(0)), long=found.group(0), short=short)
    _modifiers(scan, param)
    scan.skip_space()
    while scan.peek() == "<":
        scan.pos += 1
        notation = scan.until(">", "notation", "<INT>")
        param.notation = param.notation or notation
        scan.skip_space()
    param.help = scan.text[scan.pos :].strip()
    return param


def _modifiers(scan: _Scanner, param: Param) -> None:
    flag = param.kind == "flag"
    while (char := scan.peek()) and not char.isspace():
        start = scan.pos
        scan.pos += 1
        if char == "!":
            if flag:
                raise TagError(start, "a flag cannot be required", f"remove '!': # @flag --{param.long}")
            param.required = True
        elif char in "*+":
            param.multi = True
            param.required = param.required or (char == "+" and not flag)
            if scan.peek() == ",":
                scan.pos += 1
                param.split = True
        elif char in "=[" and flag:
            raise TagError(start, "a flag takes no value, default or choices", f"use # @option --{param.long} for a value")
        elif char == "=":
            _default(scan, param)
        elif char == "[":
            _choices(scan.until("]", "choice list", "[a|b|c]"), param, start)
        else:
            raise TagError(
                start, f"unexpected {char!r} after the name {param.long!r}", "modifiers are !, *, +, *, =default and [a|b]"
            )


def _default(scan: _Scanner, param: Param) -> None:
    if scan.peek() == "`":
        scan.pos += 1
        param.default_fn = scan.until("`", "function default", "=`_my_function`")
    elif scan.peek() in "\"'":
        quote = scan.peek()
        scan.pos += 1
        param.default = scan.until(quote, "quoted default", f"={quote}some value{quote}")
    else:
        param.default = scan.word()


def _choices(body: str, param: Param, at: int) -> None:
    if body.startswith("?`") or body.startswith("`"):
        param.check_choices = not body.startswith("?")
        param.choices_fn = body.strip("?`")
        return
    if body.startswith("="):
        body = body[1:]
        param.default = body.split("|", 1)[0]
    param.choices = body.split("|")
    if not body or any(not c for c in param.choices):
        raise TagError(at, f"empty choice in [{body}]", "write choices as [a|b|c]")


def parse_env(text: str) -> EnvVar:
    """Read the rest of an ``@env`` line; TagError when it is malformed."""
    scan = _Scanner(text)
    scan.skip_space()
    found = scan.match(_ENV)
    if found is None:
        raise TagError(scan.pos, "expected a variable name", "write # @env NAME <help text>, NAME! when required")
    env = EnvVar(name=found.group(0))
    while (char := scan.peek()) and not char.isspace():
        start = scan.pos
        scan.pos += 1
        if char == "!":
            env.required = True
        elif char == "=":
            env.default = scan.word()
        elif char == "[":
            body = scan.until("]", "choice list", "[a|b]")
            if body.startswith("="):
                body = body[1:]
                env.default = body.split("|", 1)[0]
            env.choices = body.split("|")
        else:
            raise TagError(start, f"unexpected {char!r} after {env.name}", "write NAME, NAME!, NAME=default or NAME[a|b]")
    env.help = scan.text[scan.pos :].strip()
    return env
