"""JavaScript tools run under node (the Node extra's, else PATH's; or the shebang's runtime) through one ESM bootstrap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolexec.records import ToolDeclaration
from toolexec.runtimes.base import Context
from toolexec.runtimes.interpreter import default_node

BOOTSTRAP = Path(__file__).with_name("node_bootstrap.mjs")


class JavaScriptRuntime:
    def default_interpreter(self, context: Context) -> list[str]:
        return default_node()

    def command(self, declaration: ToolDeclaration, interpreter: list[str], context: Context) -> list[str]:
        return [*interpreter, str(BOOTSTRAP), declaration.source]

    def stdin(self, declaration: ToolDeclaration, arguments: dict[str, Any]) -> bytes:
        if declaration.convention == "object":
            # llm-functions' `@property {T} [name=default]`: the JSDoc is the only place the default is
            # written, so toolexec fills it in (Python and positional tools get theirs from the signature).
            properties = declaration.parameters.get("properties", {})
            defaults = {name: p["default"] for name, p in properties.items() if "default" in p and name not in arguments}
            arguments = {**arguments, **defaults}
        request = {
            "arguments": arguments,
            "convention": declaration.convention,
            "order": declaration.meta.get("order", []),
            "export": declaration.meta.get("export", "named"),
        }
        return json.dumps(request).encode("ascii")

    def preflight(self, declaration: ToolDeclaration, env: dict[str, str]) -> str | None:
        return None
