"""The environment a tool sees: the caller's, ``.env`` files, and the ``LLM_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

# Loki's prompt helpers for Bash tools; <functions_dir>/utils/prompt-utils.sh (Loki's own) wins.
PROMPT_UTILS = Path(__file__).with_name("prompt-utils.sh")
# What a call that can ask sources instead: the helpers above (the user's over toolexec's), their questions
# asked through LLM_INPUT_REQUEST (toolexec.asking).
PROMPT_ASK = Path(__file__).with_name("prompt-ask.sh")
# The variables of the asking convention (toolexec.asking): set by toolexec alone, never taken from elsewhere.
ASKING_VARIABLES = ("LLM_INPUT_REQUEST", "LLM_INPUT_RESPONSES")
ANSWER_PREFIX = "LLM_ANSWER_"

# The terminal type a tool gets when toolexec has none (an MCP client starts its servers without one): "dumb",
# found first in toolexec's own terminfo entry, whose colours and attributes print nothing, so `tput setaf 1`
# succeeds where the system's dumb entry fails (and fails a Bash tool under `set -e`).
TERMINFO = Path(__file__).with_name("terminfo")

# LLM_TOOL_RAW_JSON is left out above this size: Linux refuses to start a program with any one
# environment string over 128 KiB, and such arguments still reach the tool by its own convention.
RAW_JSON_LIMIT = 64 * 1024
# What toolexec trusts (its config, functions directory, .env files, state), os.pathsep-separated: the
# file built-ins refuse to write or remove any of it (functions/tools/_fsguard.py reads it).
TRUSTED_PATHS_VARIABLE = "TOOLEXEC_PROTECTED_PATHS"
# The same paths' identities (``DEVICE:INODE``, comma-separated, in their order), taken outside any sandbox: a confined tool sees a
# hidden one covered by an empty file, so only these tell it a hard link or bind of the real one in a writable place.
TRUSTED_IDS_VARIABLE = "TOOLEXEC_PROTECTED_IDS"

# Variables that make a shell or an interpreter run code, load libraries or read modules before the
# tool's own code: never taken from a .env file (a file a tool or a model might have written); set
# them in toolexec's own environment when you mean them. One list for every .env toolexec reads.
UNSAFE_DOTENV_VARIABLES = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "PYTHONSTARTUP",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONUSERBASE",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "RUBYLIB",
        "JAVA_TOOL_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "_JAVA_OPTIONS",
        "GCONV_PATH",
        "IFS",
    }
)
UNSAFE_DOTENV_PREFIXES = ("LD_", "DYLD_", "BASH_FUNC_")


def parse_dotenv(text: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a ``.env`` text sets, read as python-dotenv reads it (see :mod:`toolexec.runtimes.envfile`).

    ``${NAME}`` expands from ``environ``, then from earlier lines: pass the environment the tool itself
    gets, so that a ``.env`` line never brings back what is kept from tools. A name or value no environment
    can hold (``=`` in a name, a NUL) is left out.
    """
    from toolexec.runtimes.envfile import bindings, expanded

    values = expanded(bindings(text), environ)
    return {k: v for k, v in values.items() if v is not None and "=" not in k and "\0" not in k and "\0" not in v}


def without_unsafe(values: Mapping[str, str]) -> dict[str, str]:
    """``values`` read from a ``.env`` file, less :data:`UNSAFE_DOTENV_VARIABLES` and the prefixed kinds."""
    return {
        key: value
        for key, value in values.items()
        if key not in UNSAFE_DOTENV_VARIABLES and not key.startswith(UNSAFE_DOTENV_PREFIXES)
    }


def dotenv_values(functions_dir: Path, extra: tuple[Path, ...] = (), *, environ: Mapping[str, str]) -> dict[str, str]:
    """Values from ``functions/.env``, then ``functions/tools/.env`` (the nearer file wins).

    ``${NAME}`` in a file expands from ``environ`` (the environment the tool gets besides these files) and
    the files read before it; the unsafe variables (:func:`without_unsafe`) are left out.
    """
    merged: dict[str, str] = {}
    folder = os.fspath(functions_dir)
    for path in (os.path.join(folder, ".env"), os.path.join(folder, "tools", ".env"), *map(os.fspath, extra)):
        try:
            with open(path, "rb") as handle:
                # surrogateescape: a byte that is not UTF-8 reaches the tool as it is, and spoils nothing else
                text = handle.read().decode("utf-8", "surrogateescape")
        except OSError:  # missing, a directory, unreadable: no values from it
            continue
        merged.update(without_unsafe(parse_dotenv(text, {**merged, **environ})))
    return merged


def tool_environment(
    base: Mapping[str, str],
    *,
    functions_dir: Path,
    cache_dir: Path,
    tool: str,
    call_id: str,
    output_path: str,
    dotenv: Mapping[str, str],
    artifacts_dir: str | None = None,
    raw_json: str | None = None,
    trusted: Sequence[Path] = (),
    secrets: tuple[str, ...] = (),
    input_request: str | None = None,
    answers: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``.env`` values under the caller's environment (which wins), then the LLM_* variables, and ``TERM=dumb``
    (with :data:`TERMINFO` first on ``TERMINFO_DIRS``) when neither gives a terminal type.

    ``raw_json`` is the call's arguments as sent (``LLM_TOOL_RAW_JSON``, which Coyote's tools read),
    set when it is at most :data:`RAW_JSON_LIMIT` bytes; ``trusted`` becomes :data:`TRUSTED_PATHS_VARIABLE`.
    No variable of toolexec's own environment named by ``secrets`` (names, or patterns such as ``AWS_*``: see
    :func:`without_secrets`) is passed on.

    ``input_request`` (the call can ask: :mod:`toolexec.asking`) becomes ``LLM_INPUT_REQUEST``, ``answers`` the
    answer variables, and the prompt helpers the asking ones (:data:`PROMPT_ASK`); a value of those variables
    from anywhere else (the caller's environment, a ``.env`` file) is dropped.
    """
    env = {**dotenv, **(without_secrets(base, secrets) if secrets else base)}
    for name in [name for name in env if name in ASKING_VARIABLES or name.startswith(ANSWER_PREFIX)]:
        del env[name]
    env.update(
        LLM_OUTPUT=output_path,
        LLM_ROOT_DIR=str(functions_dir),
        LLM_TOOL_NAME=tool,
        LLM_TOOL_CACHE_DIR=str(cache_dir),
        LLM_TOOL_CALL_ID=call_id,
        LLM_PROMPT_UTILS_FILE=str(PROMPT_ASK if input_request is not None else prompt_utils(functions_dir)),
    )
    if input_request is not None:
        env["LLM_INPUT_REQUEST"] = input_request
        env.update(answers or {"LLM_INPUT_RESPONSES": "{}"})
    if artifacts_dir is not None:  # the call's directory for files it returns (toolexec.artifacts)
        env["LLM_ARTIFACTS_DIR"] = artifacts_dir
    else:
        env.pop("LLM_ARTIFACTS_DIR", None)  # never a stale one from the caller's environment
    env[TRUSTED_PATHS_VARIABLE] = os.pathsep.join(str(path) for path in trusted)
    env[TRUSTED_IDS_VARIABLE] = ",".join(_identities(trusted))
    if not env.get("TERM"):
        env["TERM"] = "dumb"
        env["TERMINFO_DIRS"] = f"{TERMINFO}:{env.get('TERMINFO_DIRS', '')}"  # an empty entry: the system's own
    if raw_json is not None and len(raw_json.encode("utf-8", "surrogateescape")) <= RAW_JSON_LIMIT:
        env["LLM_TOOL_RAW_JSON"] = raw_json
    else:
        env.pop("LLM_TOOL_RAW_JSON", None)  # never a stale value from the caller's environment
    return env


def without_secrets(environ: Mapping[str, str], secrets: tuple[str, ...]) -> dict[str, str]:
    """``environ`` without the variables ``secrets`` names: exact names, or shell-style patterns (``AWS_*``).

    The one rule for what toolexec keeps from its tools: the config's ``secret_env`` and ``mcp.token_env``
    (:meth:`toolexec.config.Config.secret_names`), applied to every call on every surface.
    """
    if not secrets:
        return dict(environ)
    exact = {name for name in secrets if not any(c in name for c in "*?[")}
    patterns = [name for name in secrets if name not in exact]
    if patterns:
        from fnmatch import fnmatchcase

        return {k: v for k, v in environ.items() if k not in exact and not any(fnmatchcase(k, p) for p in patterns)}
    return {k: v for k, v in environ.items() if k not in exact}


class _Seen:
    """``os.environ`` as it was last read: its bytes (compared, never decoded again while unchanged), its text, and
    what was made of it (each secrets rule's filtered copy, whether an ``OTEL_*`` variable is set)."""

    __slots__ = ("filtered", "otel", "raw", "text")

    def __init__(self, raw: dict[bytes, bytes]) -> None:
        self.raw = raw
        decode_key, decode_value = os.environ.decodekey, os.environ.decodevalue  # bytes to text, as os.environ does
        self.text: dict[str, str] = {decode_key(k): decode_value(v) for k, v in raw.items()}  # type: ignore[arg-type]
        self.filtered: dict[tuple[str, ...], dict[str, str]] = {}
        self.otel = any(name.startswith("OTEL_") for name in self.text)


_seen: _Seen | None = None


def _environ() -> _Seen | None:
    """What :class:`_Seen` holds of ``os.environ`` now: made again only when it changed (one comparison of two dicts
    of bytes, in C, where decoding every variable and copying took most of a call's environment work); None where
    ``os.environ`` does not keep its values as CPython does on POSIX (then it is read as it is)."""
    global _seen
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict) or not hasattr(os.environ, "decodekey"):
        return None
    seen = _seen
    if seen is None or seen.raw != data:
        seen = _seen = _Seen(dict(data))  # a copy: os.environ may change afterwards (another thread's putenv)
    return seen


def caller_environment(secrets: tuple[str, ...] = ()) -> Mapping[str, str]:
    """``os.environ`` without the variables ``secrets`` names (:func:`without_secrets`), made once per state of
    ``os.environ`` and rule: read-only (copy it to change it)."""
    seen = _environ()
    if seen is None:
        return without_secrets(os.environ, secrets)
    found = seen.filtered.get(secrets)
    if found is None:
        found = seen.filtered[secrets] = without_secrets(seen.text, secrets)
    return found


def command_environment() -> Mapping[str, str]:
    """``os.environ`` as text, whole (its secrets in it: never a tool's), made once per state of ``os.environ`` and
    shared with :func:`caller_environment`: read-only (copy it to change it)."""
    seen = _environ()
    return seen.text if seen is not None else os.environ


def otel_variables() -> bool:
    """Whether an ``OTEL_*`` variable is set (known once per state of ``os.environ``)."""
    seen = _environ()
    return seen.otel if seen is not None else any(name.startswith("OTEL_") for name in os.environ)


def prompt_utils(functions_dir: Path) -> Path:
    """The prompt helpers Bash tools source: the user's ``utils/prompt-utils.sh``, else toolexec's."""
    own = functions_dir / "utils" / "prompt-utils.sh"
    return own if own.is_file() else PROMPT_UTILS


def _identities(paths: Sequence[Path]) -> list[str]:
    """``DEVICE:INODE`` of each path (links followed, as the file tools resolve them), empty where it does not exist."""
    found = []
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            found.append("")
            continue
        found.append(f"{status.st_dev}:{status.st_ino}")
    return found
