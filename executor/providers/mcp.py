"""MCP: tools as an MCP server lists them (``tools/list``), and a call's result as ``tools/call`` returns it.

Declarations: ``{name, title?, description, inputSchema, outputSchema?, annotations?, execution?}`` with
the annotations (``title``, ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
``openWorldHint``) that the tool declares, and its output shape: when it is an object (what every
protocol version can carry), or of any shape for a 2026-07-28 client (``any_shape``). Names follow MCP's ``[A-Za-z0-9_.-]{1,128}``.
Calls arrive through the server (``toolexec mcp``), not as a batch.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from toolexec.policy import describe as describe_policy
from toolexec.providers import Declared, content, files
from toolexec.providers.names import MCP_NAMES
from toolexec.records import Artifact, ToolDeclaration, ToolResult

NAME = "mcp"
NAMES = MCP_NAMES


def declare(tool: ToolDeclaration, name: str, *, any_shape: bool = False) -> Declared:
    """The ``tools/list`` entry of ``tool`` under ``name``; with ``any_shape`` (2026-07-28) an output schema of any
    JSON value, else (every version) only an object's."""
    meta = tool.metadata
    declaration: dict[str, Any] = {"name": name}
    if meta.title is not None:
        declaration["title"] = meta.title
    declaration["description"] = tool.description
    declaration["inputSchema"] = {"type": "object", **tool.to_function()["parameters"]}
    output = output_schema(tool, any_shape=any_shape)
    if output is not None:
        declaration["outputSchema"] = output
    declared = hints(tool)
    if declared:
        declaration["annotations"] = declared
    if meta.icon is not None:  # a data: URI made by the compiler from the file the script names
        declaration["icons"] = [{"src": meta.icon, "mimeType": meta.icon[5:].split(";", 1)[0]}]
    if meta.task is not None:  # handshake era; the 2026-07-28 wire has no such field (a task is the server's choice)
        declaration["execution"] = {"taskSupport": meta.task}
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


def output_schema(tool: ToolDeclaration, *, any_shape: bool = False) -> dict[str, Any] | None:
    """The declared output shape when MCP can carry it: any shape on 2026-07-28 (``any_shape``), else an object."""
    schema = tool.metadata.output_schema
    if not isinstance(schema, dict):
        return None
    return dict(schema) if any_shape or schema.get("type") == "object" else None


def message(result: ToolResult) -> dict[str, Any]:
    """A ``tools/call`` result as ``toolexec mcp`` answers it: the text as one content item, then per file carried in
    the result an ``image`` / ``audio`` item or an embedded ``resource`` (a kept file is named in the text: there is
    no server here to read a link from), ``isError`` on failure."""
    carried = [a for a in result.artifacts if a.data is not None]
    text = content(result)
    if result.artifacts:
        text = files.text_with_descriptions(text, result.artifacts, "MCP", frozenset(a.mime_type for a in carried))
    return {"content": [{"type": "text", "text": text}, *(_item(a) for a in carried)], "isError": not result.ok}


INLINE_URI = "toolexec://artifacts/inline/"  # the URI of a file embedded in a result (nothing to read back)


def _item(artifact: Artifact) -> dict[str, Any]:
    if artifact.kind != "file":
        return {"type": artifact.kind, "data": files.encoded(artifact), "mimeType": artifact.mime_type}
    resource: dict[str, Any] = {"uri": INLINE_URI + quote(artifact.name, safe=""), "mimeType": artifact.mime_type}
    text = files.as_text(artifact)
    resource.update({"text": text} if text is not None else {"blob": files.encoded(artifact)})
    return {"type": "resource", "resource": resource}
