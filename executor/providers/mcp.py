"""MCP: tools as an MCP server lists them (``tools/list``), and a call's result as ``tools/call`` returns it.

Declarations: ``{name, title?, description, inputSchema, outputSchema?, annotations?}`` with
the annotations (``title``, ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
``openWorldHint``) that the tool declares, and its output shape when it is an object
(what every protocol version can carry). Names follow MCP's ``[A-Za-z0-9_.-]{1,128}``.
Calls arrive through the server (``toolexec mcp``), not as a batch.
"""

from __future__ import annotations

from typing import Any

from toolexec.policy import describe as describe_policy
from toolexec.providers import Declared, content
from toolexec.providers.names import MCP_NAMES
from toolexec.records import ToolDeclaration, ToolResult

NAME = "mcp"
NAMES = MCP_NAMES


def declare(tool: ToolDeclaration, name: str) -> Declared:
    """The ``tools/list`` entry of ``tool`` under ``name``."""
    meta = tool.metadata
    declaration: dict[str, Any] = {"name": name}
    if meta.title is not None:
        declaration["title"] = meta.title
    declaration["description"] = tool.description
    declaration["inputSchema"] = {"type": "object", **tool.to_function()["parameters"]}
    output = output_schema(tool)
    if output is not None:
        declaration["outputSchema"] = output
    declared = hints(tool)
    if declared:
        declaration["annotations"] = declared
    if meta.sandbox is not None:
        declaration.setdefault("_meta", {})["toolexec/sandbox"] = describe_policy(meta.sandbox)
    if meta.scopes:  # the OAuth scopes a token needs to call it (docs/mcp.md#oauth)
        declaration.setdefault("_meta", {})["toolexec/scopes"] = list(meta.scopes)
    return Declared(declaration)


def hints(tool: ToolDeclaration) -> dict[str, Any]:
    """MCP's tool annotations: the title and the behaviour hints the tool declares (undeclared ones are left out)."""
    meta, given = tool.metadata, tool.metadata.annotations
    declared = {
        "title": meta.title,
        "readOnlyHint": given.read_only,
        "destructiveHint": given.destructive,
        "idempotentHint": given.idempotent,
        # A tool confined to no network cannot reach an open world, whatever it says.
        "openWorldHint": False if meta.sandbox is not None and meta.sandbox.network == "none" else given.open_world,
    }
    return {key: value for key, value in declared.items() if value is not None}


def output_schema(tool: ToolDeclaration) -> dict[str, Any] | None:
    """The declared output shape when MCP can carry it (an object at the root)."""
    schema = tool.metadata.output_schema
    return dict(schema) if isinstance(schema, dict) and schema.get("type") == "object" else None


def message(result: ToolResult) -> dict[str, Any]:
    """A ``tools/call`` result: the text as one content item, ``isError`` on failure."""
    return {"content": [{"type": "text", "text": content(result)}], "isError": not result.ok}
