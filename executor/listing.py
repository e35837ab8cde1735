"""What ``toolexec list`` prints, rendered from the catalog's index rows and kept beside the catalog.

Listing 10,000 tools renders 10,000 lines; the text is kept (in the state's private folder, one file) under a key
naming everything it was rendered from: the catalog's index as read (its identity, the digest of the visible files'
stats, its pack and fingerprint), the config values the lines show (enabled tools and aliases, sandbox mode and
policies) and the options. A later ``list`` whose freshness check finds the same catalog prints the kept text without
reading a row: after the one stat per visible file that the check costs, a listing costs about the same whatever the
number of tools. Anything that changes a line changes the key (an edited file changes its stat, so the digest; a
config edit changes the values), and a listing that cannot be keyed (registered tools, agents' functions, a catalog
not saved) is rendered every time.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import stat

from toolexec.api import Executor
from toolexec.policy import unconfined
from toolexec.records import Sandbox
from toolexec.state import sha256_hex, write_text_atomic
from toolexec.version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TextIO

    from toolexec.config import Config

__all__ = ["listed", "render", "show"]

KEPT_FILE = "listing.txt"


def listed(
    executor: Executor, *, enabled_only: bool, tags: list[str], as_json: bool, extra: list[dict[str, Any]]
) -> tuple[str | bytes, int]:
    """The text ``toolexec list`` prints (``extra``: rows appended after the tools', the agents' functions) and how
    many tools it lists (``extra`` not counted). Kept text comes as the UTF-8 bytes it was kept as (:func:`show`
    prints them undecoded)."""
    key = None if extra else _key(executor, enabled_only=enabled_only, tags=tags, as_json=as_json)
    kept = executor.config.state.private_dir / KEPT_FILE
    if key is not None:
        found = _read_kept(str(kept), key)
        if found is not None:
            return found
    rows = tool_rows(executor, enabled_only=enabled_only, tags=tags)
    count = len(rows)
    text = render([*rows, *extra], executor.config, as_json=as_json)
    if key is not None and count:
        with contextlib.suppress(OSError, UnicodeError):  # a listing that cannot be kept is rendered next time
            kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_text_atomic(kept, f"{key} {count}\n{text}")
    return text, count


def tool_rows(executor: Executor, *, enabled_only: bool, tags: list[str]) -> list[dict[str, Any]]:
    """:meth:`Executor.listing` with whether each tool is enabled and why, and why its calls run unconfined."""
    rows = executor.listing(enabled_only=enabled_only, tags=tags)
    config = executor.config
    for row in rows:
        row["enabled"], row["enabled_why"] = config.enabling(row["name"])
        # why its calls run unconfined (None: confined, or it does not build), from the index row alone
        declared = Sandbox() if row.pop("declares_sandbox", False) else None  # (only whether it declares one counts)
        row["unconfined"] = (
            unconfined(config.sandbox, config.sandbox_policies, row["name"], declared) if row["error"] is None else None
        )
    return rows


def render(rows: list[dict[str, Any]], config: Config, *, as_json: bool) -> str:
    """The rows as ``toolexec list`` prints them: a JSON array, or one aligned line per tool."""
    if as_json:
        text = json.dumps(rows, ensure_ascii=False, indent=2)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escaped
            text = json.dumps(rows, indent=2)
        return text + "\n"
    width = max((len(row["name"]) for row in rows), default=0)
    lines = []
    for row in rows:
        if row["error"] is None:
            summary = row["summary"] or row["description"].strip().split("\n", 1)[0]
            summary += f"  [{', '.join(row['tags'])}]" if row["tags"] else ""
        else:
            summary = "FAILED TO BUILD: " + row["error"].split("\n", 1)[0]
        summary = summary if row["enabled"] else f"(not enabled) {summary}"
        summary += "  (unconfined: sandbox: off)" if config.sandbox == "off" and row.get("unconfined") else ""
        summary += "  (unconfined: declares no sandbox policy)" if config.sandbox != "off" and row.get("unconfined") else ""
        lines.append(f"{row['name']:<{width}}  {row['language']:<10}  {summary}\n")
    return "".join(lines)


def _key(executor: Executor, *, enabled_only: bool, tags: list[str], as_json: bool) -> str | None:
    """What the listing is rendered from, as one digest; None when it cannot be named (then it is not kept).

    This is the listing's one freshness check (:meth:`PolledSource.catalog`): the catalog it returns is the
    index as read, or as just written by a rebuild.
    """
    source = executor.source
    if source.registered:
        return None
    catalog = source.catalog()
    stored, config = catalog.stored, executor.config
    if stored is None:
        return None
    shown = (config.enabled_tools, config.mapping_tools, config.embedded, config.foreign, config.enabled_given)
    parts = (
        *(__version__, str(config.path), catalog.fingerprint, catalog.pack, stored.identity, stored.files, stored.tally),
        *(shown, config.sandbox, config.sandbox_policies, enabled_only, tags, as_json),
    )
    return sha256_hex(repr(parts).encode("utf-8", "surrogateescape"))


def show(text: str | bytes, stream: TextIO) -> None:
    """Print what :func:`listed` returned on ``stream``: bytes as they are when it writes UTF-8 (10,000 lines are
    neither decoded nor encoded again), else decoded and written as text."""
    if isinstance(text, bytes):
        buffer = getattr(stream, "buffer", None)
        if buffer is not None and codecs.lookup(stream.encoding or "ascii").name == "utf-8":
            stream.flush()
            buffer.write(text)
            return
        text = text.decode("utf-8", "replace")
    stream.write(text)


def _read_kept(path: str, key: str) -> tuple[bytes, int] | None:
    """The kept text (UTF-8) and its count when it was kept under ``key``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)  # never a link, never waiting
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # (before open(), which leaves a folder's descriptor open)
            return None
        with open(fd, "rb", closefd=False) as handle:
            data = handle.read()
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        end = data.find(b"\n")
        found, _, count = data[: max(end, 0)].decode("ascii").partition(" ")
        if end < 0 or found != key:
            return None
        return data[end + 1 :], int(count)
    except ValueError:  # (a decoding error too)
        return None
