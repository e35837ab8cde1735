"""An agent's ``tools.py``: one declaration per public top-level function, as the agents' generators read it.

Read with Python's own parser (:mod:`ast`, never run), because both generators are defined by
what it yields: llm-functions' ``build-declarations.py`` takes ``ast.get_docstring`` (the
docstring's text before ``Args:``) and ``node.args.args`` with ``str``/``int``/``float``/``bool``/
``List[str]``/``Literal[…]``/``Optional[…]`` hints (every property has a ``description``, even an
empty one; a default does not make a parameter optional); Loki's ``parsers/python.rs`` takes the
whole docstring as written, every kind of parameter, ``list[…]`` item types, and makes a
parameter with a default optional.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any

from toolexec.compilers.common import Diagnostics, with_warnings
from toolexec.compilers.shebang import read_shebang
from toolexec.records import Kwargs, ToolDeclaration, name_problem

if TYPE_CHECKING:
    from toolexec.compilers.agent import Dialect

Function = ast.FunctionDef | ast.AsyncFunctionDef


def compile_functions(source: str, path: str, dialect: Dialect) -> list[ToolDeclaration]:
    """The public functions of ``source`` (see the module docstring); CompileError lists every problem."""
    diag = Diagnostics(path)
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        diag.error(
            ((exc.lineno or 1) - 1, max((exc.offset or 1) - 1, 0)), f"syntax error: {exc.msg}", "fix the syntax so the file runs"
        )
        diag.raise_if_any()
        raise AssertionError("unreachable") from None
    declarations = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        at = (node.lineno - 1, node.col_offset)
        if node.name.startswith("_") and node.name != "_instructions":
            continue
        build = _loki if dialect == "loki" else _llm_functions
        instructions = ("_instructions", _raw_docstring(node).strip(), {"type": "object", "properties": {}})
        declared = instructions if node.name == "_instructions" else build(node, diag, at)
        if declared is None:
            continue
        name, description, parameters = declared
        problem = name_problem(name) if node.name != "_instructions" else None
        if problem is not None:
            diag.error(at, problem, "rename the function")
            continue
        declarations.append(
            ToolDeclaration(
                name=name,
                description=description,
                parameters=parameters,
                source=path,
                language="python",
                invocation=Kwargs(),
                shebang=read_shebang(source),
                function=node.name,
            )
        )
    diag.raise_if_any()
    return with_warnings(declarations, diag)


# --- llm-functions: scripts/build-declarations.py ---------------------------------------------


def _llm_functions(node: Function, diag: Diagnostics, at: tuple[int, int]) -> tuple[str, str, dict[str, Any]] | None:
    description, documented = _llm_docstring(ast.get_docstring(node) or "")
    if not description:
        diag.warn(at, f"function {node.name!r} has no docstring description: not declared (as llm-functions' generator)")
        return None
    properties: dict[str, Any] = {}
    required = []
    for arg in node.args.args:
        hint = _llm_type(arg.annotation)
        doc_type, text = documented.get(arg.arg, ("", ""))
        kind = hint or doc_type
        optional = kind.endswith("?")
        kind = kind.removesuffix("?")
        schema = _llm_property(kind, text)
        if schema is None:
            diag.error(
                (arg.lineno - 1, arg.col_offset),
                f"parameter {arg.arg!r} of function {node.name!r} has a type llm-functions cannot declare ({kind!r})",
                "use str, int, float, bool, List[str], Literal['a', 'b'] or Optional[...] of those",
            )
            continue
        properties[arg.arg] = schema
        if not optional:
            required.append(arg.arg)
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return node.name, description, parameters


def _llm_docstring(docstring: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """(description, {parameter: (type, text)}) as ``parse_docstring`` reads them."""
    description, raw, in_args = "", [], False
    for line in docstring.splitlines():
        if not in_args:
            if line.startswith("Args:"):
                in_args = True
            else:
                description += f"\n{line}"
            continue
        if re.search(r"^\s+", line):
            raw.append(line.strip())
        else:
            break
    params = {}
    for item in raw:
        name, text, doc_type = item, "", ""
        if ":" in item:
            name, text = (part.strip() for part in item.split(":", 1))
        if " " in name:
            name, doc_type = name.split(" ", 1)
            doc_type = doc_type.strip()
        if doc_type.startswith("(") and doc_type.endswith(")"):
            doc_type = doc_type[1:-1]
        parts = [part.strip() for part in doc_type.split(",")]
        params[name] = (parts[0] + ("?" if "optional" in parts[1:] else ""), text)
    return description.strip(), params


def _llm_type(annotation: ast.expr | None) -> str:
    """``get_arg_type``: a hint as llm-functions' generator names it ('' for none, 'any' for the unknown)."""
    if annotation is None:
        return ""
    if isinstance(annotation, ast.Name):
        return annotation.id
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        kind = annotation.value.id
        if kind in ("List", "list"):  # deliberate: lowercase list[str] too (llm-functions refuses it)
            return f"list[{_llm_type(annotation.slice)}]"
        if kind == "Literal":
            members = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            return "|".join(ast.unparse(member) for member in members)
        if kind == "Optional":
            return f"{_llm_type(annotation.slice)}?"
    return "any"


def _llm_property(kind: str, description: str) -> dict[str, Any] | None:
    if "|" in kind:
        schema: dict[str, Any] = {"type": "string", "enum": kind.replace("'", "").split("|")}
    elif kind in _LLM_TYPES:
        schema = dict(_LLM_TYPES[kind])
    else:
        return None
    schema["description"] = description
    return schema


_LLM_TYPES: dict[str, dict[str, Any]] = {
    "bool": {"type": "boolean"},
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "list[str]": {"type": "array", "items": {"type": "string"}},
    "": {"type": "string"},
}


# --- Loki and Coyote: src/parsers/python.rs ----------------------------------------------------


def _loki(node: Function, diag: Diagnostics, at: tuple[int, int]) -> tuple[str, str, dict[str, Any]] | None:
    if isinstance(node, ast.AsyncFunctionDef):
        diag.warn(at, f"function {node.name!r} is async, which Loki does not declare; toolexec declares it and awaits it")
    docstring = _raw_docstring(node)
    description = docstring.strip()
    if not description:
        diag.error(at, f"function {node.name!r} has no docstring (Loki refuses it too)", "start the function with a docstring")
        return None
    documented = _loki_docstring(docstring)
    properties: dict[str, Any] = {}
    required: list[str] = []
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params: list[tuple[ast.arg, str, bool]] = [
        (a, _loki_type(a.annotation), d is None) for a, d in zip(positional, defaults, strict=True)
    ]
    params += [(a, _loki_type(a.annotation), d is None) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.vararg is not None:
        inner = _loki_type(args.vararg.annotation)
        params.append((args.vararg, f"list[{inner}]" if inner else "list[str]", False))
    if args.kwarg is not None:
        params.append((args.kwarg, "object", False))
    for arg, hint, no_default in params:
        optional = hint.endswith("?")
        hint = hint.removesuffix("?")
        doc_type, text = documented.get(arg.arg, ("", ""))
        if doc_type.endswith("?"):
            optional = True
        schema: dict[str, Any] = {}
        kind = hint or doc_type or "str"
        loki_apply(kind, schema, text)
        key = arg.arg.replace("-", "_")
        properties[key] = schema
        if no_default and not optional:
            required.append(key)
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return loki_name(node.name), description, parameters


def _raw_docstring(node: Function) -> str:
    """The docstring exactly as written (Loki does not dedent it), or ''."""
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.value.value
    return ""


def _loki_docstring(docstring: str) -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    in_args = False
    for line in docstring.splitlines():
        if not in_args:
            in_args = line.lstrip().startswith("Args:")
            continue
        if not line.startswith((" ", "\t")):
            break
        left, colon, text = line.strip().partition(":")
        if not colon:
            continue
        left = left.strip()
        name, kind = left, ""
        if " " in left:
            name, kind = (part.strip() for part in left.split(" ", 1))
            if kind.startswith("(") and kind.endswith(")"):
                inner = kind[1:-1]
                if "optional" in inner.lower() and not inner.endswith("?"):
                    inner += "?"
                kind = inner
        found[name] = (kind, text.strip())
    return found


def _loki_type(annotation: ast.expr | None) -> str:
    if annotation is None:
        return ""
    if isinstance(annotation, ast.Name):
        return annotation.id
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        kind = annotation.value.id
        if kind == "Optional":
            return f"{_loki_type(annotation.slice)}?"
        if kind == "List":
            return f"list[{_loki_type(annotation.slice)}]"
        if kind == "Literal":
            members = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            return "literal:" + "|".join(_literal_text(m) for m in members)
    return "any"


def _literal_text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            return "true" if value else "false"
        if value is None:
            return "None"
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return str(value)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal_text(node.operand)
        return f"-{inner}" if re.fullmatch(r"[0-9.eE+-]+", inner) else "any"
    return "any"


def loki_apply(kind: str, schema: dict[str, Any], description: str) -> None:
    """``apply_type_to_schema``, with the description in serde's field order (type, description, items, enum)."""
    kind = kind.rstrip("?")
    if kind.startswith("list["):
        item: dict[str, Any] = {}
        loki_apply(kind[len("list[") :].rstrip("]"), item, "")
        schema.update({"type": "array", **({"description": description} if description else {}), "items": item})
        return
    if kind.startswith("literal:"):
        values = [v.strip().strip('"').strip("'") for v in kind[len("literal:") :].split("|")]
        schema.update({"type": "string", **({"description": description} if description else {}), "enum": values})
        return
    schema["type"] = {"bool": "boolean", "int": "integer", "float": "number"}.get(kind, "string")
    if description:
        schema["description"] = description


def loki_name(name: str) -> str:
    """``underscore``: lower-case ASCII letters and digits, every other run of characters one '_'."""
    mapped = "".join(c.lower() if c.isascii() and c.isalnum() else "_" for c in name)
    return "_".join(part for part in mapped.split("_") if part)
