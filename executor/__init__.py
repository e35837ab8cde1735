"""toolexec: compile script tools into JSON-Schema declarations and run them for LLM agents."""

from executor.api import Executor
from executor.build import BuildReport
from executor.config import Config, load_config
from executor.errors import (
    BadRequest,
    BuildError,
    CallRefused,
    CompileError,
    ConfigError,
    InvalidArguments,
    Problem,
    RuntimeUnavailable,
    ToolexecError,
    UnknownTool,
)
from executor.records import ToolCall, ToolDeclaration, ToolResult
from executor.version import __version__

__all__ = [
    "BadRequest",
    "BuildError",
    "BuildReport",
    "CallRefused",
    "CompileError",
    "Config",
    "ConfigError",
    "Executor",
    "InvalidArguments",
    "Problem",
    "RuntimeUnavailable",
    "ToolCall",
    "ToolDeclaration",
    "ToolResult",
    "ToolexecError",
    "UnknownTool",
    "__version__",
    "load_config",
]
