"""``toolexec check``: the errors a build would report, plus advice a build does not give.

Warnings: parameters without a description, types that fell back to string (the compilers'
own warnings), no worked example, a tool that looks destructive (it writes, deletes or runs
commands) without declaring its destructive hint either way, and examples that no longer match
the tool's schema. Only errors fail a check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from toolexec.compilers import SUFFIXES, compile_source
from toolexec.compilers.agent import compile_functions, dialect_of
from toolexec.errors import CompileError, Problem
from toolexec.policy import unconfined
from toolexec.records import ToolDeclaration

if TYPE_CHECKING:
    from toolexec.config import Config
    from toolexec.records import Language

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One diagnostic of ``check``: where, how bad, and what to do."""

    file: str
    line: int
    column: int
    severity: Severity
    message: str
    hint: str | None = None
    tool: str | None = None

    def __str__(self) -> str:
        label = "error" if self.severity == "error" else "warning"
        text = f"{self.file}:{self.line}:{self.column}: {label}: {self.message}"
        return f"{text}\n  hint: {self.hint}" if self.hint else text

    def to_dict(self) -> dict[str, object]:
        """The JSON form ``check --json`` prints."""
        return asdict(self)


# What makes a tool look destructive, per language: (pattern, what it does).
_DESTRUCTIVE: dict[Language, list[tuple[str, str]]] = {
    "python": [
        (r"\bopen\([^)]*['\"][wax]b?\+?['\"]", "opens a file for writing"),
        (r"\.write_(?:text|bytes)\(", "writes a file"),
        (r"\b(?:os\.(?:remove|unlink|rmdir|removedirs|rename|replace)|shutil\.(?:rmtree|move))\(", "removes or moves files"),
        (r"\.(?:unlink|rmdir)\(", "removes files"),
        (r"\b(?:subprocess\.\w+|os\.system|os\.popen|os\.exec\w*)\(", "runs commands"),
    ],
    "bash": [
        (r"(?:^|[;&|]\s*|\s)(?:rm|rmdir|mv|dd|truncate|shred)\s", "removes or moves files"),
        (r"\bsed\s+-i", "edits files in place"),
        (r"(?:bash|sh)\s+-c\b|\beval\s+\"?\$(?!\(argc)", "runs commands"),
        (r">", "writes a file"),  # after the harmless redirections are taken out (_SAFE_REDIRECT)
    ],
    "javascript": [
        (r"\b(?:writeFile|appendFile|unlink|rm|rmdir|rename|truncate)(?:Sync)?\(", "writes or removes files"),
        (r"(?<![.\w])(?:exec|execSync|execFile|execFileSync|spawn|spawnSync)\(|child_process|Bun\.spawn", "runs commands"),
    ],
}
_DESTRUCTIVE["typescript"] = _DESTRUCTIVE["javascript"]
_HINT = {
    "python": "add `Destructive: true` to the docstring (or `Destructive: false` if it only writes what it owns)",
    "bash": "add `# @meta destructive` (or `# @meta destructive false` if it only writes what it owns)",
    "javascript": "add `@destructive` to the JSDoc (or `@destructive false` if it only writes what it owns)",
    "typescript": "add `@destructive` to the JSDoc (or `@destructive false` if it only writes what it owns)",
}
# Redirections that write nothing of the user's: the result file, stderr, /dev/null, fd copies.
_SAFE_REDIRECT = re.compile(r"\d*>>?\s*(?:\"?\$\{?LLM_OUTPUT\}?\"?|&\d|/dev/(?:null|stdout|stderr))|\d*>&\d|->|>=|=>")
# argc's tag comments and its closing `eval "$(argc --argc-eval "$0" "$@")"` are toolexec's, not the tool's.
_META_LINE = re.compile(r"^\s*#\s*@(?:describe|option|flag|arg|env|meta)\b|argc --argc-eval")


def check_file(path: str | Path, config: Config | None = None) -> list[Finding]:
    """Every finding for one tool file (with ``config``: a warning when it would run unconfined under it)."""
    file = str(path)
    try:
        source = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return [Finding(file, 1, 1, "error", f"the file is not UTF-8 text ({exc.reason} at byte {exc.start})")]
    except OSError as exc:
        return [Finding(file, 1, 1, "error", f"cannot read the file: {exc.strerror or exc}")]
    dialect = dialect_of(path)
    try:
        if dialect is not None:  # an agent's tools file: what its build reports (authoring advice is for tools)
            found = compile_functions(source, file, dialect)
            return [_from_text(w, file, d.name) for d in found for w in d.warnings]
        declaration = compile_source(source, file)
    except CompileError as exc:
        return [_from_problem(p, "error", exc.name) for p in exc.problems] or [Finding(file, 1, 1, "error", str(exc))]
    findings = [_from_text(w, file, declaration.name) for w in declaration.warnings]
    findings += _advice(declaration, source)
    if config is not None:
        findings += _unconfined(declaration, config)
    return sorted(findings, key=lambda f: (f.line, f.column, f.message))


def check_paths(paths: Iterable[str | Path], config: Config | None = None) -> tuple[list[Finding], int]:
    """Every finding for the given files, and how many files were checked; with ``config``, a warning for each
    tool that would run unconfined under it (``sandbox: off``, or no policy under ``sandbox: declared``).

    A directory stands for the tool files directly in it (a name starting with ``_`` is a helper module the
    tools share, such as the file built-ins' ``_fsguard.py``, not a tool).
    """
    findings: list[Finding] = []
    checked = 0
    for path in paths:
        target = Path(path)
        if target.is_dir():
            files = sorted(p for p in target.iterdir() if p.is_file() and p.suffix in SUFFIXES and not p.name.startswith("_"))
        elif target.exists():
            files = [target]
        else:
            findings.append(Finding(str(target), 1, 1, "error", "no such file or directory"))
            continue
        for file in files:
            findings += check_file(file, config)
            checked += 1
    return findings, checked


def _unconfined(declaration: ToolDeclaration, config: Config) -> Iterator[Finding]:
    """A warning when the tool would run unconfined under ``config``, saying why and how to confine it."""
    why = unconfined(config.sandbox, config.sandbox_policies, declaration.name, declaration.metadata.sandbox)
    if why is not None:
        hint = (
            f"set sandbox: declared or strict in {config.path}"
            if config.sandbox == "off"
            else f"declare what it needs (Network: none, Writes: cache, …: docs/sandbox.md), set "
            f"sandbox_policies.{declaration.name} in {config.path}, or sandbox: strict there"
        )
        yield Finding(declaration.source, 1, 1, "warning", f"{declaration.name} runs unconfined: {why}", hint, declaration.name)


def _advice(declaration: ToolDeclaration, source: str) -> Iterator[Finding]:
    file, name = declaration.source, declaration.name
    meta = declaration.metadata
    tool_at = declaration.positions.get("", (1, 1))  # where the tool is declared: def run, @describe, the JSDoc
    for parameter, schema in declaration.parameters.get("properties", {}).items():
        if not str(schema.get("description", "")).strip():
            line, column = declaration.positions.get(parameter, tool_at)
            message, hint = f"parameter {parameter!r} has no description", "describe it: the model reads it"
            yield Finding(file, line, column, "warning", message, hint, name)
    if not meta.examples:
        hint = "add a worked example of the arguments (see docs/builtins.md)"
        yield Finding(file, *tool_at, "warning", "no example", hint, name)
    yield from _stale_examples(declaration)
    if meta.annotations.destructive is None:
        found = _looks_destructive(declaration.language, source)
        if found is not None:
            line, column, what = found
            message = f"the tool looks destructive (it {what}) but does not declare whether it is"
            yield Finding(file, line, column, "warning", message, _HINT[declaration.language], name)


def _stale_examples(declaration: ToolDeclaration) -> Iterator[Finding]:
    from jsonschema import Draft202012Validator  # noqa: PLC0415 - slow (~20 ms): only for a tool that gives examples

    at = declaration.positions.get("", (1, 1))
    validator = Draft202012Validator(declaration.parameters)
    for index, example in enumerate(declaration.metadata.examples, start=1):
        error = next(iter(sorted(validator.iter_errors(example), key=lambda e: list(e.path))), None)
        if error is not None:
            where = "/".join(str(p) for p in error.path) or "(the arguments)"
            message = f"example {index} does not match the parameters: {where}: {error.message}"
            yield Finding(declaration.source, *at, "warning", message, "update the example", declaration.name)


def _looks_destructive(language: Language, source: str) -> tuple[int, int, str] | None:
    """The first line that writes, deletes or runs something, as (line, column, what it does)."""
    for number, line in enumerate(source.splitlines(), start=1):
        code = (
            line if language != "bash" else ("" if _META_LINE.search(line) else _SAFE_REDIRECT.sub(" ", line.split(" #", 1)[0]))
        )
        if code.lstrip().startswith(("#", "//", "*", "/*")):
            continue
        for pattern, what in _DESTRUCTIVE[language]:
            found = re.search(pattern, code)
            if found:
                return number, found.start() + 1 + (len(found.group(0)) - len(found.group(0).lstrip())), what
    return None


def _from_problem(problem: Problem, severity: Severity, tool: str | None) -> Finding:
    return Finding(problem.path, problem.line, problem.col, severity, problem.message, problem.hint, tool)


_WARNING = re.compile(r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): warning: (?P<message>.*?)(?:\n  hint: (?P<hint>.*))?$", re.S)


def _from_text(text: str, file: str, tool: str) -> Finding:
    """A compiler warning (stored as text in the declaration) as a finding."""
    found = _WARNING.match(text)
    if found is None:
        return Finding(file, 1, 1, "warning", text, None, tool)
    return Finding(found["file"], int(found["line"]), int(found["col"]), "warning", found["message"], found["hint"], tool)


def summary(findings: list[Finding], files: int) -> str:
    """The last line of a check: how many files, errors and warnings."""
    errors = sum(f.severity == "error" for f in findings)
    return f"checked {files} file(s): {errors} error(s), {len(findings) - errors} warning(s)"
