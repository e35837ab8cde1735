"""The isolation-policy vocabulary, read the same way from a script and from config.

Every language spells the fields its own way (``Memory: 256 MiB``, ``# @meta memory 256MiB``,
``@memory 256MiB``, ``sandbox: {memory: "256MiB"}``, config's ``memory: 256MiB``); the values
are read here into one :class:`~toolexec.records.Sandbox`. :func:`read_field` says what is wrong
with a value in words a tool author can act on.
"""

from __future__ import annotations

import re

from toolexec.records import Sandbox, ToolDeclaration
from toolexec.recordtype import asdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FIELDS = ("network", "writes", "reads", "env", "memory", "cpu", "processes", "file_size")
SANDBOX_MODES = ("off", "declared", "strict")
# The paths no confined tool sees unless it declares it reads them (config's sandbox_hide replaces the list).
DEFAULT_HIDE = ("~/.ssh", "~/.aws", "~/.gnupg", "~/.netrc", "~/.config/gcloud", "~/.kube", "~/.docker")
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "kb": 1000,
    "m": 1 << 20,
    "mib": 1 << 20,
    "mb": 1000**2,
    "g": 1 << 30,
    "gib": 1 << 30,
    "gb": 1000**3,
    "t": 1 << 40,
    "tib": 1 << 40,
    "tb": 1000**4,
}
# Patterns compiled on first use (by re, which keeps them): a config or call without a sandbox policy never does.
_SIZE = r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)"
_SECONDS = r"(\d+)\s*(s|sec|secs|seconds?|min|minutes?)?"
_HOST = r"(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})(?::\d{1,5})?|\[[0-9A-Fa-f:.]+\](?::\d{1,5})?"
_ENV = r"[A-Za-z_][A-Za-z0-9_]*"
_MAX = 1 << 50


def words(value: Any) -> list[str] | None:
    """A list of words from a list of strings or ``"a, b c"`` text; None when it is neither."""
    if isinstance(value, str):
        return [word for word in re.split(r"[\s,]+", value.strip()) if word]
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return [item.strip() for item in value if item.strip()]
    return None


def size(value: Any) -> int | str:
    """Bytes from a whole number or ``"256 MiB"`` / ``"10MB"`` / ``"1G"``; else what was expected."""
    expected = "a size such as 256 MiB, 10MB or a whole number of bytes"
    if isinstance(value, bool):
        return expected
    if isinstance(value, int):
        return value if 0 < value <= _MAX else expected
    found = re.fullmatch(_SIZE, value.strip()) if isinstance(value, str) else None
    if not found or found.group(2).lower() not in _UNITS:
        return expected
    number = int(float(found.group(1)) * _UNITS[found.group(2).lower()])
    return number if 0 < number <= _MAX else expected


def seconds(value: Any) -> int | str:
    """Whole CPU seconds from a number or ``"10 s"`` / ``"2 min"``; else what was expected."""
    expected = "a whole number of seconds such as 10 or 10 s"
    if isinstance(value, bool):
        return expected
    if isinstance(value, int):
        return value if 0 < value <= 86400 * 365 else expected
    found = re.fullmatch(_SECONDS, value.strip()) if isinstance(value, str) else None
    if not found:
        return expected
    number = int(found.group(1)) * (60 if (found.group(2) or "s").startswith("min") else 1)
    return number if 0 < number <= 86400 * 365 else expected


def count(value: Any) -> int | str:
    """A positive whole number (``64`` or ``"64"``); else what was expected."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 22:
        return value
    return "a positive whole number such as 64"


def _network(value: Any) -> str | tuple[str, ...]:
    if isinstance(value, bool):
        return "all" if value else "none"
    found = words(value)
    if found is None or not found:
        raise ValueError("none, all, or a list of host[:port] names such as api.github.com, localhost:8080")
    if len(found) == 1 and found[0].lower() in ("none", "all"):
        return found[0].lower()
    for host in found:
        if host.lower() in ("none", "all") or not re.fullmatch(_HOST, host):
            raise ValueError(f"{host!r} is not a host[:port] name (write none, all, or names such as api.github.com:443)")
    return tuple(dict.fromkeys(found))


def _paths(value: Any, *, places: tuple[str, ...]) -> tuple[str, ...]:
    found = words(value)
    if found is None:
        raise ValueError("a list of paths")
    if [word.lower() for word in found] == ["none"]:  # Writes: none (only its private /tmp and LLM_OUTPUT)
        return ()
    for path in found:
        if path not in places and not path.startswith(("/", "~/")) and path != "~":
            shown = ", ".join(places) + (", " if places else "")
            raise ValueError(f"{path!r} is not {shown}an absolute path or a ~/ path")
    return tuple(dict.fromkeys(found))


def read_field(name: str, value: Any) -> tuple[str, Any] | str:
    """(field, value) read from one declared field, or what is wrong with it (a phrase after the field's name)."""
    try:
        if name == "network":
            return name, _network(value)
        if name == "writes":
            return name, _paths(value, places=("cache", "cwd"))
        if name == "reads":
            return name, _paths(value, places=())
        if name == "env":
            found = words(value)
            if found is None:
                return "must be a list of variable names such as GITHUB_TOKEN, AWS_PROFILE"
            bad = next((word for word in found if not re.fullmatch(_ENV, word)), None)
            if bad is not None:
                return f"{bad!r} is not a variable name"
            return name, tuple(dict.fromkeys(found))
    except ValueError as exc:
        return f"must be {exc}" if not str(exc).startswith("'") else str(exc)
    reader = {"memory": size, "file_size": size, "cpu": seconds, "processes": count}.get(name)
    if reader is None:
        return f"is not a sandbox field (they are {', '.join(FIELDS)})"
    result = reader(value)
    return (name, result) if isinstance(result, int) else f"must be {result}, not {value!r}"


def from_mapping(values: Any, where: str) -> tuple[Sandbox | None, list[str]]:
    """A policy from a mapping of fields (config's ``sandbox_policies`` entry, a module tool's ``sandbox``),
    and the problems found, each naming ``where`` and the field."""
    if not isinstance(values, dict):
        return None, [f"{where} must be a mapping of sandbox fields ({', '.join(FIELDS)})"]
    problems: list[str] = []
    fields: dict[str, Any] = {}
    for key, value in values.items():
        name = "file_size" if key in ("fileSize", "file-size") else key
        found = read_field(name, value) if isinstance(name, str) else "is not a field name"
        if isinstance(found, str):
            problems.append(f"{where}.{key} {found}")
        else:
            fields[found[0]] = found[1]
    return (Sandbox(**fields) if not problems else None), problems


def effective(mode: str, policies: dict[str, Sandbox], name: str, declared: Sandbox | None) -> Sandbox | None:
    """The policy a call of ``name`` runs under: config's for the tool (it replaces the script's), else the
    script's; under ``strict`` the baseline (no network, writes only to its cache, base environment) for a tool
    that declares none; None when the call runs unconfined (``off``, or ``declared`` and nothing declared)."""
    if mode == "off":
        return None
    found = policies.get(name, declared)
    return found if found is not None or mode != "strict" else Sandbox()


def describe(policy: Sandbox) -> dict[str, Any]:
    """The declared fields only, JSON-ready (for ``describe`` and MCP ``_meta``)."""
    data = asdict(policy)
    return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items() if value not in (None, ())}


def enforced(mode: str, policies: dict[str, Sandbox], name: str, declared: Sandbox | None) -> Sandbox | None:
    """The policy a call of ``name`` runs under as :func:`effective` decides it, with what it leaves undeclared
    spelt out as enforced (no network, writes only to its cache): what ``describe``, MCP's ``_meta`` and its
    ``openWorldHint`` show. None when the call runs under the baseline alone, or unconfined."""
    from toolexec.recordtype import replace

    found = effective(mode, policies, name, declared)
    if found is None:
        return None
    return replace(
        found,
        network=found.network if found.network is not None else "none",
        writes=found.writes if found.writes is not None else ("cache",),
    )


def enforced_tool(mode: str, policies: dict[str, Sandbox], tool: ToolDeclaration) -> ToolDeclaration:
    """``tool`` with the policy its calls run under (:func:`enforced`) in place of the one its script declares."""
    from toolexec.recordtype import replace

    policy = enforced(mode, policies, tool.name, tool.metadata.sandbox)
    return tool if policy == tool.metadata.sandbox else replace(tool, metadata=replace(tool.metadata, sandbox=policy))


def unconfined(mode: str, policies: dict[str, Sandbox], name: str, declared: Sandbox | None) -> str | None:
    """Why a call of ``name`` runs unconfined (its files, network and environment as toolexec's), for ``list`` and
    ``check`` to flag; None when a policy confines it."""
    if mode == "off":
        return "sandbox: off (no tool is confined, not even by the baseline)"
    if effective(mode, policies, name, declared) is None:
        return (
            "it declares no sandbox policy (sandbox: declared): its files, network and environment are not confined, "
            "only its own PID namespace and the baseline limits apply"
        )
    return None
