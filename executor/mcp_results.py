"""What ``toolexec mcp`` makes of a result beyond its text: files as content, structured output of any shape, and
how long clients may cache lists.

* **Files** (:mod:`toolexec.artifacts`): an image or audio file carried in the result becomes ``image`` / ``audio``
  content, any other such file an embedded resource; a kept one a ``resource_link`` whose URI ``resources/read``
  serves (:func:`read_resource`) to the client it was returned to only (:func:`owner_of`), from any instance that
  shares the state directory, for ``artifacts.ttl`` seconds.
* **Structured output**: on 2026-07-28 ``structuredContent`` is any JSON value, so a tool may declare (and return)
  an array or a scalar; a client of an earlier version is offered only object shapes (as the schema of its
  version says), and sent ``structuredContent`` only when the value is an object.
* **List caching**: ``tools/list`` says for how long a client may keep it (:func:`list_cache`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import urllib.parse
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolexec import artifacts
from toolexec.config import Config
from toolexec.providers import files
from toolexec.providers.mcp import INLINE_URI
from toolexec.records import Artifact

# How long a client may keep a tools/list answer: with reload on, the watcher tells listeners when it changes (the
# short TTL covers a client that does not listen); with reload off the list cannot change while the server runs.
LIST_TTL_MS_RELOAD = 10_000
LIST_TTL_MS_FIXED = 3_600_000


def modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request speaks the 2026-07-28 revision (or later)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def list_cache(reload: bool) -> dict[str, Any]:
    """``ttlMs``/``cacheScope`` of a ``tools/list`` answer. Private: what is offered may depend on the client's token."""
    return {"ttl_ms": LIST_TTL_MS_RELOAD if reload else LIST_TTL_MS_FIXED, "cache_scope": "private"}


def owner_of(ctx: ServerRequestContext[Any, Any], local: str) -> str:
    """Who a kept file returned in answer to ``ctx`` belongs to: the OAuth principal (client, issuer, subject) when the
    request carries a verified access token, else a digest of the bearer token it sent, else (stdio) ``local``,
    a secret of this server process."""
    request = ctx.request
    return owner_for(None if request is None else (getattr(request, "headers", {}).get("authorization") or ""), local)


def owner_for(authorization: str | None, local: str) -> str:
    """:func:`owner_of` for a request that sent the Authorization header ``authorization`` ("" for none; None when it
    did not come over HTTP)."""
    token = get_access_token()
    if token is not None:
        return "oauth:" + json.dumps(principal_components(token))
    if authorization is None:
        return local
    return "bearer:" + hashlib.sha256(authorization.encode("utf-8", "surrogateescape")).hexdigest()


def process_secret() -> str:
    """A fresh owner for the files a stdio server returns: only this process's client reads them back."""
    return "stdio:" + os.urandom(16).hex()


def content(found: tuple[Artifact, ...], owner: str) -> list[types.ContentBlock]:
    """The content blocks of a result's files (kept ones bound to ``owner``)."""
    blocks: list[types.ContentBlock] = []
    for artifact in found:
        if artifact.data is None:
            try:
                artifacts.bind(artifact, owner)
            except OSError:  # pruned meanwhile, or the state directory turned read-only: said without its path
                blocks.append(types.TextContent(text=f"[toolexec note: the file {artifact.name} could not be offered]"))
                continue
            blocks.append(
                types.ResourceLink(
                    uri=artifacts.uri_of(artifact), name=artifact.name, mime_type=artifact.mime_type, size=artifact.size
                )
            )
            continue
        encoded = base64.b64encode(artifact.data).decode("ascii")
        if artifact.kind == "image":
            blocks.append(types.ImageContent(data=encoded, mime_type=artifact.mime_type))
        elif artifact.kind == "audio":
            blocks.append(types.AudioContent(data=encoded, mime_type=artifact.mime_type))
        else:
            uri = INLINE_URI + urllib.parse.quote(artifact.name, safe="")
            blocks.append(types.EmbeddedResource(resource=_contents(uri, artifact)))
    return blocks


def _contents(uri: str, artifact: Artifact) -> types.TextResourceContents | types.BlobResourceContents:
    """Text contents for a text type that is UTF-8, else a blob."""
    text = files.as_text(artifact)
    if text is not None:
        return types.TextResourceContents(uri=uri, mime_type=artifact.mime_type, text=text)
    return types.BlobResourceContents(uri=uri, mime_type=artifact.mime_type, blob=files.encoded(artifact))


async def list_resources(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    """``resources/list``: empty. The files of results are reached by their links, never listed (they are each
    client's own); serving the method declares the ``resources`` capability that ``resources/read`` needs."""
    return types.ListResourcesResult(resources=[], ttl_ms=0, cache_scope="private")


def read_resource(uri: str, owner: str, config: Config) -> types.ReadResourceResult:
    """``resources/read`` of a link a result carried: the file, to its ``owner`` (:func:`owner_of`); -32602 for any
    other URI, a link of another client's, or one whose time has passed (one answer, so none is told apart)."""
    try:
        name, mime, data = artifacts.read(uri, owner, config.state, config.artifacts.ttl)
    except artifacts.ArtifactNotFound as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    found = Artifact(name=name, mime_type=mime, size=len(data), data=data)
    # A kept file may be read again until it expires: cacheable by this client only, for what is left of it at most.
    return types.ReadResourceResult(contents=[_contents(uri, found)], ttl_ms=0, cache_scope="private")


def structured(value: Any, modern: bool) -> Any:
    """``structuredContent`` for a client of the 2026-07-28 revision (``modern``): any JSON value; for an earlier one
    only an object (else None)."""
    return value if modern or isinstance(value, dict) else None
