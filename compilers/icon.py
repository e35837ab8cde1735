"""A tool's icon (Python ``Icon: ./icon.svg``, Bash ``# @meta icon ./icon.svg``, JSDoc ``@icon``, a module tool's
``icon``): a file beside the script, made into the ``data:`` URI an MCP client shows.

The path is checked where it is written (:func:`path_problem`, a compile error: relative, inside the script's folder,
an image type MCP clients show). The file is read once the script has compiled (:func:`resolved`): it must be a
regular file inside the script's folder once links are resolved (else a compile error: an icon is no way to read
another file), at most :data:`ICON_LIMIT` bytes, and its bytes must be of the type its name says; a missing, oversize
or mistyped icon is a warning and the tool builds without one (an icon is decoration, never a reason a tool is
missing). The icon is read when the script compiles: after changing only the icon, touch the script.
"""

from __future__ import annotations

import base64
import os
import posixpath
import stat

from toolexec.errors import CompileError, Problem
from toolexec.mediatype import sniff
from toolexec.records import ToolDeclaration
from toolexec.recordtype import replace

ICON_LIMIT = 32 * 1024  # every tools/list page carries every icon of its tools
ICON_TYPES = {
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot name an icon, or None."""
    if path.startswith(("/", "~")) or "\\" in path or ":" in path or "\0" in path:
        return "must be a path relative to the script"
    if ".." in path.split("/"):
        return "must stay inside the script's folder (no '..')"
    if posixpath.splitext(path)[1].lower() not in ICON_TYPES:
        return "is not an SVG, PNG, JPEG, GIF or WebP file (by its extension)"
    return None


def resolved(declaration: ToolDeclaration, path: str, source: str) -> ToolDeclaration:
    """``declaration`` with its icon's path replaced by the file's ``data:`` URI, or left out with a warning."""
    declared = declaration.metadata.icon
    if declared is None or declared.startswith("data:"):
        return declaration
    line = next((n for n, text in enumerate(source.split("\n"), 1) if declared in text), 1)
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    target = os.path.realpath(os.path.join(folder, declared))
    if os.path.commonpath([folder, target]) != folder:
        problem = Problem(
            path, line, 1, f"icon {declared!r} is a link out of the script's folder", "copy the image beside the script"
        )
        raise CompileError(path, [problem], name=declaration.name)
    mime = ICON_TYPES[posixpath.splitext(declared)[1].lower()]
    data, why = _read(target)
    if why is None and sniff(data[:1024], declared) != mime:
        why = f"is not a {mime} file (by its bytes)"
    if why is not None:
        warning = Problem(
            path, line, 1, f"icon {declared!r} {why}; the tool has no icon", "fix the file or the path", severity="warning"
        )
        metadata = replace(declaration.metadata, icon=None)
        return replace(declaration, metadata=metadata, warnings=(*declaration.warnings, str(warning)))
    uri = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return replace(declaration, metadata=replace(declaration.metadata, icon=uri))


def _read(target: str) -> tuple[bytes, str | None]:
    """The file's bytes, or why it cannot be the icon."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return b"", "is not there"
    except OSError as exc:
        return b"", f"cannot be read ({exc.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return b"", "is not a regular file"
        if st.st_size > ICON_LIMIT:
            return b"", f"is {st.st_size} bytes, over the {ICON_LIMIT} an icon may be"
        return os.read(fd, ICON_LIMIT), None
    finally:
        os.close(fd)
