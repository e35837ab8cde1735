"""``toolexec new``: write a documented skeleton tool and list it in the user's config.

The config is edited as text, line by line, so that its comments, order and spelling survive:
the new file name is appended to ``visible_tools`` (and to ``enabled_tools`` unless that is
``all``), and the edited text is parsed again to prove the change is exactly the one intended.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from toolexec.config import Config
from toolexec.errors import BadRequest
from toolexec.records import name_problem

Lang = Literal["py", "sh", "ts", "js"]
LANGS: tuple[Lang, ...] = ("py", "sh", "ts", "js")

_PYTHON = '''"""{name}: say in one line what this tool is for."""


def run(text: str, count: int = 1) -> str:
    """Repeat a text: replace this sentence with what the tool does; the model reads it.

    Args:
        text: The text to repeat. Describe every parameter: the model reads these too.
        count: How many times to repeat it.

    Title: {title}
    Summary: Repeat a text a number of times.
    Tags: example
    Read-only: true
    Destructive: false
    Idempotent: true
    Open-world: false
    Examples:
        {{"text": "hello", "count": 2}}
    """
    return " ".join([text] * count)
'''

_BASH = """#!/usr/bin/env bash
set -euo pipefail

# @describe Repeat a text: replace this line with what the tool does; the model reads it.
# @option --text! The text to repeat. Describe every option: the model reads these too.
# @option --count=1 <INT> How many times to repeat it.
# @meta title {title}
# @meta summary Repeat a text a number of times.
# @meta tags example
# @meta read-only
# @meta destructive false
# @meta idempotent
# @meta open-world false
# @meta example {{"text": "hello", "count": 2}}

main() {{
    local words=()
    for ((i = 0; i < argc_count; i++)); do words+=("$argc_text"); done
    # What is appended to $LLM_OUTPUT is the tool's result.
    printf '%s' "${{words[*]}}" >>"$LLM_OUTPUT"
}}

eval "$(argc --argc-eval "$0" "$@")"
"""

_JSDOC = """/**
 * Repeat a text: replace this line with what the tool does; the model reads it.
 * @param text - The text to repeat. Describe every parameter: the model reads these too.
 * @param {{integer}} count - How many times to repeat it.
 * @title {title}
 * @summary Repeat a text a number of times.
 * @tags example
 * @readOnly
 * @destructive false
 * @idempotent
 * @openWorld false
 * @example {{"text": "hello", "count": 2}}
 */"""

_TYPESCRIPT = (
    "// {name}: say in one line what this tool is for.\n\n"
    + _JSDOC
    + """
export function run(text: string, count: number = 1): string {{
  return Array(count).fill(text).join(" ");
}}
"""
)

# The llm-functions form: CommonJS and one object argument, which runs on any Node without a package.json.
_JAVASCRIPT = """// {name}: say in one line what this tool is for.

/**
 * Repeat a text: replace this line with what the tool does; the model reads it.
 * @typedef {{Object}} Args
 * @property {{string}} text - The text to repeat. Describe every property: the model reads these too.
 * @property {{Integer}} [count=1] - How many times to repeat it.
 * @param {{Args}} args
 * @title {title}
 * @summary Repeat a text a number of times.
 * @tags example
 * @readOnly
 * @destructive false
 * @idempotent
 * @openWorld false
 * @example {{"text": "hello", "count": 2}}
 */
exports.run = function run({{ text, count = 1 }}) {{
  return Array(count).fill(text).join(" ");
}};
"""

_SKELETONS: dict[Lang, str] = {"py": _PYTHON, "sh": _BASH, "ts": _TYPESCRIPT, "js": _JAVASCRIPT}


@dataclass(frozen=True)
class Created:
    """What ``new`` did: the tool file it wrote and the config it edited."""

    tool: Path
    config: Path
    enabled: bool  # whether the tool was added to enabled_tools (False when that is `all`)


def skeleton(name: str, lang: Lang) -> str:
    """The source of a new tool called ``name`` in ``lang``."""
    title = name.replace("_", " ").replace("-", " ").strip().capitalize() or name
    return _SKELETONS[lang].format(name=name, title=title)


def new_tool(config: Config, name: str, lang: Lang) -> Created:
    """Write ``<tools_dir>/<name>.<lang>`` and list it in the config; refuse before touching anything."""
    if lang not in LANGS:
        raise BadRequest(f"unknown language {lang!r}; use one of {', '.join(LANGS)}")
    problem = name_problem(name)
    if problem is not None or "." in name:
        raise BadRequest(problem or f"invalid tool name {name!r}: leave out the extension; --lang chooses it")
    if config.embedded:
        raise BadRequest(
            f"no config of your own to add {name!r} to (the embedded default is in use); "
            "run `toolexec init` in a project folder first, or pass --config PATH"
        )
    file = f"{name}.{lang}"
    target = config.tools_dir / file
    if target.exists():
        raise BadRequest(f"{target} already exists; choose another name or edit that file")
    taken = {Path(f).name.split(".")[0].replace("-", "_") for f in config.visible_tools}
    if name.replace("-", "_") in taken:
        raise BadRequest(f"a tool named {name!r} is already listed in visible_tools of {config.path}")
    text = config.path.read_text(encoding="utf-8")
    if config.path.name == "tools.txt":
        edited, enabled = text + ("" if text.endswith("\n") or not text else "\n") + file + "\n", False
    else:
        edited, enabled = add_to_config(
            text, file, name, str(config.path), enables_none=not config.enabled_given and bool(config.foreign)
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(skeleton(name, lang), encoding="utf-8")
        if lang == "sh":
            target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    except OSError as exc:
        target.unlink(missing_ok=True)
        raise BadRequest(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        _replace_text(config.path, edited)
    except BadRequest:
        target.unlink(missing_ok=True)  # nothing half-done: no tool file without its config line
        raise
    return Created(tool=target, config=config.path, enabled=enabled)


def add_to_config(text: str, file: str, name: str, where: str = "config.yaml", *, enables_none: bool = False) -> tuple[str, bool]:
    """The config text with ``file`` in visible_tools and ``name`` in enabled_tools (unless `all`).

    ``enables_none``: the config enables no tool without enabled_tools (a Loki or Coyote config), so
    one is written, as the comma string Loki reads: ``enabled_tools: name``.

    Returns the new text and whether enabled_tools was changed. Every comment and line that is
    not part of the change is kept as it was; the result is parsed to prove nothing else changed.
    """
    before = _parse(text, where)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    lines = _append_item(lines, "visible_tools", file)
    enabled = before.get("enabled_tools")
    change_enabled = enabled is not None and not (isinstance(enabled, str) and enabled.strip() == "all")
    if change_enabled:
        lines = _append_item(lines, "enabled_tools", name)
    elif enabled is None and enables_none:
        lines = [line for line in lines if not ((m := _KEY.match(line)) and m["key"] == "enabled_tools")]
        lines.append(f"enabled_tools: {name}\n")
        change_enabled, enabled = True, ""
    edited = "".join(lines)
    try:
        after: Any = yaml.safe_load(edited)
    except yaml.YAMLError:
        after = None
    expected = dict(before)
    expected["visible_tools"] = [*(before.get("visible_tools") or []), file]
    if change_enabled:
        expected["enabled_tools"] = _with_name(enabled, name)
    if after != expected:
        raise BadRequest(f"cannot add {file} to {where} safely (an unusual layout); add it to visible_tools by hand")
    return edited, change_enabled


def _parse(text: str, where: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise BadRequest(f"{where} is not valid YAML ({exc}); fix it before adding a tool") from None
    if not isinstance(data, dict):
        raise BadRequest(f"{where} is not a mapping of settings; fix it before adding a tool")
    return data


def _with_name(value: Any, name: str) -> Any:
    if isinstance(value, list):
        return [*value, name]
    return f"{value}, {name}" if str(value).strip() else name


_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:(?P<rest>.*)$")


def _append_item(lines: list[str], key: str, item: str) -> list[str]:
    """Add ``item`` to the top-level ``key``: a block list, a flow list, a comma scalar, or a new key."""
    start = next((i for i, line in enumerate(lines) if (m := _KEY.match(line)) and m["key"] == key), None)
    if start is None:
        return [*lines, f"{key}:\n", f"  - {item}\n"]
    found = _KEY.match(lines[start])
    assert found is not None
    value, comment = _split_comment(found["rest"])
    if value.startswith("["):
        inner = value[1:].rstrip().removesuffix("]").rstrip()
        joined = f"[{inner}, {item}]" if inner.strip() else f"[{item}]"
        return [*lines[:start], f"{key}: {joined}{comment}\n", *lines[start + 1 :]]
    if value and value not in ("|", ">"):
        return [*lines[:start], f"{key}: {value}, {item}{comment}\n", *lines[start + 1 :]]
    # A block list: the item goes after the last item line, indented like the others.
    end, indent, last_item = start + 1, "  ", None
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t-#"):
        stripped = lines[end].lstrip()
        if stripped.startswith("- "):
            indent, last_item = lines[end][: len(lines[end]) - len(stripped)], end
        end += 1
    at = (last_item if last_item is not None else start) + 1
    return [*lines[:at], f"{indent}- {item}\n", *lines[at:]]


def _split_comment(rest: str) -> tuple[str, str]:
    """A key's value and its trailing comment (kept with its spacing)."""
    found = re.search(r"\s+#", rest)
    if found is None:
        return rest.strip(), ""
    return rest[: found.start()].strip(), rest[found.start() :].rstrip("\n")


def _replace_text(path: Path, text: str) -> None:
    """Write the edited config atomically, keeping its permissions."""
    temporary = path.with_name(f".{path.name}.toolexec-new")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.chmod(temporary, path.stat().st_mode & 0o7777)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise BadRequest(f"cannot write {path}: {exc.strerror or exc}") from None
