"""``config.yaml``: where it is found, what it may say, and the resulting :class:`Config`.

Lookup order: ``--config``, ``$TOOLEXEC_CONFIG``, ``./config.yaml`` when it is a toolexec
config (it has ``visible_tools`` or ``functions_dir``), ``$XDG_CONFIG_HOME/toolexec/config.yaml``,
then the embedded default. A parsed
copy is kept in the user cache keyed by the file's identity, size, mtime and ctime, so that a
call does not pay for a YAML parser when nothing changed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from functools import cached_property
from pathlib import Path

from toolexec.errors import ConfigError, brief, did_you_mean
from toolexec.paths import package_defaults, user_cache_dir, user_config_dir
from toolexec.policy import DEFAULT_HIDE, SANDBOX_MODES, words
from toolexec.policy import from_mapping as read_policy
from toolexec.records import LANGUAGES, Sandbox, limit_problem
from toolexec.recordtype import field, record, replace
from toolexec.state import State, config_snapshot, prime_digest, sha256_hex, write_json_atomic

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any, NamedTuple

    from toolexec.agents import Agent
    from toolexec.mcp_settings import McpAuth

# A config.yaml found in the working directory is toolexec's only when it has one of these.
OWN_KEYS = ("visible_tools", "functions_dir")

DEFAULTS: dict[str, Any] = {
    "functions_dir": "functions",
    "visible_tools": [],
    "enabled_tools": "all",
    "mapping_tools": {},
    "runtimes": {},
    "timeout": 60,
    "max_output_bytes": 1 << 20,
    "max_parallel": 8,
    "mcp": {},
    "max_kept_bytes": 1 << 30,
    "max_cache_bytes": 1 << 30,
    "secret_env": [],
    "agents_dir": None,
    "agent_variables": {},
    "sandbox": "declared",
    "sandbox_policies": {},
    "sandbox_hide": list(DEFAULT_HIDE),
    "artifacts": {},
    "audit_log": None,
    "tool_limits": {},
    "warm_tools": [],
    "warm_max": 8,
    "warm_idle": 300,
}
MAX_PARALLEL = 1024
MCP_KEYS = (
    "token_env",
    "allowed_hosts",
    "allowed_origins",
    "page_size",
    "auth",
    "cwd",
    "state_key_env",
    "task_store",
    "task_ttl",
)
# How long a task's record (its status and result) is kept after it is created, besides its time limit; at most a week.
TASK_TTL, MAX_TASK_TTL = 3600.0, 7 * 86400.0


@record
class McpSettings:
    """The ``mcp:`` section: what ``toolexec mcp`` needs beyond the tools."""

    # The environment variable holding the bearer token HTTP clients must send.
    token_env: str | None = None
    # The environment variable holding the key that seals a question's requestState (replicas share it).
    state_key_env: str | None = None
    # Extra Host / Origin header values the HTTP server accepts (behind a proxy), besides loopback ones.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    page_size: int = 100
    # An OAuth 2.1 resource server instead of the static token (docs/mcp.md#oauth); the folder tool calls start in.
    auth: McpAuth | None = None
    cwd: Path | None = None

    # Where task state lives: dir:PATH (relative to the config file) or redis://HOST:PORT/DB; None: the state
    # directory's cache/.tasks (shared by replicas that share the functions directory).
    task_store: str | None = None
    # Seconds a task's record is kept, counted from its creation, on top of the call's own time limit.
    task_ttl: float = TASK_TTL


ARTIFACT_KEYS = ("max_files", "max_bytes", "inline_bytes", "ttl")


@record
class ArtifactSettings:
    """The ``artifacts:`` section: what one call may return through ``LLM_ARTIFACTS_DIR`` (docs/mcp.md)."""

    max_files: int = 32  # files past this many (in name order) are dropped, with a note
    max_bytes: int = 64 << 20  # total bytes returned per call; a file that would pass it is dropped, with a note
    inline_bytes: int = 4 << 20  # total bytes carried in the result itself; larger files are kept and linked
    ttl: float = 3600.0  # seconds a kept (linked) file stays readable


# An llm-functions checkout lists its visible tools here, one file name a line.
TOOLS_TXT = "tools.txt"


if TYPE_CHECKING:

    class Located(NamedTuple):
        """Where the config was found: its path, whether it is the embedded default, and why (``--verbose``)."""

        path: Path
        embedded: bool
        trail: tuple[str, ...]

else:  # the same tuple, made without importing typing
    from collections import namedtuple

    Located = namedtuple("Located", ["path", "embedded", "trail"])
    Located.__doc__ = "Where the config was found: its path, whether it is the embedded default, and why (``--verbose``)."


@record
class Config:
    """A validated config: every key resolved (paths absolute, names split, limits checked)."""

    path: Path
    functions_dir: Path
    visible_tools: tuple[str, ...]
    # None means every visible tool; otherwise names and mapping aliases, unexpanded (empty: none).
    enabled_tools: tuple[str, ...] | None
    mapping_tools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    runtimes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    timeout: float = 60.0
    max_output_bytes: int = 1 << 20
    max_parallel: int = 8
    mcp: McpSettings = field(default_factory=McpSettings)
    # What one call may keep on disk of its full stdout and stderr (beyond max_output_bytes); the rest is dropped.
    max_kept_bytes: int = 1 << 30
    # What each tool's LLM_TOOL_CACHE_DIR may hold; a call that finds it fuller, or fills it past this, is stopped.
    max_cache_bytes: int = 1 << 30
    # Names (or fnmatch patterns) of variables a tool never receives, besides mcp.token_env (see secret_names).
    secret_env: tuple[str, ...] = ()
    embedded: bool = False
    # Where agents live (``agents_dir``); None: found beside the functions (see :mod:`toolexec.agents`).
    agents_dir: Path | None = None
    # Values of agents' variables: agent name -> variable name -> value.
    agent_variables: dict[str, dict[str, str]] = field(default_factory=dict)
    # The agent this config serves (``--agent``): its functions and shared tools are the visible tools.
    agent: Agent | None = None
    # The settings of other applications (Loki, Coyote, AIChat) the file holds, ignored; a config with any is
    # read as theirs: no enabled_tools means no tool enabled, as there.
    foreign: tuple[str, ...] = ()
    # Whether the file sets enabled_tools (when it does not, the default applies: all, or none in a foreign config).
    enabled_given: bool = False
    # Isolation (docs/sandbox.md): off | declared (tools that declare a policy are confined) | strict (every tool).
    sandbox: str = "declared"
    # Per-tool policies that replace what the script declares (the user is the authority).
    sandbox_policies: dict[str, Sandbox] = field(default_factory=dict)
    # The paths a confined tool does not see unless it declares it reads them (``~`` expanded at the call).
    sandbox_hide: tuple[str, ...] = DEFAULT_HIDE
    # What a call may return as files (LLM_ARTIFACTS_DIR): counts, sizes, how long linked ones are kept.
    artifacts: ArtifactSettings = field(default_factory=ArtifactSettings)
    # The audit log (docs/operations.md): one JSON line per call appended here; None: no audit log.
    audit_log: Path | None = None
    # Whether the audit lines hold the arguments themselves (else only their digest).
    audit_arguments: bool = False
    # Per-tool caps that replace the script's (tool name -> {"max_concurrency": N, "rate": "N/unit"}).
    tool_limits: dict[str, dict[str, int | str]] = field(default_factory=dict)
    # Tools that run warm (docs/performance.md) besides those whose script says so ("all": every tool that can).
    warm_tools: tuple[str, ...] = ()
    # At most this many warm servers at once; each stopped after warm_idle seconds without a call.
    warm_max: int = 8
    warm_idle: float = 300.0
    # How the file was found and which candidates were skipped, for ``--verbose``.
    lookup: tuple[str, ...] = field(default=(), compare=False)

    @property
    def tools_dir(self) -> Path:
        """The ``tools/`` folder inside the functions directory."""
        return self.functions_dir / "tools"

    @cached_property
    def state(self) -> State:
        """Where generated files go (see :mod:`toolexec.state`).

        Decided once per config, so a call neither repeats the check nor sees the catalog move. An
        agent's catalog is kept apart, in ``cache/.agents/<agent>`` of the functions' state.
        """
        state = State.for_functions(self.functions_dir, embedded=self.embedded)
        if self.agent is not None:
            return State(state.root / "cache" / ".agents" / self.agent.name)
        return state

    @property
    def trusted_paths(self) -> tuple[Path, ...]:
        """What toolexec reads and trusts, which the file built-ins must not change: this config file, a
        ``config.yaml`` in the working directory (the lookup may pick it), the functions directory (tools,
        ``.env`` files), the state directory and toolexec's user config and cache folders."""
        try:
            working: tuple[Path, ...] = (Path.cwd() / "config.yaml",)
        except OSError:  # the working directory was removed: no config can be found there
            working = ()
        config, *others = self._trusted_by_config
        return (config, *working, *others)

    @cached_property
    def _trusted_by_config(self) -> tuple[Path, ...]:
        """The :attr:`trusted_paths` that follow from the config alone, worked out once per config (a call reads them)."""
        # an agent's folder (its tools file, definition and .env) and the .env beside agents/ are read and trusted too
        agent = (self.agent.directory, *self.agent.dotenv_files) if self.agent is not None else ()
        return (self.path, self.functions_dir, *agent, self.state.root, user_config_dir(), user_cache_dir())

    @property
    def state_dir(self) -> Path:
        """The root of :attr:`state`."""
        return self.state.root

    def secret_names(self) -> tuple[str, ...]:
        """What no tool receives from toolexec's environment: ``secret_env`` and the MCP token's variable."""
        token = (self.mcp.token_env,) if self.mcp.token_env else ()
        introspection = self.mcp.auth.introspection if self.mcp.auth is not None else None
        secret = (introspection.client_secret_env,) if introspection is not None and introspection.client_secret_env else ()
        key = (self.mcp.state_key_env,) if self.mcp.state_key_env else ()
        return (*self.secret_env, *token, *secret, *key)

    def enabling(self, name: str) -> tuple[bool, str]:
        """Whether the visible tool ``name`` is enabled, and why (``toolexec list --verbose``, refusals)."""
        if self.enabled_tools is None:
            return True, "enabled: enabled_tools is all" if self.enabled_given else "enabled: no enabled_tools (the default: all)"
        if name in self.enabled_tools and name not in self.mapping_tools:
            return True, "enabled by enabled_tools"
        alias = next((a for a in self.enabled_tools if name in self.mapping_tools.get(a, ())), None)
        if alias is not None:
            return True, f"enabled by enabled_tools, through the mapping_tools alias {alias!r}"
        if self.embedded:
            return False, "not enabled: the embedded default config enables only tools that modify nothing"
        if self.foreign and not self.enabled_given:
            return False, f"not enabled: a {_owners(self.foreign)} config with no enabled_tools enables none, as there"
        return False, "not enabled: not in enabled_tools"

    def fingerprint(self) -> dict[str, Any]:
        """What the catalog depends on: a change here means rebuild."""
        # the visible files by their digest: an index's first line stays small (and quick to read) with 10,000 tools
        visible = sha256_hex(_visible_bytes(self.visible_tools))
        found = {"functions_dir": str(self.functions_dir), "visible_tools": visible}
        return {**found, **self.agent.fingerprint()} if self.agent is not None else found


def _visible_bytes(visible: tuple[str, ...]) -> bytes:
    return "\0".join(visible).encode("utf-8", "surrogateescape")


def locate(explicit: str | os.PathLike[str] | None = None) -> Located:
    """The config file to use, whether it is the embedded default, and why (for ``--verbose``)."""
    for given, origin in ((explicit, "--config"), (os.environ.get("TOOLEXEC_CONFIG"), "TOOLEXEC_CONFIG")):
        if given:
            path = Path(given).expanduser()
            if not path.is_file():
                raise ConfigError(str(path), f"config file not found (from {origin})")
            return Located(path.resolve(), False, (f"using {path.resolve()} (from {origin})",))
    trail: list[str] = []
    working = Path("config.yaml")
    if working.is_file():
        why_not = _not_ours(working.resolve())
        if why_not is None:
            return Located(working.resolve(), False, (f"using {working.resolve()} (config.yaml in the working directory)",))
        trail.append(f"skipped {working.resolve()}: {why_not}")
    user = user_config_dir() / "config.yaml"
    if user.is_file():
        return Located(user.resolve(), False, (*trail, f"using {user.resolve()} (the user config)"))
    trail.append(f"no user config at {user}")
    embedded = package_defaults() / "config.yaml"
    return Located(embedded, True, (*trail, f"using {embedded} (the embedded default: read-only tools only)"))


def _not_ours(path: Path) -> str | None:
    """Why a ``config.yaml`` found in the working directory is not toolexec's, or None when it is."""
    try:
        data = _read(path)
    except ConfigError as error:
        return f"not a toolexec config ({error})"
    if not any(key in data for key in OWN_KEYS):
        return f"not a toolexec config (it has neither {' nor '.join(OWN_KEYS)})"
    return None


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    """Locate, read and validate the config (see :func:`locate` for the lookup order)."""
    located = locate(explicit)
    data = _read(located.path)
    config = from_mapping(data, located.path, embedded=located.embedded)
    notes: tuple[str, ...] = ()
    if config.foreign:
        notes += (f"ignored settings of {_owners(config.foreign)} (toolexec does not use them): {', '.join(config.foreign)}",)
        if not config.enabled_given:
            notes += ("no tool is enabled: a config of those applications with no enabled_tools enables none, as there",)
    if data.get("visible_tools") is None and (config.functions_dir / TOOLS_TXT).is_file():
        notes += (f"visible tools from {config.functions_dir / TOOLS_TXT} (no visible_tools in the config)",)
    return replace(config, lookup=(*located.trail, *notes))


# What a ``toolexec serve`` child waiting for its call read ahead (:func:`prime`): the config file's key and parsed
# mapping, taken by the call's :func:`_read` once (and only while the file is the one that was read).
_primed: dict[str, tuple[list[Any], dict[str, Any]]] = {}


def prime(path: str | os.PathLike[str]) -> Config:
    """Read the config at ``path`` (resolved) ahead of a call that will likely read it: the next :func:`_read` of
    that unchanged file takes the mapping read here, once, instead of reading and parsing the file again, and the
    fingerprint of its visible tools is computed ahead (:func:`toolexec.state.prime_digest`). For a process that makes
    one call (``toolexec serve``'s child, while it waits): a long-lived one reads anew each time. The config, as read."""
    found = Path(path)
    config = load_config(found)  # (a mapping of its own: the one kept is the call's alone)
    _primed[str(found)] = _read_keyed(found)
    prime_digest(_visible_bytes(config.visible_tools))
    return config


def _read(path: Path) -> dict[str, Any]:
    """The parsed YAML mapping, from a snapshot keyed by the file's identity, size, mtime and ctime when there is one
    (ctime: a file put back with an old mtime, ``cp -p``, ``rsync -t``, ``tar x``, still changes it)."""
    return _read_keyed(path)[1]


def _read_keyed(path: Path) -> tuple[list[Any], dict[str, Any]]:
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read the config file: {exc.strerror}") from None
    key: list[Any] = [str(path), stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size]
    primed = _primed.pop(str(path), None)
    if primed is not None and primed[0] == key:
        return primed
    snapshot = config_snapshot(path)
    try:
        cached = json.loads(snapshot.read_text(encoding="utf-8"))
        if cached.get("key") == key:
            return key, cached["data"]
    except (OSError, ValueError, AttributeError):
        pass
    data = _parse_yaml(path)
    with contextlib.suppress(OSError, TypeError, ValueError):  # an optimisation: a read-only cache is fine
        write_json_atomic(snapshot, {"key": key, "data": data})
    return key, data


MAX_ALIASES = 100  # a config has no use for more; an alias bomb expands to gigabytes
MAX_VALUES = 100_000  # values in the loaded config once aliases are expanded


def _expands_beyond(data: Any, cap: int) -> bool:
    """Whether ``data``, walked as JSON would write it (shared aliases once per use), has more than ``cap`` values."""
    stack, seen = [data], 0
    while stack:
        value = stack.pop()
        seen += 1
        if seen > cap:
            return True
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def _parse_yaml(path: Path) -> dict[str, Any]:
    import yaml

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    raise ConfigError(str(path), f"more than {MAX_ALIASES} YAML aliases (*name); write the values out")
            return super().compose_node(parent, index)

    try:
        loader = Loader(path.read_text(encoding="utf-8"))
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except RecursionError:
        raise ConfigError(str(path), "nested too deeply to be a config") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise ConfigError(str(path), f"holds a value YAML cannot load: {str(exc).split(';')[0]}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(where, f"not valid YAML: {getattr(exc, 'problem', exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read the config file: {exc}") from None
    if _expands_beyond(data, MAX_VALUES):
        raise ConfigError(str(path), f"its aliases expand to more than {MAX_VALUES} values; write the values out")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), f"expected a mapping of settings at the top level, got {type(data).__name__}")
    return data


def from_mapping(data: dict[str, Any], path: Path, *, embedded: bool = False) -> Config:
    """Validate a parsed config mapping into a :class:`Config`; ConfigError names the key and the file."""
    where = str(path)
    foreign = _foreign(data, where)
    enabled_given = data.get("enabled_tools") is not None
    values = {**DEFAULTS, **{k: v for k, v in data.items() if v is not None}}
    if foreign and not enabled_given:
        values["enabled_tools"] = []  # Loki, Coyote and AIChat enable no tool unless told
    functions_dir = values["functions_dir"]
    if not isinstance(functions_dir, str) or not functions_dir or "\0" in functions_dir:
        raise ConfigError(where, f"expected a directory path, got {brief(functions_dir)}", key="functions_dir")
    functions = (path.parent / Path(functions_dir).expanduser()).resolve()
    if functions.exists() and not functions.is_dir():
        raise ConfigError(
            where, f"{functions} is a file, not a directory; name the directory holding tools/", key="functions_dir"
        )
    visible = values["visible_tools"]
    if data.get("visible_tools") is None:
        visible = _tools_txt(functions / TOOLS_TXT, visible)
    return Config(
        path=path,
        functions_dir=functions,
        visible_tools=_visible(visible, where),
        enabled_tools=_enabled(values["enabled_tools"], where),
        mapping_tools=_mapping(values["mapping_tools"], where),
        runtimes=_runtimes(values["runtimes"], where),
        timeout=float(_limit(values["timeout"], "timeout", where)),
        max_output_bytes=int(_limit(values["max_output_bytes"], "max_output_bytes", where, whole=True)),
        max_parallel=int(_positive(values["max_parallel"], "max_parallel", where, int)),
        mcp=_mcp(values["mcp"], where, path),
        max_kept_bytes=int(_limit(values["max_kept_bytes"], "max_kept_bytes", where, whole=True)),
        max_cache_bytes=int(_limit(values["max_cache_bytes"], "max_cache_bytes", where, whole=True)),
        secret_env=_secret_env(values["secret_env"], where),
        sandbox=_sandbox_mode(values["sandbox"], where),
        sandbox_policies=_sandbox_policies(values["sandbox_policies"], where),
        sandbox_hide=_sandbox_hide(values["sandbox_hide"], where),
        artifacts=_artifacts(values["artifacts"], where),
        embedded=embedded,
        agents_dir=_agents_dir(values["agents_dir"], path, where),
        agent_variables=_agent_variables(values["agent_variables"], where),
        foreign=foreign,
        enabled_given=enabled_given,
        **_audit_log(values["audit_log"], path, where),
        tool_limits=_tool_limits(values["tool_limits"], where),
        warm_tools=_names(values["warm_tools"], "warm_tools", where),
        warm_max=int(_positive(values["warm_max"], "warm_max", where, int)),
        warm_idle=_seconds(values["warm_idle"], "warm_idle", where),
    )


MAX_IDLE_SECONDS = 7 * 24 * 3600


def _seconds(value: Any, key: str, where: str) -> float:
    """A positive number of seconds, up to a week."""
    if not is_positive(value) or value > MAX_IDLE_SECONDS:
        raise ConfigError(where, f"expected a positive number of seconds up to {MAX_IDLE_SECONDS}, got {brief(value)}", key=key)
    return float(value)


def _tool_limits(value: Any, where: str) -> dict[str, dict[str, int | str]]:
    """``tool_limits``: ``{TOOL: {max_concurrency: N, rate: N/unit}}``, each entry replacing that tool's own caps."""
    if not isinstance(value, dict):
        raise ConfigError(
            where, f"expected a mapping of tool name to {{max_concurrency, rate}}, got {brief(value)}", key="tool_limits"
        )
    found: dict[str, dict[str, int | str]] = {}
    for tool, caps in value.items():
        key = f"tool_limits.{tool}"
        if not isinstance(caps, dict) or not caps:
            raise ConfigError(where, f"expected a mapping with max_concurrency and/or rate, got {brief(caps)}", key=key)
        unknown = sorted(str(k) for k in caps if k not in ("max_concurrency", "rate"))
        if unknown:
            raise ConfigError(
                where,
                f"unknown setting {unknown[0]!r}{did_you_mean(unknown[0], ['max_concurrency', 'rate'])}; it has max_concurrency and rate",
                key=key,
            )
        from toolexec.capspec import parse_max_concurrency, parse_rate  # a config without caps does not need it

        entry: dict[str, int | str] = {}
        if "max_concurrency" in caps:
            number = parse_max_concurrency(caps["max_concurrency"])
            if isinstance(number, str):
                raise ConfigError(where, number, key=f"{key}.max_concurrency")
            entry["max_concurrency"] = number
        if "rate" in caps:
            rate = parse_rate(caps["rate"])
            if isinstance(rate, tuple):
                raise ConfigError(where, rate[0], key=f"{key}.rate")
            entry["rate"] = rate
        found[str(tool)] = entry
    return found


def _audit_log(value: Any, path: Path, where: str) -> dict[str, Any]:
    """``audit_log``: a file path (relative to the config file), or ``{path: …, arguments: true|false}``."""
    if value is None:
        return {}
    arguments: Any = False
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"path", "arguments"})
        if unknown:
            raise ConfigError(where, f"unknown setting {unknown[0]!r}; it has path and arguments", key="audit_log")
        arguments = value.get("arguments", False)
        if not isinstance(arguments, bool):
            raise ConfigError(where, f"arguments: expected true or false, got {brief(arguments)}", key="audit_log")
        value = value.get("path")
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(
            where, f"expected a file path (or {{path: FILE, arguments: true}}), got {brief(value)}", key="audit_log"
        )
    found = path.parent / Path(value).expanduser()
    if found.is_dir():
        raise ConfigError(where, f"{found} is a directory; name the file the audit lines are appended to", key="audit_log")
    return {"audit_log": found.absolute(), "audit_arguments": arguments}


def _agents_dir(value: Any, path: Path, where: str) -> Path | None:
    """``agents_dir``: a directory, relative to the config file."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(where, f"expected a directory path, got {brief(value)}", key="agents_dir")
    found = (path.parent / Path(value).expanduser()).resolve()
    if not found.is_dir():
        raise ConfigError(where, f"{found} is not a directory; name the directory holding one folder per agent", key="agents_dir")
    return found


def _agent_variables(value: Any, where: str) -> dict[str, dict[str, str]]:
    """``agent_variables``: ``{agent: {variable: value}}``; values are text (numbers and booleans as YAML writes them)."""
    if not isinstance(value, dict):
        raise ConfigError(where, f"expected a mapping of agent: {{variable: value}}, got {brief(value)}", key="agent_variables")
    found: dict[str, dict[str, str]] = {}
    for agent, values in value.items():
        key = f"agent_variables.{agent}"
        if not isinstance(values, dict):
            raise ConfigError(where, f"expected a mapping of variable: value, got {brief(values)}", key=key)
        found[str(agent)] = {}
        for name, given in values.items():
            if isinstance(given, bool):
                given = "true" if given else "false"
            if not isinstance(given, (str, int, float)):
                raise ConfigError(where, f"expected text, got {brief(given)}", key=f"{key}.{name}")
            found[str(agent)][str(name)] = str(given)
    return found


def _foreign(data: dict[str, Any], where: str) -> tuple[str, ...]:
    """The settings of ``data`` that belong to Loki, Coyote or AIChat; ConfigError for a key none of them has."""
    others = [str(key) for key in data if key not in DEFAULTS]
    if not others:
        return ()
    from toolexec.foreign_config import SETTINGS

    known = frozenset().union(*SETTINGS.values())
    for key in others:
        if key not in known:
            hint = did_you_mean(key, [*DEFAULTS, *sorted(known)])
            raise ConfigError(where, f"unknown setting: neither toolexec, Loki, Coyote nor AIChat has it{hint}", key=key)
    return tuple(sorted(others))


def _owners(keys: tuple[str, ...]) -> str:
    """Which applications the settings ``keys`` come from: those that have them all ('Loki and Coyote'), else any."""
    from toolexec.foreign_config import SETTINGS

    owners = [name for name, settings in SETTINGS.items() if all(key in settings for key in keys)]
    owners = owners or [name for name, settings in SETTINGS.items() if any(key in settings for key in keys)]
    return " and ".join([", ".join(owners[:-1]), owners[-1]] if len(owners) > 1 else owners)


def _tools_txt(path: Path, fallback: Any) -> Any:
    """The file names an llm-functions ``tools.txt`` lists (``#`` starts a comment), or ``fallback``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return fallback
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def _names(value: Any, key: str, where: str) -> tuple[str, ...]:
    """A YAML list of names, or one comma-separated string."""
    if isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    if isinstance(value, list) and set(map(type, value)) <= {str}:  # (at C speed: a config may list 10,000 tools)
        return tuple(map(str.strip, value))
    raise ConfigError(where, f"expected a list of names or a comma-separated string, got {brief(value)}", key=key)


def _visible(value: Any, where: str) -> tuple[str, ...]:
    files = _names(value, "visible_tools", where)
    everything = "".join(files)
    if "/" in everything or "\0" in everything or not {".", ".."}.isdisjoint(files):  # one look at them all first
        bad = next(name for name in files if "/" in name or name in (".", "..") or "\0" in name)
        raise ConfigError(where, f"{bad!r} is not a file name in functions/tools/", key="visible_tools")
    return files


def _enabled(value: Any, where: str) -> tuple[str, ...] | None:
    names = _names(value, "enabled_tools", where)
    return None if names == ("all",) else names


def _mapping(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ConfigError(where, f"expected a mapping of alias: 'tool_a,tool_b', got {brief(value)}", key="mapping_tools")
    return {str(alias): _names(tools, f"mapping_tools.{alias}", where) for alias, tools in value.items()}


def _runtimes(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise ConfigError(where, f"expected a mapping such as python: python3.12, got {brief(value)}", key="runtimes")
    result: dict[str, tuple[str, ...]] = {}
    for language, command in value.items():
        key = f"runtimes.{language}"
        if language not in LANGUAGES:
            raise ConfigError(where, f"unknown language{did_you_mean(str(language), LANGUAGES)}", key=key)
        if isinstance(command, str) and command.strip():
            result[language] = _command_words(command, where, key)
        elif isinstance(command, list) and command and all(isinstance(c, str) for c in command):
            result[language] = tuple(command)
        else:
            raise ConfigError(where, f"expected a command such as 'python3.12', got {brief(command)}", key=key)
    return result


# What makes shlex read a command otherwise than str.split: quotes, escapes, and whitespace it does not split on.
_SHELL_SPECIAL = frozenset("'\"\\\x0b\x0c\x1c\x1d\x1e\x1f")


def _command_words(command: str, where: str, key: str) -> tuple[str, ...]:
    """``command`` split as ``shlex.split`` splits it (``python3.12``, ``npx tsx``, ``'/opt/my python/bin/python'``);
    a plain command is split without importing shlex, which a one-shot run would pay for."""
    if command.isascii() and _SHELL_SPECIAL.isdisjoint(command):
        return tuple(command.split())
    import shlex

    try:
        return tuple(shlex.split(command))
    except ValueError as exc:  # an unbalanced quote
        raise ConfigError(where, f"cannot split {brief(command)} into a command: {exc}", key=key) from None


def _secret_env(value: Any, where: str) -> tuple[str, ...]:
    names = _names(value, "secret_env", where)
    for name in names:
        if not name or "=" in name or "\0" in name:
            raise ConfigError(
                where, f"expected names of environment variables (or patterns such as 'AWS_*'), got {name!r}", key="secret_env"
            )
    return names


def _sandbox_mode(value: Any, where: str) -> str:
    if value is False:  # YAML reads a bare `off` as false
        return "off"
    if value not in SANDBOX_MODES:
        raise ConfigError(where, f"expected one of {', '.join(SANDBOX_MODES)}, got {brief(value)}", key="sandbox")
    return str(value)


def _sandbox_policies(value: Any, where: str) -> dict[str, Sandbox]:
    if not isinstance(value, dict):
        raise ConfigError(where, f"expected a mapping of TOOL: {{network: none, …}}, got {brief(value)}", key="sandbox_policies")
    policies: dict[str, Sandbox] = {}
    for tool, fields in value.items():
        found, problems = read_policy(fields if fields is not None else {}, f"sandbox_policies.{tool}")
        if problems:
            key, _, message = problems[0].partition(" ")
            raise ConfigError(where, message, key=key)
        assert found is not None
        policies[str(tool)] = found
    return policies


def _sandbox_hide(value: Any, where: str) -> tuple[str, ...]:
    found = words(value) if not isinstance(value, str) else None
    if found is None:
        raise ConfigError(where, f"expected a list of absolute or ~/ paths, got {brief(value)}", key="sandbox_hide")
    for path in found:
        if not path.startswith(("/", "~/")):
            raise ConfigError(where, f"{path!r} is not an absolute or ~/ path", key="sandbox_hide")
    return tuple(found)


def _mcp(value: Any, where: str, path: Path) -> McpSettings:
    if not isinstance(value, dict):
        raise ConfigError(where, f"expected a mapping such as token_env: MY_TOKEN, got {value!r}", key="mcp")
    if not value:
        return McpSettings()  # no mcp: section (the settings' readers are not imported for it)
    for key in value:
        if key not in MCP_KEYS:
            raise ConfigError(where, f"unknown setting{did_you_mean(str(key), MCP_KEYS)}", key=f"mcp.{key}")
    token_env = value.get("token_env")
    if token_env is not None and not (isinstance(token_env, str) and token_env.strip()):
        raise ConfigError(where, f"expected the name of an environment variable, got {token_env!r}", key="mcp.token_env")
    state_key_env = value.get("state_key_env")
    if state_key_env is not None and not (isinstance(state_key_env, str) and state_key_env.strip()):
        raise ConfigError(where, f"expected the name of an environment variable, got {state_key_env!r}", key="mcp.state_key_env")
    page_size = value.get("page_size", 100)
    if token_env is not None and value.get("auth") is not None:
        raise ConfigError(where, "a static token and OAuth (mcp.auth) exclude each other: keep one", key="mcp.token_env")
    task_store = value.get("task_store")
    if task_store is not None and not (
        isinstance(task_store, str)
        and (
            task_store.startswith(("redis://", "rediss://", "unix://"))
            or (task_store[4:].strip() and task_store.startswith("dir:"))
        )
    ):
        raise ConfigError(where, f"expected dir:PATH or redis://HOST:PORT/DB, got {brief(task_store)}", key="mcp.task_store")
    task_ttl = value.get("task_ttl", TASK_TTL)
    if not is_positive(task_ttl) or task_ttl > MAX_TASK_TTL:
        raise ConfigError(
            where,
            f"expected a positive number of seconds up to {MAX_TASK_TTL:.0f} (a week), got {brief(task_ttl)}",
            key="mcp.task_ttl",
        )
    from toolexec.mcp_settings import read_auth, read_cwd  # the mcp: section's own readers, only when it is given

    return McpSettings(
        task_store=task_store,
        task_ttl=float(task_ttl),
        token_env=token_env,
        state_key_env=state_key_env,
        allowed_hosts=_names(value.get("allowed_hosts", []), "mcp.allowed_hosts", where),
        allowed_origins=_names(value.get("allowed_origins", []), "mcp.allowed_origins", where),
        page_size=int(_positive(page_size, "mcp.page_size", where, int)),
        auth=read_auth(value.get("auth"), where),
        cwd=read_cwd(value.get("cwd"), path, where),
    )


def _artifacts(value: Any, where: str) -> ArtifactSettings:
    """``artifacts:``: counts and sizes whole and positive (bounded as max_kept_bytes is), ``ttl`` seconds up to a week."""
    if not isinstance(value, dict):
        raise ConfigError(where, f"expected a mapping such as max_files: 32, got {brief(value)}", key="artifacts")
    for key in value:
        if key not in ARTIFACT_KEYS:
            raise ConfigError(where, f"unknown setting{did_you_mean(str(key), ARTIFACT_KEYS)}", key=f"artifacts.{key}")
    found: dict[str, Any] = {}
    if "max_files" in value:
        found["max_files"] = int(_positive(value["max_files"], "artifacts.max_files", where, int))
    for key in ("max_bytes", "inline_bytes"):
        if key in value:
            found[key] = int(_limit(value[key], "max_kept_bytes", where, whole=True, shown=f"artifacts.{key}"))
    if "ttl" in value:
        ttl = value["ttl"]
        if not is_positive(ttl) or ttl > 7 * 86400:
            raise ConfigError(
                where, f"expected a positive number of seconds up to 604800 (a week), got {brief(ttl)}", key="artifacts.ttl"
            )
        found["ttl"] = float(ttl)
    return ArtifactSettings(**found)


def is_positive(value: Any, kind: type = float) -> bool:
    """A finite number above zero (a whole one if ``kind`` is int); booleans are not numbers here."""
    ok_type = isinstance(value, int) if kind is int else isinstance(value, (int, float))
    return ok_type and not isinstance(value, bool) and 0 < value < math.inf


def _positive(value: Any, key: str, where: str, kind: type) -> float:
    if not is_positive(value, kind) or value > MAX_PARALLEL:
        raise ConfigError(where, f"expected a positive whole number up to {MAX_PARALLEL}, got {brief(value)}", key=key)
    return value


def _limit(value: Any, key: str, where: str, *, whole: bool = False, shown: str | None = None) -> float:
    """A call limit, finite, positive and bounded as ``key`` is (:func:`toolexec.records.limit_problem`); named
    ``shown`` (else ``key``) in the error."""
    problem = limit_problem(key, value, whole=whole)
    if problem is not None:
        raise ConfigError(where, f"expected {problem}, got {brief(value)}", key=shown or key)
    return value
