"""The files of a result (:class:`~toolexec.records.Artifact`) in each provider's tool-result shape, where it has one.

What each format can carry in a tool result (checked against the SDKs in the ``test`` extra):

========================  ==============================================================================
Anthropic ``tool_result``  ``image`` blocks (PNG, JPEG, GIF, WebP) and ``document`` blocks (PDF), base64
OpenAI Responses           ``input_image`` (a ``data:`` URL) and ``input_file`` (PDF) items in ``output``
Gemini                     ``functionResponse.parts`` with ``inlineData`` (images and PDF)
MCP (``--format mcp``)     ``image`` and ``audio`` content, other files as embedded resources
OpenAI Chat Completions    text only: a tool message cannot hold an image
========================  ==============================================================================

Only files carried in the result itself (``data``) are sent; a file kept on disk (past ``artifacts.inline_bytes``),
and a type a format cannot carry, is named in a text line instead (:func:`described`), with its path when it has
one, so that the model (or the program) knows it exists.
"""

from __future__ import annotations

import base64

from toolexec.records import Artifact

# What each format takes as a file, by MIME type.
ANTHROPIC_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
RESPONSES_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
GEMINI_FILES = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif", "application/pdf"})
PDF = "application/pdf"


def encoded(artifact: Artifact) -> str:
    """The file's bytes as base64 text (only for a file carried in the result)."""
    assert artifact.data is not None
    return base64.b64encode(artifact.data).decode("ascii")


def carried(artifact: Artifact, types: frozenset[str]) -> bool:
    """Whether ``artifact`` is in the result itself and of one of ``types``."""
    return artifact.data is not None and artifact.mime_type in types


def described(artifact: Artifact, format_name: str) -> str:
    """The line a model reads for a file the format does not carry."""
    shown = f"[file {artifact.name} ({artifact.mime_type}, {artifact.size} bytes)"
    if artifact.path is not None:
        return f"{shown} kept at {artifact.path}]"
    return f"{shown}: not sent, {format_name} tool results cannot carry this type]"


def text_with_descriptions(text: str, artifacts: tuple[Artifact, ...], format_name: str, types: frozenset[str]) -> str:
    """``text`` followed by a line for each file not carried (every file, for a text-only format)."""
    lines = [described(a, format_name) for a in artifacts if not carried(a, types)]
    return "\n".join([text, *lines]) if text else "\n".join(lines)


def as_text(artifact: Artifact) -> str | None:
    """The file as text when its type is a text type and its bytes are UTF-8, else None."""
    mime = artifact.mime_type
    if artifact.data is None or not (
        mime.startswith("text/") or mime in ("application/json", "application/xml", "image/svg+xml")
    ):
        return None
    try:
        return artifact.data.decode("utf-8")
    except UnicodeDecodeError:
        return None
