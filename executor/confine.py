"""The effective isolation policy of one call, turned into what the launch enforces.

The policy comes from :func:`toolexec.policy.effective` (config's per-tool policy, else the script's,
else the baseline under ``strict``); this module resolves its places against this config (the tool's
cache, the working directory, ``~``), adds what every confined call gets (a private ``/tmp``, its own
call files) and what none may touch (toolexec's config, tools, state and ``.env`` files, the
``sandbox_hide`` paths), and refuses what this host cannot enforce. The mechanism is
:mod:`toolexec.runtimes.sandbox`'s.
"""

from __future__ import annotations

import os

from toolexec.config import Config
from toolexec.errors import SandboxUnavailable
from toolexec.paths import user_cache_dir, user_config_dir
from toolexec.records import Sandbox
from toolexec.runtimes.sandbox import Confinement, problem


def confinement(config: Config, tool: str, policy: Sandbox, files: tuple[str, ...]) -> Confinement:
    """What a call of ``tool`` under ``policy`` may do, or :class:`SandboxUnavailable` when this host cannot enforce it."""
    if isinstance(policy.network, tuple):
        raise SandboxUnavailable(
            tool,
            f"network allow-lists ({', '.join(policy.network)}) are not supported yet; "
            f"declare network: all or none, or set sandbox_policies.{tool} in {config.path}",
        )
    state = config.state
    cache = str(state.tool_cache(tool))
    writes = policy.writes if policy.writes is not None else ("cache",)
    writable = [cache if place == "cache" else os.getcwd() if place == "cwd" else _expand(place) for place in writes]
    hidden = [_expand(path) for path in config.sandbox_hide]
    hidden += [str(config.path), str(config.functions_dir / ".env"), str(state.root / "cache"), str(user_config_dir())]
    if config.audit_log is not None:  # every call's arguments (when configured) and who made it
        hidden.append(str(config.audit_log))
    revealed = [_expand(path) for path in policy.reads] + [str(state.transpile_dir)]
    # The private /tmp would cover a working directory or HOME there: they are seen (read-only) as elsewhere.
    visible = [path for path in (os.getcwd(), os.path.expanduser("~")) if path.startswith("/tmp/")]
    if cache not in writable:
        revealed.append(cache)
    protected = [str(path) for path in (config.path, config.functions_dir, state.root, user_cache_dir())]
    found = Confinement(
        network="all" if policy.network == "all" else "none",
        visible=tuple(visible),
        writable=tuple(dict.fromkeys(writable)),
        files=files,
        protected=tuple(dict.fromkeys(protected)),
        hidden=tuple(dict.fromkeys(hidden)),
        revealed=tuple(dict.fromkeys(revealed)),
        memory=policy.memory,
        cpu=policy.cpu,
        processes=policy.processes,
        file_size=policy.file_size,
    )
    missing = problem(found)
    if missing is not None:
        raise SandboxUnavailable(tool, missing)
    return found


def _expand(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))
