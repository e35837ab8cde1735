"""What a language runtime provides to the call engine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from toolexec.records import ToolDeclaration


@dataclass(frozen=True)
class Context:
    """Where a call happens: used to pick default interpreters."""

    functions_dir: Path
    cwd: Path
    state_dir: Path


class Runtime(Protocol):
    """How one language's tools are started. The process itself is run by runtimes.process."""

    def default_interpreter(self, context: Context) -> list[str]:
        """The interpreter argv used when neither the shebang nor config names one."""
        ...

    def command(self, declaration: ToolDeclaration, interpreter: list[str], context: Context) -> list[str]:
        """The full argv that runs the tool (arguments never go here)."""
        ...

    def stdin(self, declaration: ToolDeclaration, arguments: dict[str, Any]) -> bytes:
        """The bytes fed to the process's stdin: how the arguments travel."""
        ...

    def preflight(self, declaration: ToolDeclaration, env: dict[str, str]) -> str | None:
        """A reason to refuse before starting (missing @env, programs), or None."""
        ...
