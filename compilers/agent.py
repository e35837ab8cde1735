"""An agent's tools file: several functions, one declaration each, as the agents' own generators write them.

An agent (``agents/<name>/`` of llm-functions, Loki or Coyote) keeps its functions in one
``tools.sh`` (a ``# @cmd`` per function), ``tools.py`` (its public functions) or ``tools.js``
(its exported functions). :func:`compile_functions` reads such a file statically and returns one
:class:`~toolexec.records.ToolDeclaration` per function, each naming the function it calls
(``ToolDeclaration.function``), with the name, description and parameters byte for byte as the
project's generator writes them:

* ``"llm-functions"``: ``scripts/build-declarations.{sh,py,js}`` (``argc generate-declarations@agent``);
* ``"loki"``: Loki's and Coyote's built-in parsers (``src/parsers/{bash,python}.rs``).

Deliberate differences, each documented in ``docs/coming-from-loki.md``: functions that are not
declared (``_``-prefixed, no description) are named in a warning instead of dropped silently;
``_instructions`` is never offered as a tool; an array option's choices go in ``items``; Python's
``async def`` and lowercase ``list[str]`` are read; only top-level Python functions are functions.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import PurePath
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
}

__all__ = ["DIALECTS", "INSTRUCTIONS", "Dialect", "compile_functions"]


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
        hint = "write the agent's functions in tools.sh, tools.py or tools.js"
        what = (
            "TypeScript agent tools files are not supported yet"
            if suffix == ".ts"
            else f"{suffix or 'this file'} is not an agent tools file"
        )
        raise CompileError(path, [Problem(path, 1, 1, what, hint)])
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
}
