"""An agent's ``tools.ts``: one declaration per exported function, as Coyote's TypeScript parser reads it.

Coyote (Loki's fork) is the one project with TypeScript agents; its ``src/parsers/typescript.rs``
(tree-sitter, the same grammar toolexec reads) defines the declarations, and toolexec follows it:

* each top-level ``export (async) function NAME(...)`` is a function (``_``-prefixed ones are
  private, ``_instructions`` the agent's dynamic instructions); its name is Loki's ``underscore``
  of NAME;
* the description is the text of the ``/** … */`` block right above it, up to its first ``@`` tag
  (a function without one is an error, as there);
* parameters come from the signature: ``string`` → string, ``number`` → number, ``boolean`` →
  boolean, ``T[]`` / ``Array<T>`` → array, a union of string literals → an enum, ``T | null`` /
  ``T | undefined`` / ``x?: T`` optional, a default value optional; every other type (a type
  name, an object type, ``any``) is a string, and so is a parameter without a type, as there.
  ``@param name - text`` gives a parameter its description. Rest and destructured parameters
  are errors.

The function is called with its parameters in signature order, as Coyote's ``run-agent.ts``
spreads them. Deliberate difference (``docs/coming-from-loki.md``): a function exported in
another form (``export const f = () => …``), which Coyote skips silently, is named in a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolexec.compilers.agent_python import loki_apply, loki_name
from toolexec.compilers.common import Diagnostics, parser, syntax_errors, text, with_warnings
from toolexec.compilers.shebang import read_shebang
from toolexec.records import Positional, ToolDeclaration, name_problem

if TYPE_CHECKING:
    from tree_sitter import Node

    from toolexec.compilers.agent import Dialect

_PLAIN = {"string": "str", "number": "float", "boolean": "bool"}
_FLAT_HINT = "use flat parameters instead (e.g. 'a: string, b: string')"


def compile_functions(source: str, path: str, dialect: Dialect) -> list[ToolDeclaration]:
    """The exported functions of ``source`` (see the module docstring); CompileError lists every problem."""
    del dialect  # one set of rules: Coyote's (llm-functions has no TypeScript agents)
    diag = Diagnostics(path)
    root = parser("typescript").parse(source.encode("utf-8")).root_node
    syntax_errors(root, diag)
    diag.raise_if_any()
    declarations = []
    for statement in root.named_children:
        if statement.type != "export_statement":
            continue
        function = _exported_function(statement)
        if function is None:
            _warn_other_forms(statement, diag)
            continue
        name = text(function.child_by_field_name("name"))
        if name.startswith("_") and name != "_instructions":
            continue
        description = _description(statement)
        if not description and name != "_instructions":
            diag.error(
                function,
                f"function {name!r} has no description (Coyote refuses it too)",
                "write /** What it does */ right above it",
            )
            continue
        read = _parameters(function, statement, diag)
        if read is None:
            continue
        parameters, order = read
        tool_name = name if name == "_instructions" else loki_name(name)
        problem = name_problem(tool_name) if name != "_instructions" else None
        if problem is not None:
            diag.error(function, problem, "rename the function")
            continue
        declarations.append(
            ToolDeclaration(
                name=tool_name,
                description=description,
                parameters=parameters,
                source=path,
                language="typescript",
                invocation=Positional(order=tuple(order)),
                shebang=read_shebang(source),
                function=name,
            )
        )
    diag.raise_if_any()
    return with_warnings(declarations, diag)


def _exported_function(statement: Node) -> Node | None:
    declaration = statement.child_by_field_name("declaration")
    if declaration is not None and declaration.type == "function_declaration":
        return declaration
    return next((child for child in statement.named_children if child.type == "function_declaration"), None)


def _warn_other_forms(statement: Node, diag: Diagnostics) -> None:
    """Name a function exported as a value (``export const f = () => …``): Coyote skips it without a word."""
    declaration = statement.child_by_field_name("declaration")
    if declaration is None or declaration.type not in ("lexical_declaration", "variable_declaration"):
        return
    for declarator in declaration.named_children:
        value = declarator.child_by_field_name("value")
        if value is not None and value.type in ("arrow_function", "function_expression", "function"):
            name = text(declarator.child_by_field_name("name"))
            diag.warn(
                declarator,
                f"{name!r} is exported as a value, not as 'export function': not declared (as Coyote)",
                f"write it as: export function {name}(...)",
            )


def _jsdoc(statement: Node, function: Node) -> str:
    """The ``/** … */`` comment right before the export (``jsdoc_text``), or ''."""
    before = statement.prev_named_sibling or function.prev_named_sibling
    if before is None or before.type != "comment":
        return ""
    comment = text(before)
    return comment if comment.lstrip().startswith("/**") else ""


def _lines(comment: str) -> list[str]:
    """``clean_jsdoc_lines``: the comment without its delimiters, each line without its leading ``*``."""
    trimmed = comment.strip()
    inner = trimmed.removeprefix("/**")
    inner = inner.removesuffix("*/") if inner.endswith("*/") else trimmed
    return [line.strip().removeprefix("*").lstrip() for line in inner.splitlines()]


def _description(statement: Node) -> str:
    function = _exported_function(statement)
    assert function is not None
    lines = []
    for line in _lines(_jsdoc(statement, function)):
        if line.startswith("@"):
            break
        lines.append(line)
    return "\n".join(lines).strip()


def _param_docs(comment: str) -> dict[str, str]:
    """``parse_jsdoc_params``: each ``@param {type} name - text`` line's text, by name (one line each)."""
    found: dict[str, str] = {}
    for line in _lines(comment):
        if not line.startswith("@param"):
            continue
        rest = line[len("@param") :].strip()
        if rest.startswith("{") and "}" in rest:
            rest = rest[rest.index("}") + 1 :].lstrip()
        if not rest:
            continue
        split = next((i for i, c in enumerate(rest) if c.isspace()), len(rest))
        name, described = rest[:split].strip().removesuffix("?"), rest[split:].strip()
        if name:
            found[name] = described.removeprefix("-").lstrip()
    return found


def _parameters(function: Node, statement: Node, diag: Diagnostics) -> tuple[dict[str, Any], list[str]] | None:
    """The parameters' schema (``build_parameters_schema``) and their order, or None after an error."""
    documented = _param_docs(_jsdoc(statement, function))
    properties: dict[str, Any] = {}
    required: list[str] = []
    order: list[str] = []
    node = function.child_by_field_name("parameters")
    for param in node.named_children if node is not None else []:
        if param.type == "comment":
            continue
        pattern = param.child_by_field_name("pattern")
        if param.type not in ("required_parameter", "optional_parameter") or pattern is None:
            diag.error(param, f"unsupported parameter {text(param)!r}", _FLAT_HINT)
            return None
        if pattern.type != "identifier":
            kind = "rest parameters (...)" if pattern.type == "rest_pattern" else "destructured parameters"
            diag.error(param, f"{kind} are not supported in agent functions (Coyote refuses them too)", _FLAT_HINT)
            return None
        name = text(pattern)
        hint = _type(param.child_by_field_name("type"))
        optional = param.type == "optional_parameter" or param.child_by_field_name("value") is not None
        if hint.endswith("?"):
            hint, optional = hint[:-1], True
        schema: dict[str, Any] = {}
        loki_apply(hint or "str", schema, documented.get(name, ""))
        properties[name] = schema
        order.append(name)
        if not optional:
            required.append(name)
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return parameters, order


def _type(annotation: Node | None) -> str:
    """``get_arg_type``: the type hint in Loki's vocabulary (``str``, ``list[…]``, ``literal:…``, a ``?`` for optional)."""
    if annotation is None:
        return ""
    kind = annotation.type
    if kind in ("type_annotation", "parenthesized_type"):
        return _type(annotation.named_children[0] if annotation.named_children else None)
    if kind == "predefined_type":
        return _PLAIN.get(text(annotation), "any")
    if kind == "generic_type":
        arguments = annotation.child_by_field_name("type_arguments")
        inner = arguments.named_children[0] if arguments is not None and arguments.named_children else None
        return f"list[{_type(inner)}]" if text(annotation.child_by_field_name("name")) == "Array" else "any"
    if kind == "array_type":
        return f"list[{_type(annotation.named_children[0] if annotation.named_children else None)}]"
    if kind == "union_type":
        return _union(annotation)
    if kind == "literal_type":
        inner = annotation.named_children[0] if annotation.named_children else None
        if inner is not None and inner.type in ("string", "number", "true", "false", "unary_expression"):
            return f"literal:{text(inner).strip()}"
    return "any"


def _members(node: Node) -> list[Node]:
    if node.type != "union_type":
        return [node]
    return [member for child in node.named_children for member in _members(child)]


def _union(node: Node) -> str:
    members = _members(node)
    nullish = [m for m in members if _is_nullish(m)]
    strings = [
        m.named_children[0]
        for m in members
        if m.type == "literal_type" and m.named_children and m.named_children[0].type == "string"
    ]
    if members and len(strings) == len(members):
        return "literal:" + "|".join(text(s) for s in strings)
    first = next((_type(m) for m in members if not _is_nullish(m)), "any")
    return f"{first}?" if nullish and not first.endswith("?") else first


def _is_nullish(node: Node) -> bool:
    if node.type == "literal_type":
        return bool(node.named_children) and node.named_children[0].type in ("null", "undefined")
    return node.type == "predefined_type" and text(node) in ("undefined", "void")
