"""Bash tools: argc variables bound from the validated arguments, then ``main`` runs.

The records for the bootstrap are built here, in Python, so that flags, arrays,
comma splitting and literal defaults follow argc exactly; only defaults and
choices computed by a script function are left to the bootstrap.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

from toolexec.errors import BadRequest, PreconditionFailed
from toolexec.records import Argc, ArgcParam, ToolDeclaration
from toolexec.runtimes.argc_built import built_argv, word_text
from toolexec.runtimes.base import Prepared, Site
from toolexec.runtimes.environment import parse_dotenv, without_unsafe
from toolexec.runtimes.interpreter import interpreter_for, which

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

    from toolexec.runtimes.warm import WarmSpec

BOOTSTRAP = Path(__file__).with_name("bash_bootstrap.sh")
WARM_SERVER = Path(__file__).with_name("bash_warm.sh")


class BashRuntime:
    """``bash bash_bootstrap.sh TOOL [FUNCTION]`` with NUL-separated binding records on stdin."""

    def prepare(self, tool: ToolDeclaration, arguments: dict[str, Any], site: Site) -> Prepared:
        """Check what the script declares it needs (``@env``, ``@meta``), then the bootstrap under bash."""
        invocation = tool.invocation
        if not isinstance(invocation, Argc):
            raise TypeError(f"a Bash tool needs an argc invocation, got {invocation.kind}")
        additions = _environment(tool, invocation, site.env)
        command = [tool.function] if tool.function is not None else []  # an agent's @cmd function
        if invocation.built:  # its own parser reads the argv and calls main (or the @cmd function) once
            argv = [*interpreter_for(tool, site), tool.source, *command, *built_argv(tool, invocation, arguments)]
            return Prepared(argv=argv, stdin=b"", env_additions=additions)
        interpreter = interpreter_for(tool, site)
        argv = [*interpreter, str(BOOTSTRAP), tool.source, *command]
        warm = _warm_spec(tool, [*interpreter, str(WARM_SERVER), tool.source, *command], site, additions) if site.warm else None
        # `ulimit -f` counts in 1024-byte blocks (512 in POSIX mode, which the bootstrap doubles for)
        return Prepared(
            argv=argv,
            stdin=_records(tool, invocation, arguments),
            env_additions=additions,
            sets_file_limit=1024,
            warm=warm,
        )


def _warm_spec(tool: ToolDeclaration, server: list[str], site: Site, additions: dict[str, str]) -> WarmSpec:
    """A bash that has sourced the tool (``server``: its argv; see bash_warm.sh), keyed by the source text too."""
    from toolexec.runtimes.warm import server_environment

    env = server_environment({**site.env, **additions})
    source = site.code
    if source is None:
        source = Path(tool.source).read_text(encoding="utf-8", errors="surrogateescape")
    return _spec(tool.name, tuple(server), source, str(site.cwd), frozenset(env.items()))


@functools.lru_cache(maxsize=64)
def _spec(tool: str, server: tuple[str, ...], source: str, cwd: str, env: frozenset[tuple[str, str]]) -> WarmSpec:
    """The spec of those inputs, made once: every warm call asks for its tool's, and the digest that tells servers
    apart (the source and environment hashed) costs more than the call's own records."""
    from toolexec.runtimes.warm import WarmSpec, spec_key

    environment = dict(env)
    key = spec_key(server, source.encode("utf-8", "surrogateescape"), environment)
    return WarmSpec(kind="bash-fork", tool=tool, argv=server, env=environment, cwd=cwd, key=key)


def _records(tool: ToolDeclaration, invocation: Argc, arguments: dict[str, Any]) -> bytes:
    """The binding records the bootstrap reads (see bash_bootstrap.sh)."""
    records: list[str] = []
    positional: list[str] = []
    for param in invocation.params:
        values = _values(param, arguments.get(param.name), tool.name)
        if values is None:
            if param.default_fn:
                records += ["f", param.var, param.default_fn]
        elif param.multi and param.kind != "flag":
            records += ["a", param.var, str(len(values)), *values]
        else:
            records += ["s", param.var, values[0]]
        if param.kind == "arg" and values:
            positional += values
        if param.choices_fn and param.check_choices:
            records += ["c", param.var, param.choices_fn]
    records += ["p", str(len(positional)), *positional]
    return b"".join(r.encode("utf-8", "surrogateescape") + b"\0" for r in records)


def _environment(tool: ToolDeclaration, invocation: Argc, env: Mapping[str, str]) -> dict[str, str]:
    """Variables to add for ``@meta dotenv`` and ``@env`` defaults; PreconditionFailed for what is missing."""
    additions: dict[str, str] = {}
    if invocation.dotenv:
        dotenv = Path(tool.source).parent / invocation.dotenv
        try:
            values = without_unsafe(parse_dotenv(dotenv.read_text(encoding="utf-8"), env))
        except (OSError, UnicodeDecodeError) as exc:
            raise PreconditionFailed(f"tool {tool.name!r} loads {dotenv} (@meta dotenv), which cannot be read: {exc}") from None
        additions.update({k: v for k, v in values.items() if k not in env})
    seen = {**additions, **env}
    missing: list[str] = []
    wrong: list[str] = []
    for var in invocation.env:  # as argc: an empty variable is an unset one
        if not seen.get(var.name) and var.default is not None:
            additions[var.name] = seen[var.name] = var.default
        if not seen.get(var.name) and var.required:
            missing.append(f"{var.name} ({var.help})" if var.help else var.name)
        if seen.get(var.name) and var.choices and seen[var.name] not in var.choices:
            wrong.append(f"environment variable {var.name} must be one of {', '.join(var.choices)}, got {seen[var.name]!r}")
    if missing:  # every one at once, as argc names them
        variables, them = ("variable", "it") if len(missing) == 1 else ("variables", "them")
        raise PreconditionFailed(
            f"tool {tool.name!r} needs the environment {variables} {', '.join(missing)}; "
            f"set {them} in the environment or in functions/.env"
        )
    if wrong:
        raise PreconditionFailed("; ".join(wrong))
    missing = [p for p in invocation.require_tools if not which(p, path=seen.get("PATH", os.defpath))]
    if missing:
        them = "them" if len(missing) > 1 else "it"
        raise PreconditionFailed(f"tool {tool.name!r} needs {', '.join(missing)}, not found on PATH; install {them} first")
    return additions


def _values(param: ArgcParam, value: Any, tool: str) -> list[str] | None:
    """The strings argc would bind for one parameter, or None to leave it unset."""
    if param.kind == "flag":
        return ["1"] if value is True else None
    if value is None:
        if param.default is None:
            return None
        value = param.default.split(",") if param.multi and param.split else param.default
    items = value if isinstance(value, list) else [value]
    texts = [word_text(item) for item in items]
    if param.split:
        texts = [part for text in texts for part in text.split(",")]
    for text in texts:
        if "\0" in text:
            raise BadRequest(
                f"parameter {param.name!r} of tool {tool!r} contains a NUL character, which a Bash tool cannot receive"
            )
    return texts
