"""Agents: ``agents/<name>/`` of llm-functions, Loki and Coyote, as a source of tools.

An agent is a folder holding a definition (``index.yaml`` in llm-functions, ``config.yaml`` in
Loki and Coyote), a tools file of several functions (``tools.sh`` / ``tools.py`` / ``tools.js``)
and maybe shared tools (llm-functions' ``tools.txt``, Loki's ``global_tools:``), variables,
instructions and a ``.env``. Where the agents are: ``agents_dir`` in config.yaml, else
``<functions_dir>/agents`` (an llm-functions checkout), else ``agents/`` beside the functions
directory (a Loki or Coyote config directory).

:func:`agent_config` turns a config and an agent's name into the :class:`~toolexec.config.Config`
of that agent (its own functions, then its shared tools), so that building, listing, calling
and serving it are those of any config; :func:`agent_environment` is what the engine adds to a
call of it, as the projects' runners (``run-agent.sh`` and kin) set it.
"""

from __future__ import annotations

import contextlib
import locale
import os
import platform
import re
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolexec.agent_folders import DEFINITIONS, Layout, agent_names, agents_dir
from toolexec.build import build
from toolexec.catalog import Catalog, Entry
from toolexec.compilers import CompileError
from toolexec.compilers.agent import INSTRUCTIONS, compile_functions
from toolexec.config import Config, _parse_yaml, _tools_txt
from toolexec.engine import Engine
from toolexec.errors import (
    BadRequest,
    ConfigError,
    InstructionsFailed,
    PreconditionFailed,
    UnknownAgent,
    brief,
    did_you_mean,
)
from toolexec.records import ToolCall
from toolexec.recordtype import field, record, replace
from toolexec.sources import Snapshot
from toolexec.state import new_call_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from toolexec.compilers.agent import Dialect
    from toolexec.records import ToolDeclaration

# The tools file of an agent with several, in the order each project looks (llm-functions' LANG_CMDS: sh, js, py).
TOOLS_FILES = ("tools.sh", "tools.py", "tools.js", "tools.ts")
TOOLS_ORDER: dict[Layout, tuple[str, ...]] = {
    "llm-functions": ("tools.sh", "tools.js", "tools.py", "tools.ts"),
    "loki": ("tools.sh", "tools.py", "tools.js", "tools.ts"),
}
# Environment variables are text of at most this size (Linux refuses any one string over 128 KiB).
RAW_JSON_LIMIT = 64 * 1024

__all__ = [
    "Agent",
    "AgentVariable",
    "UnknownAgent",
    "agent_config",
    "agent_environment",
    "agent_functions",
    "agent_names",
    "agents_dir",
    "find_agent",
    "instructions",
    "interpolate",
    "variable_values",
]


@record
class AgentVariable:
    """One of the definition's ``variables:``: its value reaches tools as ``LLM_AGENT_VAR_<NAME>``."""

    name: str
    description: str = ""
    default: str | None = None

    @property
    def env_name(self) -> str:
        """``LLM_AGENT_VAR_`` and the name with '-' as '_', upper case (the projects' ``normalize_env_name``)."""
        return "LLM_AGENT_VAR_" + self.name.replace("-", "_").upper()


@record
class Agent:
    """An agent as found on disk, with the variable values given for this session."""

    name: str
    directory: Path
    layout: Layout
    definition: Path
    tools_file: Path | None
    # File names in the functions' tools/ the agent also offers (llm-functions' tools.txt, Loki's global_tools).
    shared_tools: tuple[str, ...] = ()
    variables: tuple[AgentVariable, ...] = ()
    instructions: str = ""
    dynamic_instructions: bool = False
    description: str = ""
    # Values given for variables by the caller (--var, Executor(variables=)), by variable name: they win.
    given: dict[str, str] = field(default_factory=dict)
    # Values from the config's agent_variables: used when neither the caller nor the environment gives one.
    configured: dict[str, str] = field(default_factory=dict)
    # Serve only the agent's own functions, not its shared tools (llm-functions' AGENT_TOOLS_ONLY).
    tools_only: bool = False

    @property
    def root_dir(self) -> Path:
        """``LLM_ROOT_DIR`` for the agent's functions: the folder holding ``agents/`` (the checkout or config dir)."""
        return self.directory.parent.parent

    @property
    def cache_dir(self) -> Path:
        """``LLM_AGENT_CACHE_DIR``: ``<root>/cache/<agent>``."""
        return self.root_dir / "cache" / self.name

    @property
    def dotenv_files(self) -> tuple[Path, ...]:
        """The ``.env`` files of the agent, farthest first: the root's, then the agent's own."""
        return (self.root_dir / ".env", self.directory / ".env")

    @property
    def bin_dirs(self) -> tuple[Path, ...]:
        """What goes first on PATH: ``agents/<a>/bin`` (both projects), then llm-functions' ``bin/`` (aichat puts it there)."""
        dirs = [self.directory / "bin"]
        if self.layout == "llm-functions":
            dirs.append(self.root_dir / "bin")
        return tuple(d for d in dirs if d.is_dir())

    @property
    def dialect(self) -> Dialect:
        """Whose generator's declarations its tools file gets: llm-functions', or Loki's (and Coyote's)."""
        return "loki" if self.layout == "loki" else "llm-functions"

    def fingerprint(self) -> dict[str, Any]:
        """What the agent's catalog depends on besides its files."""
        return {"agent": self.name, "layout": self.layout, "tools_file": str(self.tools_file), "tools_only": self.tools_only}


def agent_functions(config: Config) -> list[tuple[str, ToolDeclaration | None, str | None]]:
    """Every agent's own functions, as (``agent:function``, its declaration, None), or (agent, None, why) for an
    agent whose definition or tools file is broken: what ``toolexec list`` shows besides the tools."""
    found: list[tuple[str, ToolDeclaration | None, str | None]] = []
    for name in agent_names(config):
        try:
            if find_agent(config, name).tools_file is None:
                continue  # only shared tools (or MCP servers): no functions of its own
            served = agent_config(config, name, tools_only=True)
            report = build(served)
        except (ConfigError, UnknownAgent) as error:
            found.append((name, None, str(error)))
            continue
        found += [(name, None, problem) for entry in report.catalog.entries for problem in entry.problems]
        found += [(f"{name}:{tool.name}", tool, None) for tool in report.catalog.enabled(served) if tool.function is not None]
    return found


def find_agent(config: Config, name: str, *, given: Mapping[str, str] | None = None, tools_only: bool = False) -> Agent:
    """The agent ``name`` of ``config``; UnknownAgent or ConfigError saying what is wrong and where."""
    found = agents_dir(config)
    if found is None:
        raise UnknownAgent(
            f"unknown agent {name!r}: no agents directory (looked for agents/ in {config.functions_dir} and beside it); "
            f"set agents_dir in {config.path}"
        )
    names = agent_names(config)
    if not isinstance(name, str) or name not in names:
        listed = f"; agents in {found}: {', '.join(names)}" if names else f"; {found} holds no agent"
        raise UnknownAgent(f"unknown agent {brief(name)}{did_you_mean(str(name), names)}{listed}")
    directory = found / name
    definition, layout = next((directory / f, lay) for f, lay in DEFINITIONS.items() if (directory / f).is_file())
    data = _parse_yaml(definition)
    where = str(definition)
    tools_file = next((directory / f for f in TOOLS_ORDER[layout] if (directory / f).is_file()), None)
    if layout == "llm-functions":
        shared = tuple(_tools_txt(directory / "tools.txt", []))
    else:
        shared = _strings(data.get("global_tools"), "global_tools", where)
    for file in shared:
        if "/" in file or file in (".", "..") or "\0" in file:
            listing, key = (str(directory / "tools.txt"), None) if layout == "llm-functions" else (where, "global_tools")
            raise ConfigError(listing, f"{file!r} is not a file name in {config.tools_dir}", key=key)
    agent = Agent(
        name=name,
        directory=directory,
        layout=layout,
        definition=definition,
        tools_file=tools_file,
        shared_tools=shared,
        variables=_variables(data.get("variables"), where),
        instructions=_text(data.get("instructions"), "instructions", where),
        dynamic_instructions=data.get("dynamic_instructions") is True,
        description=_text(data.get("description"), "description", where),
        tools_only=tools_only,
    )
    configured, values = config.agent_variables.get(name, {}), dict(given or {})
    for key, value in [*values.items(), *configured.items()]:
        if not isinstance(value, str) or "\0" in value:
            raise BadRequest(f"the value of agent variable {key!r} must be text without NUL characters, got {brief(value)}")
    known = [v.name for v in agent.variables]
    for key in [*values, *configured]:
        if key not in known:
            them = f"; it has {', '.join(known)}" if known else "; it has none"
            from_config = f" (agent_variables in {config.path})" if key not in values else ""
            raise BadRequest(f"agent {name!r} has no variable {key!r}{from_config}{did_you_mean(key, known)}{them}")
    return replace(agent, given=values, configured=dict(configured))


def agent_config(config: Config, name: str, *, given: Mapping[str, str] | None = None, tools_only: bool = False) -> Config:
    """The config of one agent: its own functions, then its shared tools, all enabled."""
    agent = find_agent(config, name, given=given, tools_only=tools_only)
    own = (os.path.relpath(agent.tools_file, config.tools_dir),) if agent.tools_file is not None else ()
    shared = () if tools_only else agent.shared_tools
    if not own and not shared:
        raise UnknownAgent(
            f"agent {name!r} has no tools file ({', '.join(TOOLS_FILES)} in {agent.directory}) and no shared tools"
        )
    return replace(config, visible_tools=(*own, *shared), enabled_tools=None, mapping_tools={}, agent=agent, lookup=config.lookup)


def variable_values(agent: Agent, environ: Mapping[str, str]) -> dict[str, str]:
    """Each variable's value: given by the caller, else ``LLM_AGENT_VAR_<NAME>`` from the environment, else the
    config's ``agent_variables``, else the definition's default.

    PreconditionFailed names every variable that has none, and how to give it one.
    """
    values, missing = {}, []
    for variable in agent.variables:
        value = agent.given.get(
            variable.name, environ.get(variable.env_name, agent.configured.get(variable.name, variable.default))
        )
        if value is None:
            missing.append(variable)
        else:
            values[variable.name] = value
    if missing:
        listed = "; ".join(f"{v.name} ({v.description})" if v.description else v.name for v in missing)
        first = missing[0]
        raise PreconditionFailed(
            f"agent {agent.name!r} needs a value for {'these variables' if len(missing) > 1 else 'the variable'}: {listed}; "
            f"pass --var {first.name}=VALUE, set {first.env_name}, or give it a default in {agent.definition}"
        )
    return values


def agent_environment(agent: Agent, tool: ToolDeclaration, env: Mapping[str, str], raw_json: str) -> dict[str, str]:
    """What a call of the agent's ``tool`` adds to its environment, as the agent runners set it."""
    values = variable_values(agent, env)
    additions = {f"LLM_AGENT_VAR_{name.replace('-', '_').upper()}": value for name, value in values.items()}
    if agent.bin_dirs:
        additions["PATH"] = os.pathsep.join([*map(str, agent.bin_dirs), env.get("PATH", os.defpath)])
    if tool.function is None:  # a shared tool: a tool of its own, under the agent's variables
        # Loki runs an agent's global tools from the agent's folder (run-tool.sh's root_dir); aichat runs bin/<tool>
        # of the checkout, whose cache is the checkout's
        root = agent.directory if agent.layout == "loki" else None
        cache = (root or agent.root_dir) / "cache" / tool.name
        with contextlib.suppress(OSError):  # created on first use, as any tool's; a tool that needs it says so
            cache.mkdir(parents=True, exist_ok=True)
        additions["LLM_TOOL_CACHE_DIR"] = str(cache)
        if root is not None:
            additions["LLM_ROOT_DIR"] = str(root)
        return additions
    additions.update(
        LLM_ROOT_DIR=str(agent.root_dir),
        LLM_AGENT_NAME=agent.name,
        LLM_AGENT_FUNC=tool.function,
        LLM_AGENT_ROOT_DIR=str(agent.directory),
        LLM_AGENT_CACHE_DIR=str(agent.cache_dir),
    )
    if len(raw_json.encode("utf-8", "surrogateescape")) <= RAW_JSON_LIMIT:
        additions["LLM_AGENT_RAW_JSON"] = raw_json  # Coyote's runner sets it
    return additions


def instructions(config: Config, tools: list[ToolDeclaration]) -> str:
    """The agent's instructions as its model gets them: the definition's (or, with ``dynamic_instructions``, what
    its ``_instructions`` function returns, run as any of its functions), with ``{{…}}`` filled in."""
    agent = config.agent
    if agent is None:
        raise BadRequest("instructions belong to an agent: name one (--agent NAME, Executor(agent=NAME))")
    values = variable_values(agent, os.environ)
    text = _dynamic(config, agent) if agent.dynamic_instructions else agent.instructions
    return interpolate(text, values, tools)


def _dynamic(config: Config, agent: Agent) -> str:
    """What the agent's ``_instructions`` function writes, run with ``{}`` as its runner does."""
    where = f"agent {agent.name!r} has dynamic_instructions: true in {agent.definition}"
    if agent.tools_file is None:
        raise InstructionsFailed(f"{where}, but no tools file to hold its {INSTRUCTIONS} function")
    try:
        source = agent.tools_file.read_text(encoding="utf-8")
        declared = compile_functions(source, str(agent.tools_file), agent.dialect, private=True)
        found = [d for d in declared if d.function == INSTRUCTIONS]
    except (OSError, UnicodeDecodeError) as exc:
        raise InstructionsFailed(f"{where}, but {agent.tools_file} cannot be read: {exc}") from None
    except CompileError as exc:
        raise InstructionsFailed(f"{where}, but its tools file does not build:\n{exc}") from None
    if not found:
        raise InstructionsFailed(
            f"{where}, but {agent.tools_file} defines no {INSTRUCTIONS} function; define one or set it false"
        )
    tool = found[0]
    entry = Entry(file=agent.tools_file.name, name=tool.name, stat=None, sha256=None, declaration=tool, code=source)
    catalog = Catalog(fingerprint={}, entries=(entry,))
    snapshot = Snapshot(declaration=tool, code=source, problems=(), validator=catalog.validator(tool.name), config=config)
    call = ToolCall(name=tool.name, arguments={})
    result = Engine(config).execute(snapshot, call, {}, call_id=new_call_id(), started=time.monotonic())
    if not result.ok:
        raise InstructionsFailed(f"{agent.name}'s {INSTRUCTIONS} failed: {result.error}")
    if not result.output:
        raise InstructionsFailed(f"{agent.name}'s {INSTRUCTIONS} returned nothing (it must print or return the instructions)")
    return result.output


_VARIABLE = re.compile(r"\{\{(\w+)\}\}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def interpolate(text: str, values: Mapping[str, str], tools: list[ToolDeclaration]) -> str:
    """Instructions as the projects fill them: ``{{__tools__}}``, the agent's ``{{variables}}``, then the
    special ``{{__os__}}``, ``{{__arch__}}``, ``{{__shell__}}``, ``{{__now__}}``, ``{{__cwd__}}`` … (others are kept)."""
    if "{{__tools__}}" in text:
        listed = [f"{i}. {t.name}: {t.description.split(chr(10), 1)[0]}" for i, t in enumerate(tools, 1)]
        text = text.replace("{{__tools__}}", "\n".join(listed))
    for name, value in values.items():
        text = text.replace(f"{{{{{name}}}}}", value)
    special = _special()
    return _VARIABLE.sub(lambda m: special.get(m.group(1), m.group(0)), text)


def _special() -> dict[str, str]:
    system = platform.system().lower()
    shell = os.path.basename(os.environ.get("SHELL", "") or "sh")
    return {
        "__os__": "macos" if system == "darwin" else system,
        "__os_family__": "windows" if system == "windows" else "unix",
        "__arch__": platform.machine(),
        "__shell__": shell,
        "__locale__": (locale.getlocale()[0] or "").replace("_", "-"),
        "__now__": datetime.now().astimezone().isoformat(timespec="seconds"),
        "__cwd__": os.getcwd(),
    }


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise ConfigError(where, f"expected a list of tool file names, got {brief(value)}", key=key)


def _text(value: Any, key: str, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(where, f"expected text, got {brief(value)}", key=key)
    return value


def _variables(value: Any, where: str) -> tuple[AgentVariable, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(
            where, f"expected a list of variables (name, description, default), got {brief(value)}", key="variables"
        )
    found = []
    for number, item in enumerate(value):
        key = f"variables[{number}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise ConfigError(where, f"expected a mapping with a name, got {brief(item)}", key=key)
        if not _NAME.fullmatch(item["name"].strip()):  # it becomes part of an environment variable's name
            raise ConfigError(where, f"expected a name of letters, digits, '_' and '-', got {brief(item['name'])}", key=key)
        default = item.get("default")
        if default is not None and not isinstance(default, (str, int, float, bool)):
            raise ConfigError(where, f"expected a default of text, got {brief(default)}", key=f"{key}.default")
        if isinstance(default, str) and "\0" in default:
            raise ConfigError(
                where, "a default may not contain a NUL character (it becomes an environment variable)", key=f"{key}.default"
            )
        if isinstance(default, bool):
            default = "true" if default else "false"
        found.append(
            AgentVariable(
                name=item["name"].strip(),
                description=_text(item.get("description"), f"{key}.description", where),
                default=None if default is None else str(default),
            )
        )
    return tuple(found)
