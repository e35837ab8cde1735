"""Compilers: script source in, :class:`~toolexec.records.ToolDeclaration` out.

Each language module exposes ``compile_source(source, path)``: pure, static
(tree-sitter), and raising :class:`~toolexec.errors.CompileError` with every
problem in the file. :func:`compile_file` is the only function here that reads disk.
"""

from __future__ import annotations

import os
import stat
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from toolexec.compilers.agent import several_functions
from toolexec.errors import CompileError, Problem
from toolexec.records import ToolDeclaration

if TYPE_CHECKING:
    from toolexec.records import Language

SUFFIXES: dict[str, Language] = {
    ".py": "python",
    ".sh": "bash",
    ".ts": "typescript",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
}

__all__ = ["SUFFIXES", "CompileError", "compile_file", "compile_source", "language_of"]


def language_of(path: str | Path) -> Language | None:
    """The language of a tool file, by its extension, or None."""
    return SUFFIXES.get(Path(path).suffix)


def compile_source(source: str, path: str) -> ToolDeclaration:
    """Compile one script's text; ``path`` names it in messages and gives the tool name."""
    language = language_of(path)
    several = None
    if language is None:
        known = ", ".join(SUFFIXES)
        raise CompileError(path, [Problem(path, 1, 1, "not a tool script", f"use one of the extensions {known}")])
    try:
        module = import_module(f"{__name__}.{language}")
        several = _several_functions(source, path)
        if several is not None and language == "bash":  # it would build, as a tool that runs none of its functions
            raise CompileError(path, [several])
        declaration: ToolDeclaration = module.compile_source(source, path)
    except CompileError as error:
        if several is not None and several not in error.problems:  # say first why the file is not one tool
            raise CompileError(path, [several, *error.problems], name=error.name) from None
        raise
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{language}":
            raise CompileError(path, [Problem(path, 1, 1, f"{language} tools are not supported yet")]) from None
        if exc.name is None or not exc.name.startswith("tree_sitter"):
            raise CompileError(path, [_internal(path, exc)]) from None
        package = exc.name.replace("_", "-")
        problem = Problem(
            path, 1, 1, f"{language} tools need the parser package {package}, which is not installed", f"pip install {package}"
        )
        raise CompileError(path, [problem]) from None
    except RecursionError:
        raise CompileError(path, [_too_deep(path)]) from None
    except Exception as exc:  # toolexec's own limit or bug: this file's problem, never the whole build's
        raise CompileError(path, [_internal(path, exc)]) from None
    if _depth(declaration.parameters) > MAX_DEPTH or _depth(declaration.metadata.output_schema) > MAX_DEPTH:
        raise CompileError(path, [_too_deep(path)], name=declaration.name)
    surrogate = _lone_surrogate(declaration.to_dict())
    if surrogate is not None:
        where, char = surrogate
        problem = Problem(
            path,
            1,
            1,
            f"{where} holds a lone surrogate (U+{ord(char):04X}), which is not Unicode text",
            "a \\uD800-\\uDFFF escape must be half of a pair; write the character itself",
        )
        raise CompileError(path, [problem], name=declaration.name)
    return declaration


def _several_functions(source: str, path: str) -> Problem | None:
    """The problem of an agent's multi-function tools file compiled as one tool (see :mod:`toolexec.compilers.agent`)."""
    return several_functions(source, path)


def _internal(path: str, exc: BaseException) -> Problem:
    return Problem(
        path,
        1,
        1,
        f"toolexec cannot compile this file ({type(exc).__name__}: {str(exc)[:200]})",
        "this is a limit or bug of toolexec, not of your tool; simplify the file and report it",
    )


MAX_DEPTH = 100  # levels of a declaration's schemas: deeper ones exhaust the recursion of the encoders and validators


def _too_deep(path: str) -> Problem:
    return Problem(
        path,
        1,
        1,
        f"a type or literal here is nested too deeply: toolexec compiles at most {MAX_DEPTH} levels",
        "flatten it: give an inner part a name (a type alias, a TypedDict or an interface) and refer to that",
    )


def _depth(value: object) -> int:
    """How many objects and arrays deep ``value`` nests, counted iteratively."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _lone_surrogate(value: object) -> tuple[str, str] | None:
    """(where, the character) of the first lone surrogate in a declaration's stored form, or None."""
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            found = next((c for c in item if "\ud800" <= c <= "\udfff"), None)
            if found is not None:
                return where or "the declaration", found
        elif isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
            stack.extend((k, f"a key in {where or 'the declaration'}") for k in item if isinstance(k, str))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
    return None


def compile_file(path: str | Path) -> ToolDeclaration:
    """Compile the script at ``path``: a regular file, read as it is (no newline translation: CRLF is refused)."""
    try:
        # O_NONBLOCK: opening a FIFO must never wait for a writer; it is refused below
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            kind = file_kind(os.fstat(descriptor).st_mode)
            if kind is not None:
                raise CompileError(str(path), [Problem(str(path), 1, 1, f"{kind}, not a tool script", "name a regular file")])
            with os.fdopen(descriptor, "rb", closefd=False) as handle:
                source = handle.read().decode("utf-8")
        finally:
            os.close(descriptor)
    except (OSError, UnicodeDecodeError) as exc:
        raise CompileError(str(path), [Problem(str(path), 1, 1, f"cannot read the file: {exc}")]) from None
    return compile_source(source, str(path))


def file_kind(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO", "a directory", …), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO (named pipe)", stat.S_ISSOCK: "a socket"}
    kinds |= {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device"}
    return next((name for test, name in kinds.items() if test(mode)), "not a regular file")
