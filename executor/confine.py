"""The effective isolation policy of one call, turned into what the launch enforces.

The policy comes from :func:`toolexec.policy.effective` (config's per-tool policy, else the script's,
else the baseline under ``strict``); this module resolves its places against this config (the tool's
cache, the working directory, ``~``), adds what every confined call gets (a private ``/tmp``, its own
call files) and what none may touch (toolexec's config, tools, state and ``.env`` files, the
``sandbox_hide`` paths), and refuses what this host cannot enforce. The mechanism is
:mod:`toolexec.runtimes.sandbox`'s.
"""

from __future__ import annotations

import functools
import os
import re

from toolexec.config import Config
from toolexec.errors import SandboxUnavailable
from toolexec.paths import user_cache_dir, user_config_dir
from toolexec.records import Sandbox
from toolexec.runtimes.sandbox import Confinement, problem


def confinement(config: Config, tool: str, policy: Sandbox, files: tuple[str, ...], timeout: float | None = None) -> Confinement:
    """What a call of ``tool`` under ``policy`` may do, or :class:`SandboxUnavailable` when this host cannot enforce it.
    A limit the policy does not declare is the baseline's (CPU seconds from ``timeout``, the process cap)."""
    from toolexec.runtimes import baseline as defaults

    cache = str(config.state.tool_cache(tool))  # (per call: made again should it have gone)
    agents_hidden, agents_protected = agents_places(config)
    cwd = os.getcwd()
    key: tuple[object, ...] | None = (id(config), tool, policy, cache, cwd, agents_hidden, agents_protected)
    key = (*(key or ()), *map(os.environ.get, _PLACE_VARIABLES))
    try:
        kept = _resolved.get(key)
    except TypeError:  # (a policy that cannot be hashed: resolved each time)
        kept, key = None, None
    if kept is None or kept[0] is not config:
        kept = (config, _resolve(config, policy, cache, cwd, agents_hidden, agents_protected))
        if key is not None:
            if len(_resolved) >= 64:  # (a few configs and tools at a time, in practice)
                _resolved.clear()
            _resolved[key] = kept
    places, own = kept[1]
    # What the file system says is checked per call, whatever was resolved before
    writable = list(places.writable)
    _make_own(tool, list(own), writable)
    _not_through_links(tool, [*places.protected, *own], writable)
    found = Confinement(
        network=places.network,
        allowed=places.allowed,
        files=files,
        **{name: getattr(places, name) for name in _PLACES},
        memory=policy.memory,
        cpu=policy.cpu if policy.cpu is not None else defaults.cpu_seconds(timeout),
        processes=policy.processes if policy.processes is not None else defaults.processes(),
        file_size=policy.file_size,
    )
    missing = problem(found)
    if missing is not None:
        raise SandboxUnavailable(tool, missing)
    return found


# What the places of a confined call are resolved from besides the config, the tool, its policy and the working
# directory: ``~`` and the XDG folders (toolexec's own folders, a policy's ``~/…`` places)
_PLACES = ("visible", "writable", "protected", "hidden", "revealed")  # (tuples of paths)
_PLACE_VARIABLES = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME")
_Places = tuple[Confinement, tuple[str, ...]]  # the call's confinement but its files and limits; toolexec's own places
_resolved: dict[tuple[object, ...], tuple[Config, _Places]] = {}  # key -> (the config it was resolved for, its places)


def _resolve(
    config: Config, policy: Sandbox, cache: str, cwd: str, agents_hidden: tuple[str, ...], agents_protected: tuple[str, ...]
) -> _Places:
    """The confinement of a call under ``policy`` but its files, CPU and process limits, and toolexec's own places: strings
    made of the config, the policy, ``cwd`` and the environment alone (no file is looked at), so that a warm call
    reuses them (~0.15 ms of a strict call's own CPU); :func:`confinement` keys them by all of it."""
    state = config.state
    writes = policy.writes if policy.writes is not None else ("cache",)
    writable = [cache if place == "cache" else cwd if place == "cwd" else _expand(place) for place in writes]
    hidden = [_expand(path) for path in config.sandbox_hide]
    dotenv = [str(config.functions_dir / ".env"), str(config.functions_dir / "tools" / ".env")]  # (what dotenv_values reads)
    hidden += [str(config.path), *dotenv, *agents_hidden, str(state.root / "cache"), str(user_config_dir())]
    own = [str(user_cache_dir() / "one-shot"), str(user_config_dir()), *servers_folders()]
    hidden.append(own[0])  # the programs one-shot runs start early (toolexec.early)
    hidden += own[2:]
    if config.audit_log is not None:  # every call's arguments (when configured) and who made it
        hidden.append(str(config.audit_log))
    revealed = [_expand(path) for path in policy.reads] + [str(state.transpile_dir)]
    # The private /tmp would cover a working directory or HOME there: they are seen (read-only) as elsewhere.
    visible = [path for path in (cwd, os.path.expanduser("~")) if path.startswith("/tmp/")]
    if cache not in writable:
        revealed.append(cache)
    protected = [str(path) for path in (config.path, config.functions_dir, state.root, user_cache_dir())]
    protected += agents_protected
    found = Confinement(
        network="all" if policy.network == "all" else "none",
        allowed=policy.network if isinstance(policy.network, tuple) else (),
        visible=tuple(visible),
        writable=tuple(dict.fromkeys(writable)),
        protected=tuple(dict.fromkeys(protected)),
        hidden=tuple(dict.fromkeys(hidden)),
        revealed=tuple(dict.fromkeys(revealed)),
        memory=policy.memory,
        file_size=policy.file_size,
    )
    return found, tuple(own)


def agents_places(config: Config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What of the config's agents a confined tool may not touch: (what it may not read, what it may not write).

    Not read: the ``.env`` files of the agent served and of every other in the agents folder, and of their root,
    whether there yet or not (toolexec reads an agent's values from them, ``Agent.dotenv_files``; a confined tool gets
    only the values it declares, as of ``functions/.env``). Not written: the agents folder (their definitions and
    functions, which run unconfined unless they declare a policy), also when it lies beside the functions, under a
    working directory a policy writes. Listed once per state of the folder."""
    from toolexec.agent_folders import agents_dir

    served = tuple(str(path) for path in config.agent.dotenv_files) if config.agent is not None else ()
    found = agents_dir(config)
    try:
        info = os.stat(found) if found is not None else None
    except OSError:
        info = None
    if found is None or info is None:
        return served, ()
    key = (str(found), info.st_dev, info.st_ino, info.st_mtime_ns)
    listed = _agents_dotenv.get(key)
    if listed is None:
        try:
            names = sorted(entry.name for entry in os.scandir(found) if entry.is_dir())
        except OSError:
            names = []
        listed = (str(found.parent / ".env"), *(str(found / name / ".env") for name in names))
        _agents_dotenv.clear()  # (one config's folder at a time, in practice)
        _agents_dotenv[key] = listed
    return tuple(dict.fromkeys((*served, *listed))), (str(found),)


_agents_dotenv: dict[tuple[object, ...], tuple[str, ...]] = {}


def _make_own(tool: str, places: list[str], writable: list[str]) -> None:
    """Make those of toolexec's own folders (``places``) that lie in a place the call may write (``writes: ~/``) and
    are not there yet (0700, as toolexec makes them): a cover or a read-only bind is put only on what is there, and
    a tool could make a missing one itself, with what toolexec would read from it next (a memo a one-shot run
    starts unconfined, a config, a server's token). Checked per call: one ``stat`` each, only under such a policy."""
    for place in places:
        if any(place == top or place.startswith(top.rstrip("/") + "/") for top in writable) and not os.path.lexists(place):
            try:
                os.makedirs(place, mode=0o700, exist_ok=True)
            except OSError as error:  # (fail closed: the call is refused rather than run with the place uncovered)
                raise SandboxUnavailable(tool, f"cannot make {place} to cover it: {error.strerror}") from error


def _not_through_links(tool: str, places: list[str], writable: list[str]) -> None:
    """Refuse a call that could re-point what names toolexec's own ``places``: one that is, or is reached through, a
    link that lies in a place the call may write (``~/.cache`` a link, under ``writes: ~/``; a functions folder
    linked into the working directory, under ``writes: cwd``). A cover or a read-only bind holds the
    link's target, and a mount on each folder between holds those (:func:`toolexec.runtimes.sandbox._pins`), but a
    link is not a mount point: the tool could replace it, and toolexec would read its own files from the tool's next.
    Checked per call: one ``lstat`` per folder between, only under such a policy."""
    for place in places:
        for top in writable:
            top = top.rstrip("/") or "/"
            prefix = top if top == "/" else top + "/"  # (``writes: /`` holds every place)
            if not place.startswith(prefix):
                continue
            between = place  # (itself too: a link there is re-pointed as easily)
            while between != top and between.startswith(prefix):
                if os.path.islink(between):
                    raise SandboxUnavailable(
                        tool,
                        f"{place} is reached through the link {between}, which its policy lets it write (and so "
                        f"re-point); write to a place that does not hold toolexec's files, or make {between} a folder",
                    )
                between = os.path.dirname(between)


def servers_folders() -> list[str]:
    """Where toolexec's servers keep their sockets, locks and the generated MCP bearer token, in both places either
    may be (:func:`toolexec.serve_client.socket_folder`, :func:`toolexec.mcp_http.token_file`): the runtime folder's
    and the state folder's ``toolexec``. Whoever reads the token calls every tool over HTTP, unconfined by this one's
    policy; none of it is a tool's business."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return [os.path.join(_expand(folder), "toolexec") for folder in (runtime, state) if folder]


def _expand(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


@functools.cache
def _denials() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """How a refused write reads in each language's own error (Python, Bash and coreutils, Node.js), with the path;
    and what a refused connection or name lookup says without a network (Python, curl, Node.js, glibc). Compiled on
    first use (~0.4 ms, which a call with nothing to note, and every process that never confines one, does without)."""
    write_denied = re.compile(
        r"""(?:
            (?:Read-only\ file\ system|Permission\ denied)(?:\]|:)?\s*:?\s*['"]?(?P<a>/[^'"\n,]+)
          | (?P<b>/[^'"\n:]+)['"]?:\s*(?:Read-only\ file\ system|Permission\ denied)
          | (?:EROFS|EACCES):\ [^,\n]*,\ \w+\ '(?P<c>/[^'\n]+)'
        )""",
        re.VERBOSE | re.IGNORECASE,
    )
    network_denied = re.compile(
        r"Network is unreachable|ENETUNREACH|Connection refused|ECONNREFUSED|Temporary failure in name resolution"
        r"|Name or service not known|Could not resolve host|EAI_AGAIN|getaddrinfo|No address associated with hostname"
        r"|Failed to connect",
        re.IGNORECASE,
    )
    return write_denied, network_denied


def denial_notes(confined: Confinement, policy: Sandbox, text: str, source: str) -> list[str]:
    """Notes naming the policy line that denied what the tool's own error (``text``: its stderr and reported
    failure) says, where its words tell: a write refused under a path outside ``writes``, a connection or name
    lookup that failed under ``network: none``. The error itself is left as it is; ``source`` says where the
    policy came from (the script, config's ``sandbox_policies``, the strict baseline)."""
    if confined.baseline or not text:
        return []
    notes = []
    seen: set[str] = set()
    write_denied, network_denied = _denials()
    for found in write_denied.finditer(text):
        path = os.path.normpath((found.group("a") or found.group("b") or found.group("c")).strip())
        allowed = (*confined.writable, *confined.files, "/tmp")
        if path in seen or any(path == top or path.startswith(top.rstrip("/") + "/") for top in allowed):
            continue
        seen.add(path)
        writes = ", ".join(policy.writes if policy.writes is not None else ("cache",)) or "none"
        notes.append(
            f"sandbox: writing {path} is outside this tool's `writes: {writes}` ({source}); only those places, its "
            "private /tmp and LLM_OUTPUT are writable"
        )
    if confined.network == "none" and network_denied.search(text):
        notes.append(f"sandbox: this tool runs under `network: none` ({source}): no connection or name lookup can succeed")
    return notes
