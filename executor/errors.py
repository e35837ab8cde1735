"""Every exception toolexec raises, and the shape of its messages.

::

    ToolexecError
    ├── ConfigError            a config file is missing, unreadable or wrong (names key and file)
    ├── CompileError           one source file cannot become a declaration (every problem in it)
    ├── BuildError             the catalog could not be written or read
    ├── CallRefused            a call toolexec will not start: exit status 2
    │   ├── BadRequest         arguments that are not a JSON object
    │   ├── UnknownTool        no visible tool of that name (with a close match)
    │   └── InvalidArguments   arguments that break the tool's schema (every problem)
    └── RuntimeUnavailable     the interpreter a tool needs is not installed
        └── PreparationFailed  it is, but readying the tool failed (esbuild could not transpile)

A tool that runs and fails is not an exception: it is a ``ToolResult`` with
``ok=False``. Every message names the object at fault and what to do instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class ToolexecError(Exception):
    """Base class of every error toolexec raises on purpose."""


class ConfigError(ToolexecError):
    def __init__(self, path: str, message: str, *, key: str | None = None) -> None:
        self.path = path
        self.key = key
        where = f"{path}: key '{key}'" if key else path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Problem:
    """One diagnostic in a source file, 1-based line and column."""

    path: str
    line: int
    col: int
    message: str
    hint: str | None = None
    severity: str = "error"

    def __str__(self) -> str:
        label = "" if self.severity == "error" else f"{self.severity}: "
        text = f"{self.path}:{self.line}:{self.col}: {label}{self.message}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class CompileError(ToolexecError):
    def __init__(self, path: str, problems: Sequence[Problem]) -> None:
        self.path = path
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class BuildError(ToolexecError):
    pass


class CallRefused(ToolexecError):
    """A call that never started because its request was wrong."""


class BadRequest(CallRefused):
    pass


class UnknownTool(CallRefused):
    """No visible tool of that name; the message offers a close match, or says why it is not visible."""

    def __init__(self, name: str, known: Iterable[str], *, because: str | None = None) -> None:
        self.name = name
        super().__init__(f"unknown tool {name!r}: {because}" if because else f"unknown tool {name!r}{did_you_mean(name, known)}")


class InvalidArguments(CallRefused):
    def __init__(self, tool: str, problems: Sequence[str]) -> None:
        self.tool = tool
        self.problems = tuple(problems)
        lines = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(f"invalid arguments for tool {tool!r}:\n{lines}")


class RuntimeUnavailable(ToolexecError):
    def __init__(self, interpreter: str, hint: str) -> None:
        self.interpreter = interpreter
        super().__init__(self.describe(interpreter, hint))

    @staticmethod
    def describe(interpreter: str, hint: str) -> str:
        return f"interpreter {interpreter!r} not found; {hint}"


class PreparationFailed(RuntimeUnavailable):
    """The program that readies a tool to run (esbuild for TypeScript) is there but failed."""

    @staticmethod
    def describe(interpreter: str, hint: str) -> str:
        return f"{interpreter} {hint}"


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """'; did you mean 'x'?' for the closest candidate, or '' when none is close."""
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""
