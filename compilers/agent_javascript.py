"""An agent's ``tools.js``: one declaration per exported function with a JSDoc block, as llm-functions reads it.

Line by line, as ``scripts/build-declarations.js`` does: a ``/** … */`` block followed (blank
lines aside) by ``export (async) function NAME`` or ``exports.NAME = (async) function`` declares
NAME; the block's text before its first ``@tag`` is the description, each ``@property {type}
name text`` (``[name]`` optional) a parameter of type ``string`` / ``boolean`` / ``integer`` /
``number`` / ``string[]`` or an ``'a'|'b'`` enum, always with a ``description``. The function
is called with the arguments object. Loki has no JavaScript generator; Coyote's reads TypeScript.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from toolexec.compilers.common import Diagnostics, with_warnings
from toolexec.compilers.shebang import read_shebang
from toolexec.records import ObjectArgument, ToolDeclaration, name_problem

if TYPE_CHECKING:
    from toolexec.compilers.agent import Dialect

_EXPORT = re.compile(r"^export (async )?function ([A-Za-z0-9_]+)")
_EXPORTS = re.compile(r"^exports\.([A-Za-z0-9_]+) = (async )?function ")
_PARAM = re.compile(r"^{([^}]+)} +(\S+)( *- +| +)?")
_TYPES: dict[str, dict[str, Any]] = {
    "boolean": {"type": "boolean"},
    "string": {"type": "string"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "string[]": {"type": "array", "items": {"type": "string"}},
}


def compile_functions(source: str, path: str, dialect: Dialect) -> list[ToolDeclaration]:
    """The documented exported functions of ``source`` (see the module docstring)."""
    diag = Diagnostics(path)
    declarations = []
    for row, function, jsdoc in _functions(source):
        at = (row, 0)
        if function.startswith("_") and function != "_instructions":
            continue
        description, raw = _jsdoc(jsdoc)
        if not description and function != "_instructions":
            diag.warn(at, f"function {function!r} has no JSDoc description: not declared (as llm-functions' generator)")
            continue
        properties: dict[str, Any] = {}
        required = []
        for text in raw:
            match = _PARAM.match(text)
            kind = match.group(1).lower() if match else ""
            schema = _property(kind, _PARAM.sub("", text, count=1)) if match else None
            if match is None or schema is None:
                diag.error(
                    at,
                    f"function {function!r}: cannot read '@property {text.splitlines()[0]}'",
                    "write @property {string|boolean|integer|number|string[]|'a'|'b'} name - what it is",
                )
                continue
            name = match.group(2)
            optional = name.startswith("[") and name.endswith("]")
            name = name[1:-1] if optional else name
            properties[name] = schema
            if not optional:
                required.append(name)
        problem = name_problem(function)
        if problem is not None:
            diag.error(at, problem, "rename the function")
            continue
        parameters: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        declarations.append(
            ToolDeclaration(
                name=function,
                description=description,
                parameters=parameters,
                source=path,
                language="javascript",
                invocation=ObjectArgument(),
                shebang=read_shebang(source),
                function=function,
            )
        )
    diag.raise_if_any()
    return with_warnings(declarations, diag)


def _functions(source: str) -> list[tuple[int, str, str]]:
    """(row, name, its JSDoc) of each exported function that follows a ``/** … */`` block (``extractFunctions``)."""
    found = []
    in_comment, jsdoc, pending = False, "", ""
    for row, line in enumerate(source.split("\n")):
        if re.match(r"^\s*/\*", line):
            in_comment = True
            pending += f"\n{line}"
        elif re.match(r"^\s*\*/", line):
            in_comment = False
            jsdoc, pending = pending + f"\n{line}", ""
        elif in_comment:
            pending += f"\n{line}"
        elif line.strip():
            match = _EXPORT.match(line)
            name = match.group(2) if match else None
            if name is None and (match := _EXPORTS.match(line)):
                name = match.group(1)
            if name is not None and (jsdoc or name == "_instructions"):  # dynamic instructions need no JSDoc
                found.append((row, name, jsdoc))
            jsdoc = ""
    return found


def _jsdoc(jsdoc: str) -> tuple[str, list[str]]:
    """(description, the text of each ``@property``) as ``parseJsDoc`` reads them."""
    description, raw, tag = "", [], ""
    for line in jsdoc.split("\n"):
        line = re.sub(r"^\s*(/\*\*|\*/|\*)", "", line, count=1).strip()
        match = re.match(r"^@(\w+)", line, re.ASCII)
        if match:
            tag = match.group(1)
        if not tag:
            description += f"\n{line}"
        elif tag == "property":
            if match:
                raw.append(line[len(tag) + 1 :].strip())
            elif raw:
                raw[-1] += f"\n{line}"
    return description.strip(), raw


def _property(kind: str, description: str) -> dict[str, Any] | None:
    if "|" in kind:
        schema: dict[str, Any] = {"type": "string", "enum": kind.replace("'", "").split("|")}
    elif kind in _TYPES:
        schema = {**_TYPES[kind], "items": dict(_TYPES[kind]["items"])} if "items" in _TYPES[kind] else dict(_TYPES[kind])
    else:
        return None
    schema["description"] = description
    return schema
