"""Hot reload for ``toolexec mcp``: watch ``functions/tools/`` and ``config.yaml`` with watchfiles.

Only the directories themselves are watched (not recursively): a tool is a file directly in
``tools/`` and the config is one file, so build state, caches and virtual environments next
to them never wake the server. A change rebuilds incrementally (unchanged files keep their
declarations; a broken edit keeps serving the last good version) and announces list_changed
only when the offered tools differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from watchfiles import Change, awatch

if TYPE_CHECKING:
    from toolexec.mcp import ToolServer

# Editors write a file in several steps; changes closer together than this are one change.
DEBOUNCE_MS = 100


def relevant(changes: set[tuple[Change, str]], config_file: Path, tools_dir: Path) -> bool:
    """Whether any change touches the config file or a file directly in tools/."""
    for _, raw in changes:
        path = Path(raw)
        if path == config_file or path.parent == tools_dir:
            return True
    return False


async def watch_tools(server: ToolServer, stop: anyio.Event) -> None:
    """Reload ``server`` whenever its tools or config change; runs until ``stop`` is set (within one step) or it is
    cancelled (which waits for the watcher thread: set ``stop`` first)."""
    while not stop.is_set():
        config = server.config
        tools_dir, config_file = config.tools_dir, config.path
        paths = sorted({str(p) for p in (tools_dir, config_file.parent) if p.is_dir()})
        if not paths:
            return
        restart = False
        async for changes in awatch(
            *paths, recursive=False, debounce=DEBOUNCE_MS, step=20, ignore_permission_denied=True, stop_event=stop
        ):
            if relevant(changes, config_file, tools_dir):
                await server.reload()
                if server.config.tools_dir != tools_dir or server.config.path != config_file:
                    restart = True  # functions_dir moved: watch the new place
                    break
        if not restart:
            await anyio.sleep(0)
            return
