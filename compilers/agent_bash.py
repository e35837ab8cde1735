"""An agent's ``tools.sh``: one declaration per ``# @cmd`` function, as ``argc --argc-export`` reads it.

The script's own tags (``@describe``, ``@env``, ``@meta``) apply to every function; each
``# @cmd text`` starts a function's block (its description, then its own ``@option``, ``@flag``
and ``@env`` lines), which the next function definition closes and names. The declaration is
what llm-functions' ``build-declarations.sh`` and Loki's ``parsers/bash.rs`` make of argc's
reading: ``boolean`` for a flag, an ``array`` of strings for a repeatable option, ``integer`` /
``number`` for a first notation ``INT`` / ``NUM``, else ``string``; a description when there is
one, an ``enum`` for literal choices; ``required`` always written. ``@arg`` positionals are not
declared by either generator (a warning says so).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolexec.compilers.bash import BUILD_MARKER, _bash_shebang, _Reading
from toolexec.compilers.common import Diagnostics, check_name, parser, syntax_errors, text, with_warnings
from toolexec.records import Argc, ToolDeclaration

if TYPE_CHECKING:
    from tree_sitter import Node

    from toolexec.compilers.agent import Dialect
    from toolexec.compilers.argc import Param


def compile_functions(source: str, path: str, dialect: Dialect) -> list[ToolDeclaration]:
    """The ``@cmd`` functions of ``source`` (see the module docstring); CompileError lists every problem."""
    diag = Diagnostics(path)
    if "\r\n" in source:
        diag.error(
            (source[: source.index("\r\n")].count("\n"), 0),
            "the file has Windows (CRLF) line endings",
            f"convert it: dos2unix {path}",
        )
        diag.raise_if_any()
    root = parser("bash").parse(source.encode("utf-8")).root_node
    syntax_errors(root, diag)
    script = _Reading(diag)
    commands: list[tuple[_Reading, int, Node]] = []  # (its tags, the @cmd row, its function definition)
    current: _Reading | None = None
    current_row = 0
    built = False
    for node in root.named_children:
        if node.type == "comment" and text(node)[1:].rstrip() == BUILD_MARKER:
            built = True
            continue
        tag = _tag(node)
        if tag is not None and tag[0] == "cmd":
            current, current_row = _Reading(diag), node.start_point[0]
            current.tag("describe", tag[1], current_row, 0, 0)  # the @cmd text is the function's description
            current.previous_row = current_row
            continue
        if current is not None and node.type == "function_definition":
            commands.append((current, current_row, node))
            current = None
            continue
        (current or script).node(node)
    shebang = _bash_shebang(source)
    named = {text(c.child_by_field_name("name")) for _, _, c in commands}
    for node in root.named_children:  # dynamic instructions may be a plain function, without @cmd
        if (
            node.type == "function_definition"
            and text(node.child_by_field_name("name")) == "_instructions"
            and "_instructions" not in named
        ):
            commands.append((_Reading(diag), node.start_point[0], node))
    declarations = []
    for reading, row, definition in commands:
        function = text(definition.child_by_field_name("name"))
        _finish_helps(reading)
        described = "\n".join(reading.description).strip()
        if function.startswith("_") and function != "_instructions":
            continue
        if not described and function != "_instructions":
            if dialect == "loki":
                diag.error(
                    (row, 0), f"function {function!r} has no description (Loki refuses it too)", "write # @cmd What it does"
                )
            else:
                diag.warn((row, 0), f"function {function!r} has no description: not declared (as llm-functions' generator)")
            continue
        name = function.replace("-", "_")
        if not check_name(name, diag, definition):
            continue
        for duplicate, at in reading.duplicates:
            diag.error(
                at,
                f"parameter {duplicate!r} of function {function!r} is declared twice",
                "give each @option and @flag its own name",
            )
        declared = [p for p in reading.params if p.kind != "arg"]
        for param in reading.params:
            if param.kind == "arg":
                diag.warn(
                    reading.positions.get(param.name),
                    f"@arg {param.long or param.name} of function {function!r} is not declared (neither llm-functions nor Loki "
                    "declares positionals)",
                    "make it an @option",
                )
        properties = {p.name: _schema(p, dialect) for p in declared}
        required = [p.name for p in declared if p.required]
        declarations.append(
            ToolDeclaration(
                name=name,
                description=described,
                parameters={"type": "object", "properties": properties, "required": required},
                source=path,
                language="bash",
                invocation=Argc(
                    params=tuple(p.invocation() for p in declared),
                    env=tuple(e.invocation() for e in [*script.envs, *reading.envs]),
                    require_tools=tuple([*script.meta["require_tools"], *reading.meta["require_tools"]]),
                    dotenv=reading.meta["dotenv"] or script.meta["dotenv"],
                    built=built,
                ),
                shebang=shebang,
                function=function,
            )
        )
    _finish_helps(script)
    diag.raise_if_any()
    return with_warnings(declarations, diag)


def _tag(node: Node) -> tuple[str, str] | None:
    """(tag, rest) of a ``# @tag rest`` comment line, else None."""
    if node.type != "comment":
        return None
    line = text(node)[1:].strip()
    if not line.startswith("@"):
        return None
    tag, _, rest = line[1:].partition(" ")
    return tag.strip(), rest.strip()


def _finish_helps(reading: _Reading) -> None:
    """Join each parameter's continued help lines, as argc does."""
    for item, lines in reading.helps:
        item.help = "\n".join(lines).strip()


def _schema(param: Param, dialect: Dialect) -> dict[str, Any]:
    """One property, with its keys in the order the dialect's generator writes them."""
    notation = (param.notation or param.long.upper()) if param.kind == "option" else None
    if param.kind == "flag":
        kind: dict[str, Any] = {"type": "boolean"}
    elif param.multi:
        kind = {"type": "array", "items": {"type": "string"}}
    else:
        kind = {"type": {"INT": "integer", "NUM": "number"}.get(notation or "", "string")}
    description = {"description": param.help} if param.help else {}
    choices = list(param.choices or [])
    if choices and "items" in kind:  # deliberate: an enum beside "type": "array" would refuse every array
        kind["items"]["enum"] = choices
        choices = []
    enum = {"enum": choices} if choices else {}
    if dialect == "loki":  # serde's field order: type, description, items, enum
        items = {"items": kind.pop("items")} if "items" in kind else {}
        return {**kind, **description, **items, **enum}
    return {**kind, **description, **enum}  # jq's: type, items, description, enum
