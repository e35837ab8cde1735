"""Python tools run through a bootstrap that imports the script and calls ``run(**arguments)``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolexec.records import ToolDeclaration
from toolexec.runtimes.base import Prepared, Site
from toolexec.runtimes.interpreter import interpreter_for

BOOTSTRAP = Path(__file__).with_name("python_bootstrap.py")


class PythonRuntime:
    """``python python_bootstrap.py TOOL`` with ``{"arguments": …}`` on stdin."""

    def prepare(self, tool: ToolDeclaration, arguments: dict[str, Any], site: Site) -> Prepared:
        """The bootstrap under the chosen Python, the arguments as JSON."""
        argv = [*interpreter_for(tool, site), str(BOOTSTRAP), tool.source]
        return Prepared(argv=argv, stdin=json.dumps({"arguments": arguments}).encode("ascii"))
