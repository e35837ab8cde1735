"""toolexec: compile script tools into JSON-Schema declarations and run them for LLM agents.

Names are resolved lazily (PEP 562) so that importing one submodule, as the CLI
does on every call, does not pay for the whole package.
"""

# No `from __future__ import annotations` and no importlib here: the installed command imports this package before
# it tries a running server (toolexec.entry), and each module loaded costs that one-shot run a fraction of a ms.
from toolexec.version import __version__

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import

_EXPORTS = {
    "Executor": "toolexec.api",
    "CallControl": "toolexec.runtimes.process",
    "BuildReport": "toolexec.build",
    "Catalog": "toolexec.catalog",
    "Entry": "toolexec.catalog",
    "Diff": "toolexec.catalog",
    "Config": "toolexec.config",
    "load_config": "toolexec.config",
    "Artifact": "toolexec.records",
    "ToolCall": "toolexec.records",
    "InputRequest": "toolexec.records",
    "InputResponse": "toolexec.records",
    "OnInput": "toolexec.approval",
    "ToolDeclaration": "toolexec.records",
    "ToolResult": "toolexec.records",
    "Annotations": "toolexec.records",
    "format_tool_result": "toolexec.providers",
    "format_tool_result_as_text": "toolexec.providers",
    "Toolkit": "toolexec.toolkit",
    "ApprovalRequest": "toolexec.approval",
    "BeforeCall": "toolexec.approval",
    "Decision": "toolexec.approval",
    "Batch": "toolexec.providers",
    "Declarations": "toolexec.providers",
    "Names": "toolexec.providers",
    "Sent": "toolexec.providers",
    "DiscoveryError": "toolexec.toolkit",
    "DiscoveryReport": "toolexec.toolkit",
    "Deny": "toolexec.approval",
    "Rewrite": "toolexec.approval",
    **dict.fromkeys(
        [
            "BadRequest",
            "BuildError",
            "CallDenied",
            "CallRefused",
            "CompileError",
            "ConfigError",
            "InvalidArguments",
            "PreparationFailed",
            "Problem",
            "RuntimeUnavailable",
            "ToolexecError",
            "UnknownTool",
        ],
        "toolexec.errors",
    ),
}

__all__ = [
    "Annotations",
    "ApprovalRequest",
    "Artifact",
    "BadRequest",
    "Batch",
    "BeforeCall",
    "BuildError",
    "BuildReport",
    "CallControl",
    "CallDenied",
    "CallRefused",
    "Catalog",
    "CompileError",
    "Config",
    "ConfigError",
    "Decision",
    "Declarations",
    "Deny",
    "Diff",
    "DiscoveryError",
    "DiscoveryReport",
    "Entry",
    "Executor",
    "InputRequest",
    "InputResponse",
    "InvalidArguments",
    "Names",
    "OnInput",
    "PreparationFailed",
    "Problem",
    "Rewrite",
    "RuntimeUnavailable",
    "Sent",
    "ToolCall",
    "ToolDeclaration",
    "ToolResult",
    "ToolexecError",
    "Toolkit",
    "UnknownTool",
    "__version__",
    "format_tool_result",
    "format_tool_result_as_text",
    "load_config",
]

if TYPE_CHECKING:
    from toolexec.api import Executor
    from toolexec.approval import ApprovalRequest, BeforeCall, Decision, Deny, OnInput, Rewrite
    from toolexec.build import BuildReport
    from toolexec.catalog import Catalog, Diff, Entry
    from toolexec.config import Config, load_config
    from toolexec.errors import (
        BadRequest,
        BuildError,
        CallDenied,
        CallRefused,
        CompileError,
        ConfigError,
        InvalidArguments,
        PreparationFailed,
        Problem,
        RuntimeUnavailable,
        ToolexecError,
        UnknownTool,
    )
    from toolexec.providers import Batch, Declarations, Names, Sent, format_tool_result, format_tool_result_as_text
    from toolexec.records import Annotations, Artifact, InputRequest, InputResponse, ToolCall, ToolDeclaration, ToolResult
    from toolexec.runtimes.process import CallControl
    from toolexec.toolkit import DiscoveryError, DiscoveryReport, Toolkit


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        from importlib import import_module

        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'toolexec' has no attribute {name!r}")
