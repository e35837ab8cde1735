"""Compilers: script source in, :class:`~toolexec.records.ToolDeclaration` out.

Each language module exposes ``compile_source(source, path)``: pure, static
(tree-sitter), and raising :class:`~toolexec.errors.CompileError` with every
problem in the file. :func:`compile_file` is the only function here that reads disk.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from toolexec.errors import CompileError, Problem
from toolexec.records import Language, ToolDeclaration

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
    if language is None:
        known = ", ".join(SUFFIXES)
        raise CompileError(path, [Problem(path, 1, 1, "not a tool script", f"use one of the extensions {known}")])
    try:
        module = import_module(f"{__name__}.{language}")
    except ModuleNotFoundError:
        raise CompileError(path, [Problem(path, 1, 1, f"{language} tools are not supported yet")]) from None
    return module.compile_source(source, path)


def compile_file(path: str | Path) -> ToolDeclaration:
    """Read and compile one file; an unreadable file is a CompileError naming it."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CompileError(str(path), [Problem(str(path), 1, 1, f"cannot read the file: {exc}")]) from None
    return compile_source(source, str(path))
