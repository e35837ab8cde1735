"""Where a config's agents are, and their names: what ``toolexec list`` asks before it builds any agent's functions.

Kept apart from :mod:`toolexec.agents` (which builds and runs agents, and so imports the builder and the compilers):
a listing with no agent imports neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pathlib import Path

    from toolexec.config import Config

__all__ = ["DEFINITIONS", "Layout", "agent_names", "agents_dir"]

Layout = Literal["llm-functions", "loki"]
# The definition file of each layout, in the order they are looked for.
DEFINITIONS: dict[str, Layout] = {"index.yaml": "llm-functions", "config.yaml": "loki"}


def agents_dir(config: Config) -> Path | None:
    """Where the config's agents are (``agents_dir``, else found beside the functions), or None."""
    if config.agents_dir is not None:
        return config.agents_dir
    if config.embedded:
        return None
    for candidate in (config.functions_dir / "agents", config.functions_dir.parent / "agents"):
        if candidate.is_dir():
            return candidate
    return None


def agent_names(config: Config) -> list[str]:
    """Every agent of the config (a folder with a definition file), sorted."""
    found = agents_dir(config)
    if found is None:
        return []
    try:
        folders = sorted(p for p in found.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    return [p.name for p in folders if any((p / name).is_file() for name in DEFINITIONS)]
