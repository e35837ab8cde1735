"""Python tools run through a bootstrap that imports the script and calls ``run(**arguments)``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolexec.records import ToolDeclaration
from toolexec.runtimes.base import Context
from toolexec.runtimes.interpreter import find_venv_python

BOOTSTRAP = Path(__file__).with_name("python_bootstrap.py")


class PythonRuntime:
    def default_interpreter(self, context: Context) -> list[str]:
        return [find_venv_python(context.functions_dir, context.cwd) or "python3"]

    def command(self, declaration: ToolDeclaration, interpreter: list[str], context: Context) -> list[str]:
        return [*interpreter, str(BOOTSTRAP), declaration.source]

    def stdin(self, declaration: ToolDeclaration, arguments: dict[str, Any]) -> bytes:
        return json.dumps({"arguments": arguments}).encode("ascii")

    def preflight(self, declaration: ToolDeclaration, env: dict[str, str]) -> str | None:
        return None
