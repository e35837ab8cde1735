"""An agent's tools file: several functions, one declaration each, as the agents' own generators write them.

An agent (``agents/<name>/`` of llm-functions, Loki or Coyote) keeps its functions in one
``tools.sh`` (a ``# @cmd`` per function), ``tools.py`` (its public functions), ``tools.js`` or
``tools.ts`` (its exported functions). :func:`compile_functions` reads such a file statically and returns one
:class:`~toolexec.records.ToolDeclaration` per function, each naming the function it calls
(``ToolDeclaration.function``), with the name, description and parameters byte for byte as the
project's generator writes them:

* ``"llm-functions"``: ``scripts/build-declarations.{sh,py,js}`` (``argc generate-declarations@agent``);
* ``"loki"``: Loki's and Coyote's built-in parsers (``src/parsers/{bash,python}.rs``);
* ``tools.ts`` in either layout: Coyote's ``src/parsers/typescript.rs`` (the one project with TypeScript agents).

Deliberate differences, each documented in ``docs/coming-from-loki.md``: functions that are not
declared (``_``-prefixed, no description) are named in a warning instead of dropped silently;
``_instructions`` is never offered as a tool; an array option's choices go in ``items``; Python's
``async def`` and lowercase ``list[str]`` are read; only top-level Python functions are functions.
"""

from __future__ import annotations

import re
from importlib import import_module
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Literal

from toolexec.errors import CompileError, Problem

if TYPE_CHECKING:
    from toolexec.records import ToolDeclaration

Dialect = Literal["llm-functions", "loki"]
DIALECTS: tuple[Dialect, ...] = ("llm-functions", "loki")
# The function an agent runs for its dynamic instructions; never offered as a tool.
INSTRUCTIONS = "_instructions"
_MODULES = {
    ".sh": "agent_bash",
    ".py": "agent_python",
    ".js": "agent_javascript",
    ".mjs": "agent_javascript",
    ".cjs": "agent_javascript",
    ".ts": "agent_typescript",
}

__all__ = [
    "DIALECTS",
    "INSTRUCTIONS",
    "Dialect",
    "compile_file_functions",
    "compile_functions",
    "dialect_of",
    "several_functions",
]


def compile_functions(source: str, path: str, dialect: Dialect, *, private: bool = False) -> list[ToolDeclaration]:
    """One declaration per function of an agent's tools file, in source order.

    ``private=True`` returns ``_instructions`` too (the agent's dynamic instructions), which a
    model is never offered. CompileError holds every problem in the file; a file that declares
    no function at all is one.
    """
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}")
    suffix = PurePath(path).suffix
    module_name = _MODULES.get(suffix)
    if module_name is None:
        hint = "write the agent's functions in tools.sh, tools.py, tools.js or tools.ts"
        raise CompileError(path, [Problem(path, 1, 1, f"{suffix or 'this file'} is not an agent tools file", hint)])
    module = import_module(f"toolexec.compilers.{module_name}")
    try:
        declarations: list[ToolDeclaration] = module.compile_functions(source, path, dialect)
    except CompileError:
        raise
    except RecursionError:
        raise CompileError(path, [Problem(path, 1, 1, "the file is nested too deeply to be read")]) from None
    public = [d for d in declarations if d.function != INSTRUCTIONS]
    if not public:
        problem = Problem(
            path,
            1,
            1,
            "this agent tools file declares no function a model can call",
            _NOTHING_HINTS.get(suffix, "declare at least one function"),
        )
        raise CompileError(path, [problem])
    return declarations if private else public


_NOTHING_HINTS = {
    ".sh": "give each function a '# @cmd Description' line right above it (names starting with '_' are private)",
    ".py": "give each public function (a name not starting with '_') a docstring",
    ".js": "give each exported function a /** Description */ JSDoc block right above it",
    ".ts": "export each function as 'export function NAME(...)' with a /** Description */ block right above it",
}


def compile_file_functions(path: str | Path, dialect: Dialect) -> list[ToolDeclaration]:
    """:func:`compile_functions` of the file at ``path`` (read as :func:`toolexec.compilers.compile_file` reads)."""
    try:
        with open(path, "rb") as handle:
            source = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CompileError(str(path), [Problem(str(path), 1, 1, f"cannot read the file: {exc}")]) from None
    return compile_functions(source, str(path), dialect)


def dialect_of(path: str | Path) -> Dialect | None:
    """The dialect of an agent's tools file (``agents/<a>/tools.*`` beside an ``index.yaml`` or a ``config.yaml``), else None."""
    path = Path(path)
    if path.stem != "tools" or path.suffix not in _MODULES:
        return None
    if (path.parent / "index.yaml").is_file():
        return "llm-functions"
    if (path.parent / "config.yaml").is_file():
        return "loki"
    return None


_SEVERAL = {
    ".sh": re.compile(r"^\s*#\s*@cmd\b.*\n(?:\s*#.*\n|\s*\n)*\s*(?:function\s+)?([A-Za-z0-9_.:-]+)\s*\(\)", re.MULTILINE),
    ".py": re.compile(r"^(?:async\s+)?def\s+([A-Za-z][A-Za-z0-9_]*)\s*\(", re.MULTILINE),
    ".js": re.compile(r"^(?:export\s+(?:async\s+)?function\*?\s+|exports\.)([A-Za-z][A-Za-z0-9_]*)", re.MULTILINE),
}


def several_functions(source: str, path: str) -> Problem | None:
    """Why a file toolexec would read as one tool is an agent's tools file of several functions, or None.

    A Bash script with ``# @cmd`` functions, a Python file of public functions without ``run``, a
    JavaScript/TypeScript module exporting functions but no ``run``: each is what llm-functions,
    Loki and Coyote keep in ``agents/<name>/tools.*``, and compiling it as one tool would declare
    none of its functions (or a tool that runs none of them).
    """
    suffix = PurePath(path).suffix
    pattern = _SEVERAL.get(".js" if suffix in (".ts", ".mjs", ".cjs") else suffix)
    if pattern is None:
        return None
    names = [n for n in dict.fromkeys(pattern.findall(source)) if not n.startswith("_")]
    if not names or (suffix != ".sh" and "run" in names):
        return None
    if suffix != ".sh" and len(names) < 2 and PurePath(path).stem != "tools":
        return None  # one function misnamed (def main): the language's own "no run" error says it best
    shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
    plural = "s" if len(names) > 1 else ""
    what = f"argc command{plural} (# @cmd)" if suffix == ".sh" else f"function{plural} and no 'run'"
    return Problem(
        path,
        1,
        1,
        f"this file holds {len(names)} {what} ({shown}), as an agent's tools file does: as one tool it would run none of them",
        f"put it at agents/NAME/tools{suffix} beside an index.yaml (llm-functions) or config.yaml (Loki) and use "
        "toolexec --agent NAME list; or keep one function named run (a 'main' for Bash)",
    )
