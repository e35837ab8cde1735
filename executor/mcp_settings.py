"""The ``mcp.auth`` and ``mcp.cwd`` settings of ``config.yaml``: read and checked when the config loads.

``mcp.auth`` makes ``toolexec mcp --http`` an OAuth 2.1 resource server (docs/mcp.md#oauth): tokens issued by
``issuer`` for ``audience`` (by default ``resource``, the server's own public URL), verified against the issuer's
``jwks_uri`` (signed JWTs) or by its ``introspection`` endpoint (RFC 7662, opaque tokens). No heavy import here:
the config is read on every one-shot ``toolexec run``.
"""

from __future__ import annotations

from pathlib import Path

from toolexec.errors import ConfigError, brief, did_you_mean
from toolexec.recordtype import record

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["AUTH_KEYS", "Introspection", "McpAuth", "read_auth", "read_cwd", "valid_scope"]

AUTH_KEYS = ("issuer", "resource", "audience", "jwks_uri", "introspection", "required_scopes")
INTROSPECTION_KEYS = ("url", "client_id", "client_secret_env", "cache_seconds")
CACHE_SECONDS = 60.0  # how long an active token's introspected answer is reused (never past its exp)
# RFC 6749 §3.3: a scope token is printable ASCII without space, double quote or backslash.
_SCOPE_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F)) - {'"', "\\"}


@record
class Introspection:
    """An RFC 7662 introspection endpoint, and how toolexec authenticates to it (HTTP Basic)."""

    url: str
    client_id: str | None = None
    client_secret_env: str | None = None  # the variable holding the client secret (never given to a tool)
    cache_seconds: float = CACHE_SECONDS  # an active answer reused this long (0: ask about every request)


@record
class McpAuth:
    """OAuth 2.1 resource-server settings (``mcp.auth``)."""

    issuer: str
    resource: str  # this server's public URL, the MCP endpoint: https://tools.example.com/mcp
    audience: str  # the ``aud`` a token must carry (defaults to ``resource``)
    jwks_uri: str | None = None
    introspection: Introspection | None = None
    required_scopes: tuple[str, ...] = ()


def valid_scope(scope: str) -> bool:
    """Whether ``scope`` is one OAuth scope token (RFC 6749 §3.3)."""
    return bool(scope) and all(c in _SCOPE_CHARS for c in scope)


def read_auth(value: Any, where: str) -> McpAuth | None:
    """``mcp.auth`` checked; None when absent."""
    if value is None:
        return None
    key = "mcp.auth"
    if not isinstance(value, dict):
        raise ConfigError(
            where, f"expected a mapping with issuer, resource and jwks_uri (or introspection), got {brief(value)}", key=key
        )
    for name in value:
        if name not in AUTH_KEYS:
            raise ConfigError(where, f"unknown setting{did_you_mean(str(name), AUTH_KEYS)}", key=f"{key}.{name}")
    for name in ("issuer", "resource"):
        if value.get(name) is None:
            raise ConfigError(where, "is required with mcp.auth: " + _WHY[name], key=f"{key}.{name}")
    if (value.get("jwks_uri") is None) == (value.get("introspection") is None):
        raise ConfigError(
            where,
            "give one of jwks_uri (the issuer's signing keys, for JWT access tokens) or introspection (its RFC 7662 endpoint)",
            key=key,
        )
    resource = _url(value["resource"], f"{key}.resource", where)
    scopes = value.get("required_scopes", [])
    return McpAuth(
        issuer=_url(value["issuer"], f"{key}.issuer", where),
        resource=resource,
        audience=_text(value["audience"], f"{key}.audience", where) if value.get("audience") is not None else resource,
        jwks_uri=_url(value["jwks_uri"], f"{key}.jwks_uri", where) if value.get("jwks_uri") is not None else None,
        introspection=_introspection(value["introspection"], where) if value.get("introspection") is not None else None,
        required_scopes=_scopes(scopes, f"{key}.required_scopes", where),
    )


_WHY = {
    "issuer": "the authorization server's issuer URL, as its tokens' iss claim spells it",
    "resource": "this server's public URL, the MCP endpoint clients connect to (https://tools.example.com/mcp)",
}


def _introspection(value: Any, where: str) -> Introspection:
    key = "mcp.auth.introspection"
    if isinstance(value, str):
        value = {"url": value}
    if not isinstance(value, dict) or "url" not in value:
        raise ConfigError(
            where,
            f"expected a URL or a mapping with url, client_id, client_secret_env, cache_seconds, got {brief(value)}",
            key=key,
        )
    for name in value:
        if name not in INTROSPECTION_KEYS:
            raise ConfigError(where, f"unknown setting{did_you_mean(str(name), INTROSPECTION_KEYS)}", key=f"{key}.{name}")
    return Introspection(
        url=_url(value["url"], f"{key}.url", where),
        client_id=_text(value["client_id"], f"{key}.client_id", where) if value.get("client_id") is not None else None,
        client_secret_env=(
            _text(value["client_secret_env"], f"{key}.client_secret_env", where)
            if value.get("client_secret_env") is not None
            else None
        ),
        cache_seconds=_seconds(value.get("cache_seconds", CACHE_SECONDS), f"{key}.cache_seconds", where),
    )


def _seconds(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 3600:
        raise ConfigError(where, f"expected a number of seconds from 0 to 3600, got {brief(value)}", key=key)
    return float(value)


def _text(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise ConfigError(where, f"expected one word of text, got {brief(value)}", key=key)
    return value.strip()


def _url(value: Any, key: str, where: str) -> str:
    """An absolute http(s) URL without a fragment; plain http only to a loopback host (RFC 8414, OAuth 2.1)."""
    from urllib.parse import urlsplit

    text = _text(value, key, where)
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host or parts.fragment:
        raise ConfigError(where, f"expected an absolute https:// URL without a #fragment, got {text!r}", key=key)
    if parts.scheme == "http" and host not in ("127.0.0.1", "localhost", "::1"):
        raise ConfigError(where, f"expected https:// (plain http only to a loopback address), got {text!r}", key=key)
    return text


def _scopes(value: Any, key: str, where: str) -> tuple[str, ...]:
    found = value.split() if isinstance(value, str) else value
    if not isinstance(found, list) or not all(isinstance(s, str) and valid_scope(s) for s in found):
        raise ConfigError(where, f"expected a list of OAuth scopes such as [mcp:tools], got {brief(value)}", key=key)
    return tuple(dict.fromkeys(found))


def read_cwd(value: Any, config_path: Path, where: str) -> Path | None:
    """``mcp.cwd``: the folder tool calls of ``toolexec mcp`` start in (relative to the config file); None when absent."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise ConfigError(where, f"expected a folder path, got {brief(value)}", key="mcp.cwd")
    folder = (config_path.parent / Path(value.strip()).expanduser()).resolve()
    if not folder.is_dir():
        raise ConfigError(where, f"{value.strip()!r} is not a folder", key="mcp.cwd")
    return folder
