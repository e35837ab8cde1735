"""MIME types of files toolexec hands on (a tool's result files, a tool's icon): from the bytes where it matters.

The image and audio types providers and MCP clients show are recognised by their magic numbers (:data:`MAGIC`), so a
file named ``.png`` that is not a PNG is never sent as an image; other types are guessed from the name
(:mod:`mimetypes`), ``text/plain`` for UTF-8 text without a known name, else ``application/octet-stream``. A table of a
dozen signatures, rather than libmagic or a pure-Python port of its database: these are the only types whose
handling changes with the answer, and a wrong guess for any other type costs nothing (it travels as a file).
"""

from __future__ import annotations

import mimetypes

# Magic numbers of the image and audio types providers and MCP clients show: (offset, bytes, MIME type).
MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (8, b"WEBP", "image/webp"),  # after RIFF....: checked with the RIFF header below
    (4, b"ftypavif", "image/avif"),
    (8, b"WAVE", "audio/wav"),
    (0, b"ID3", "audio/mpeg"),
    (0, b"OggS", "audio/ogg"),
    (0, b"fLaC", "audio/flac"),
    (4, b"ftypM4A", "audio/mp4"),
    (0, b"%PDF-", "application/pdf"),
)


def sniff(head: bytes, name: str) -> str:
    """The MIME type of a file whose first bytes are ``head`` (1 KiB: an SVG may open with a comment) and whose name
    is ``name``."""
    for offset, magic, mime in MAGIC:
        if head[offset : offset + len(magic)] == magic and (offset != 8 or head[:4] == b"RIFF"):
            return mime
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06:  # an MPEG audio frame
        return "audio/mpeg"
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed == "image/svg+xml":
        return guessed if b"<svg" in head.lower() or head.lstrip().startswith(b"<?xml") else "application/octet-stream"
    if guessed is not None and not guessed.startswith(("image/", "audio/")):  # those are believed of the bytes only
        return guessed
    if b"\0" not in head:
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 4:  # not a character cut at the end of the head
                return "application/octet-stream"
        return "text/plain"
    return "application/octet-stream"
