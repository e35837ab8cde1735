"""Bash tools: argc variables bound from the validated arguments, then ``main`` runs.

The records for the bootstrap are built here, in Python, so that flags, arrays,
comma splitting and literal defaults follow argc exactly; only defaults and
choices computed by a script function are left to the bootstrap.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from toolexec.errors import BadRequest
from toolexec.records import ToolDeclaration
from toolexec.runtimes.base import Context
from toolexec.runtimes.environment import parse_dotenv

BOOTSTRAP = Path(__file__).with_name("bash_bootstrap.sh")


class BashRuntime:
    def default_interpreter(self, context: Context) -> list[str]:
        return ["bash"]

    def command(self, declaration: ToolDeclaration, interpreter: list[str], context: Context) -> list[str]:
        return [*interpreter, str(BOOTSTRAP), declaration.source]

    def stdin(self, declaration: ToolDeclaration, arguments: dict[str, Any]) -> bytes:
        records: list[str] = []
        positional: list[str] = []
        for param in declaration.meta.get("params", []):
            values = _values(param, arguments.get(param["name"]), declaration.name)
            var = param["var"]
            if values is None:
                if param["default_fn"]:
                    records += ["f", var, param["default_fn"]]
            elif param["multi"] and param["kind"] != "flag":
                records += ["a", var, str(len(values)), *values]
            else:
                records += ["s", var, values[0]]
            if param["kind"] == "arg" and values:
                positional += values
            if param["choices_fn"] and param["check_choices"]:
                records += ["c", var, param["choices_fn"]]
        records += ["p", str(len(positional)), *positional]
        return b"".join(r.encode("utf-8", "surrogateescape") + b"\0" for r in records)

    def preflight(self, declaration: ToolDeclaration, env: dict[str, str]) -> str | None:
        meta = declaration.meta
        if meta.get("dotenv"):
            dotenv = Path(declaration.source).parent / meta["dotenv"]
            try:
                for key, value in parse_dotenv(dotenv.read_text(encoding="utf-8")).items():
                    env.setdefault(key, value)
            except (OSError, UnicodeDecodeError) as exc:
                return f"tool {declaration.name!r} loads {dotenv} (@meta dotenv), which cannot be read: {exc}"
        for var in meta.get("env", []):
            name = var["name"]
            if name not in env and var["default"] is not None:
                env[name] = var["default"]
            if name not in env and var["required"]:
                about = f" ({var['help']})" if var["help"] else ""
                return f"tool {declaration.name!r} needs the environment variable {name}{about}; set it in the environment or in functions/.env"
            if name in env and var["choices"] and env[name] not in var["choices"]:
                return f"environment variable {name} must be one of {', '.join(var['choices'])}, got {env[name]!r}"
        missing = [p for p in meta.get("require_tools", []) if not shutil.which(p, path=env.get("PATH", os.defpath))]
        if missing:
            return f"tool {declaration.name!r} needs {', '.join(missing)}, not found on PATH; install {'them' if len(missing) > 1 else 'it'} first"
        return None


def _values(param: dict[str, Any], value: Any, tool: str) -> list[str] | None:
    """The strings argc would bind for one parameter, or None to leave it unset."""
    if param["kind"] == "flag":
        return ["1"] if value is True else None
    if value is None:
        if param["default"] is None:
            return None
        value = param["default"].split(",") if param["multi"] and param["split"] else param["default"]
    items = value if isinstance(value, list) else [value]
    texts = [_text(item) for item in items]
    if param["split"]:
        texts = [part for text in texts for part in text.split(",")]
    for text in texts:
        if "\0" in text:
            raise BadRequest(
                f"parameter {param['name']!r} of tool {tool!r} contains a NUL character, which a Bash tool cannot receive"
            )
    return texts


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)
