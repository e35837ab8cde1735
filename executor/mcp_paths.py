"""What an MCP client is never told: the server's own paths, in errors and notes toolexec writes.

A client sees ``tools/greet.py:1:1: syntax error …`` where the server's log says
``/srv/project/functions/tools/greet.py:1:1: …``: the tools folder is ``tools``, the functions folder ``functions``,
the config file its name, toolexec's state ``<state>``, the config's folder ``.``, the home folder ``~``. A tool's
own output is its data and is never changed.
"""

from __future__ import annotations

from pathlib import Path

from toolexec.config import Config

__all__ = ["private_paths", "scrub"]


def private_paths(config: Config) -> list[tuple[str, str]]:
    """The server's paths a client is never told, each with what it is shown as instead; longest first."""
    pairs = [  # where two are one folder, the later name wins
        (Path.home(), "~"),
        (config.path.parent, "."),
        (config.state_dir, "<state>"),
        (config.functions_dir, "functions"),
        (config.tools_dir, "tools"),
        (config.path, config.path.name),
    ]
    found = {str(variant): shown for path, shown in pairs for variant in (path, path.resolve())}
    return sorted(((p, s) for p, s in found.items() if p not in ("", "/")), key=lambda pair: -len(pair[0]))


def scrub(text: str, config: Config) -> str:
    """``text`` with every one of the server's paths (:func:`private_paths`) replaced by what a client is shown."""
    for path, shown in private_paths(config):
        text = text.replace(path, shown)
    return text
