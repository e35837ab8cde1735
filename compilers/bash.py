"""Bash tools: argc comment tags (``# @describe``, ``@option``, ``@flag``, ``@arg``, ``@env``, ``@meta``)."""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from tree_sitter import Node

from toolexec.compilers.argc import EnvVar, Param, ParamKind, TagError, parse_env, parse_param
from toolexec.compilers.common import (
    LIMITS,
    Diagnostics,
    finish,
    object_schema,
    parser,
    read_limits,
    syntax_errors,
    text,
    tool_name,
)
from toolexec.compilers.metadata import MetadataReader, near_miss
from toolexec.compilers.shebang import read_shebang
from toolexec.policy import FIELDS as SANDBOX_FIELDS
from toolexec.records import Argc, Limits, ToolDeclaration

_SILENT = {"version", "author", "cmd", "alias"}  # argc tags that mean nothing for a tool
_TYPES = {"INT": "integer", "NUM": "number"}
# The first line of the parser ``argc --argc-build`` writes into a script (Loki and Coyote build theirs).
BUILD_MARKER = " ARGC-BUILD {"


# The variables argc sets at every run (argc__fn is the function to call): a parameter cannot be one.
_ARGC_OWN = ("argc__fn", "argc__args", "argc__positionals")


def compile_source(source: str, path: str) -> ToolDeclaration:
    """Compile a Bash tool's argc comment tags into its declaration (see the module docstring)."""
    diag = Diagnostics(path)
    if "\r\n" in source:
        row = source[: source.index("\r\n")].count("\n")
        diag.error(
            (row, 0),
            "the file has Windows (CRLF) line endings, which bash cannot run",
            f"convert it: dos2unix {path}  (or: sed -i 's/\\r$//' {path})",
        )
        diag.raise_if_any()
    root = parser("bash").parse(source.encode("utf-8")).root_node
    syntax_errors(root, diag)
    name = tool_name(path, diag)
    functions = {text(n.child_by_field_name("name")) for n in root.named_children if n.type == "function_definition"}
    reading = _Reading(diag)
    for node in root.named_children:
        reading.node(node)
    described = reading.check(functions, runs=any(_runs(node) for node in root.named_children))
    for key, at in reading.positions.items():
        diag.place(key, at)
    diag.place("", (reading.described_at, 0) if reading.described_at is not None else None)
    params = reading.params
    properties = {p.name: _schema(p) for p in params}
    required = [p.name for p in params if p.required and p.default is None and p.default_fn is None]
    parameters = object_schema(properties, required)
    return finish(
        diag,
        source=source,
        path=path,
        name=name,
        description=described,
        parameters=parameters,
        metadata=reading.reader.build(parameters, described),
        language="bash",
        invocation=Argc(
            params=tuple(p.invocation() for p in params),
            env=tuple(e.invocation() for e in reading.envs),
            require_tools=tuple(reading.meta["require_tools"]),
            dotenv=reading.meta["dotenv"],
            built=reading.built,
        ),
        limits=Limits(**reading.meta["limits"]),
        shebang=_bash_shebang(source),
    )


class _Reading:
    """The comment tags of one script, read top to bottom, and every problem in them."""

    def __init__(self, diag: Diagnostics) -> None:
        self.diag = diag
        self.description: list[str] = []
        self.described_at: int | None = None
        # The lines a continuation comment is added to: @describe's, or the last @option/@flag/@arg/@env's.
        self.continuing: list[str] | None = None
        self.helps: list[tuple[Param | EnvVar, list[str]]] = []
        self.params: list[Param] = []
        self.positions: dict[str, tuple[int, int]] = {}
        self.duplicates: list[tuple[str, tuple[int, int]]] = []
        self.envs: list[EnvVar] = []
        self.meta: dict[str, Any] = {"require_tools": [], "dotenv": None, "limits": {}}
        self.reader = MetadataReader(diag, _SPELL)
        self.previous_row = -2
        self.built = False

    def node(self, node: Node) -> None:
        """One top-level node: a tag, a continuation line, or anything else (which ends a continuation)."""
        if node.type != "comment" or text(node).startswith("#!"):
            self.continuing = None
            return
        body = text(node)[1:]
        if body.rstrip() == BUILD_MARKER:
            self.built, self.continuing = True, None
            return
        row, col = node.start_point
        adjacent, self.previous_row = row == self.previous_row + 1, row
        line = body.strip()
        if not line.startswith("@"):
            if self.continuing is not None and adjacent:
                self.continuing.append(continuation(body))  # a tag continues on the following comment lines
            else:
                self.continuing = None
            return
        self.continuing = None
        tag_at = col + 1 + (len(body) - len(body.lstrip()))
        # argc separates a tag from its text by any blank (a TAB too)
        tag, rest = re.split(r"\s", line[1:], maxsplit=1) if re.search(r"\s", line) else (line[1:], "")
        self.tag(tag, rest, row, tag_at, tag_at + 1 + len(tag) + 1)

    def tag(self, tag: str, rest: str, row: int, tag_at: int, rest_at: int) -> None:
        """One ``@tag rest`` line at (row, column)."""
        diag = self.diag
        if tag == "describe":
            if self.described_at is not None:
                diag.error((row, tag_at), "a second @describe", "keep one @describe; continue it on the next comment lines")
            self.described_at, self.description = row, [rest.strip()]
            self.continuing = self.description
        elif tag in ("option", "flag", "arg"):
            try:
                self.param(tag, rest, row, tag_at)  # type: ignore[arg-type]
            except TagError as error:
                diag.error((row, rest_at + error.offset), f"@{tag}: {error.message}", error.hint)
        elif tag == "env":
            try:
                self.envs.append(parse_env(rest))
                self.continuing = [self.envs[-1].help]
                self.helps.append((self.envs[-1], self.continuing))
            except TagError as error:
                diag.error((row, rest_at + error.offset), f"@env: {error.message}", error.hint)
        elif tag == "meta":
            _meta(rest, self.meta, self.reader, diag, (row, rest_at))
        elif tag not in _SILENT:
            diag.warn((row, tag_at), f"unknown tag @{tag}; it is ignored", "known tags: @describe @option @flag @arg @env @meta")

    def param(self, kind: ParamKind, rest: str, row: int, tag_at: int) -> None:
        """An ``@option`` / ``@flag`` / ``@arg``; TagError when it is malformed."""
        param = parse_param(kind, rest)
        if param.var in _ARGC_OWN:
            raise TagError(
                0, f"'{param.long}' would be {param.var}, which argc sets itself", f"rename it: @{kind} {param.long.lstrip('_')}"
            )
        if param.name in self.positions:
            self.duplicates.append((param.name, (row, tag_at)))
        else:
            self.positions[param.name] = (row, tag_at)
        self.params.append(param)
        self.continuing = [param.help]
        self.helps.append((param, self.continuing))

    def check(self, functions: set[str], *, runs: bool = True) -> str:
        """Join the continued help texts, report what the whole script lacks, and return the description."""
        diag = self.diag
        for item, lines in self.helps:
            item.help = "\n".join(lines).strip()
        described = "\n".join(self.description).strip()
        if not described:
            where = (self.described_at, 0) if self.described_at is not None else None
            diag.error(
                where, "no @describe text", "start the script with a comment such as: # @describe List the files in a directory"
            )
        for duplicate, at in self.duplicates:
            first = self.positions[duplicate][0] + 1
            diag.error(
                at,
                f"parameter {duplicate!r} is already declared on line {first}",
                "give each @option, @flag and @arg its own name",
            )
        for param in self.params:
            for fn in (param.default_fn, param.choices_fn):
                if fn and fn not in functions:
                    diag.error(
                        self.positions[param.name],
                        f"function {fn!r} used by {param.long!r} is not defined",
                        f"define {fn}() {{ ... }} in the script",
                    )
        if "main" not in functions and not runs:
            diag.error(
                None,
                "the script declares nothing it can run: no main function, and no command at the top level",
                "put the tool's work in main() { ... }, which runs with the argc_* variables bound",
            )
        elif "main" not in functions:
            diag.warn(None, "no main function; the script's top-level code is the tool")
        return described


# Top-level commands that set a script up without doing anything a tool is for.
_SETUP = {"set", "shopt", "source", ".", "export", "declare", "typeset", "readonly", "local", "trap", "unset", ":"}


def _runs(node: Node) -> bool:
    """Whether a top-level statement does work when the script runs (not a definition, a setting or argc's trailer)."""
    if node.type in ("comment", "function_definition", "variable_assignment", "declaration_command"):
        return False
    if node.type == "command":
        name = text(node.child_by_field_name("name"))
        return name not in _SETUP and not (name == "eval" and "--argc-eval" in text(node))
    return True


def continuation(body: str) -> str:
    """A continuation line as argc reads it: the text after ``#`` less one space or tab (further
    indentation is kept), with a leading ``\\@`` turned into a literal ``@``."""
    if body[:1] in (" ", "\t"):
        body = body[1:]
    return body[1:] if body.startswith("\\@") else body


# `# @meta <key>` -> metadata field.
_META_KEYS = {
    "title": "title",
    "summary": "summary",
    "tags": "tags",
    "read-only": "read_only",
    "destructive": "destructive",
    "idempotent": "idempotent",
    "open-world": "open_world",
    "example": "examples",
    "error": "errors",
    "output-schema": "output_schema",
    "scope": "scopes",
    "icon": "icon",
    "task": "task",
    "max-concurrency": "max_concurrency",
    "rate": "rate",
    "warm": "warm",
}
# argc's own @meta keys, and toolexec's others: never reported as unknown.
_ARGC_META = {"require-tools", "dotenv", "symbol", "combine-shorts", "inherit-flag-options", "man-section", "default-subcommand"}
# The isolation policy (docs/sandbox.md).
_SANDBOX_KEYS = {key.replace("_", "-"): key for key in SANDBOX_FIELDS}
_SPELL = {field: f"@meta {key}" for key, field in {**_META_KEYS, **_SANDBOX_KEYS}.items()}


def _meta(rest: str, meta: dict[str, Any], reader: MetadataReader, diag: Diagnostics, at: tuple[int, int]) -> None:
    key, _, value = rest.strip().partition(" ")
    value = value.strip()
    field = _META_KEYS.get(key)
    if field in ("title", "summary"):
        reader.set_text(field, value, at)
    elif field == "tags":
        reader.add_tags(value, at)
    elif field == "scopes":
        reader.add_scopes(value, at)
    elif field == "examples":
        reader.add_example_text(value, at)
    elif field == "errors":
        reader.add_error(value, at)
    elif field == "output_schema":
        reader.set_output_schema(value, at)
    elif field == "icon":
        reader.set_icon(value, at)
    elif field == "task":
        reader.set_task(value, at)
    elif field == "warm":
        reader.set_warm(value, at)
    elif field in ("max_concurrency", "rate"):
        reader.set_cap(field, value, at)
    elif field is not None:
        reader.set_flag(field, value, at)
    elif key == "require-tools":
        tools = [t for t in value.replace(",", " ").split() if t]
        if not tools:
            diag.error(at, "@meta require-tools names no program", "write # @meta require-tools jq,curl")
        meta["require_tools"].extend(tools)
    elif key == "dotenv":
        meta["dotenv"] = value or ".env"
    elif key in _SANDBOX_KEYS:
        reader.set_sandbox(_SANDBOX_KEYS[key], value, at)
    elif key in LIMITS:
        limits = read_limits({key: value}, diag, at, "# @meta {name} {value}")
        meta["limits"].update({k: v for k, v in asdict(limits).items() if v is not None})
    elif key not in _ARGC_META:
        known = [*_META_KEYS, *LIMITS, *_SANDBOX_KEYS, "require-tools", "dotenv"]
        meant = near_miss(key, known)
        hint = f"did you mean @meta {meant}?" if meant else f"toolexec reads @meta {', '.join(known)}"
        diag.warn(at, f"unknown @meta key {key!r}; it is ignored", hint)


def _schema(param: Param) -> dict[str, Any]:
    if param.kind == "flag":
        schema: dict[str, Any] = {"type": "boolean"}
    else:
        kind = _TYPES.get(param.notation or "", "string")
        item: dict[str, Any] = {"type": kind}
        if param.choices:
            item = {"type": "string", "enum": list(param.choices)}
        schema = {"type": "array", "items": item} if param.multi else item
        if param.default is not None:
            default: Any = _typed(param.default, kind)
            schema["default"] = (default.split(",") if param.split else [default]) if param.multi else default
    if param.help:
        schema["description"] = param.help
    return schema


def _typed(value: str, kind: str) -> Any:
    try:
        return int(value) if kind == "integer" else float(value) if kind == "number" else value
    except ValueError:
        return value


def _bash_shebang(source: str) -> tuple[str, ...]:
    """The shebang, when it names a bash: argc scripts need bash features whatever #! says."""
    words = read_shebang(source)
    return words if words and "bash" in words[0].rsplit("/", 1)[-1] else ()
