"""``toolexec run --ask`` / ``toolexec call --ask``: a tool's questions (:mod:`toolexec.asking`) answered on the
terminal, one field at a time.

The terminal is ``/dev/tty`` (stdin may hold the arguments or the batch). A question with no fields is a yes/no
(``y`` accepts, anything else declines); otherwise each field is asked in turn, with its choices, bounds and
default shown, until the answer fits (an empty line takes the default, or leaves out a field that is not
required). End of input (Ctrl-D) cancels the question; so does the call being cancelled (Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import select
import threading
from typing import Any, BinaryIO

from toolexec.approval import Waker, _ask, _printable
from toolexec.errors import BadRequest
from toolexec.records import InputRequest, InputResponse

TERMINAL = "/dev/tty"


def answer_on_terminal(*, terminal: str = TERMINAL, wake: Waker | None = None) -> Any:
    """The ``on_input`` of the CLI: asks on ``terminal``; BadRequest (exit status 2) at once when there is none."""
    try:
        with open(terminal, "rb+", buffering=0):
            pass
    except OSError:
        raise BadRequest("--ask needs a terminal to ask the tools' questions on, and there is none (no /dev/tty)") from None
    lock = threading.Lock()

    def on_input(request: InputRequest) -> InputResponse:
        with lock, open(terminal, "rb+", buffering=0) as tty:
            tty.write(f"toolexec: the tool asks: {_printable(request.message)}\n".encode("utf-8", "backslashreplace"))
            return _answer(tty, request, wake)

    return on_input


class _Cancelled(Exception):
    pass


def _answer(tty: BinaryIO, request: InputRequest, wake: Waker | None) -> InputResponse:
    properties: dict[str, Any] = request.schema.get("properties", {})
    required = set(request.schema.get("required", []))
    try:
        if not properties:
            said = _line(tty, "  answer? [y/N] ", wake)
            return InputResponse(action="accept" if said in ("y", "yes") else "decline")
        content = {}
        for name, prop in properties.items():
            value = _field(tty, name, prop, name in required, wake)
            if value is not None:
                content[name] = value
        return InputResponse(action="accept", content=content)
    except _Cancelled:
        return InputResponse(action="cancel")


def _line(tty: BinaryIO, prompt: str, wake: Waker | None) -> str:
    answer = _ask(tty, prompt, wake)
    if answer is None:
        raise _Cancelled
    return answer


def _raw_line(tty: BinaryIO, prompt: str, wake: Waker | None) -> str:
    """One line as typed (case kept); end of input or a wake cancels."""
    tty.write(prompt.encode("utf-8", "backslashreplace"))
    waiting: list[Any] = [tty] if wake is None else [tty, wake]
    if wake is not None and wake in select.select(waiting, [], [])[0]:
        tty.write(b"\n")
        raise _Cancelled
    data = tty.readline(4096)
    if not data:
        tty.write(b"\n")
        raise _Cancelled
    return data.decode("utf-8", "replace").rstrip("\r\n")


def _field(tty: BinaryIO, name: str, prop: dict[str, Any], required: bool, wake: Waker | None) -> Any:
    """One field's value, asked until it fits; None for an optional field left empty."""
    kind = str(prop.get("type"))
    label = _printable(str(prop.get("title") or name))
    choices = prop.get("enum") or (prop.get("items") or {}).get("enum")
    hint = {"boolean": "y/n", "integer": "a whole number", "number": "a number", "array": "comma-separated"}.get(kind, "text")
    if choices:
        hint = " | ".join(_printable(str(c)) for c in choices) + (" (comma-separated)" if kind == "array" else "")
    if "minimum" in prop or "maximum" in prop:
        hint += f", {prop.get('minimum', '')}..{prop.get('maximum', '')}"
    default = prop.get("default")
    shown = f" (default {_printable(str(default))})" if default is not None else ("" if required else " (optional)")
    while True:
        text = _raw_line(tty, f"  {label} [{hint}]{shown}: ", wake).strip()
        if not text:
            if default is not None:
                return default
            if not required:
                return None
            continue
        value = _parse(kind, text, choices)
        if value is not None and _fits(value, prop):
            return value
        tty.write(b"  (that does not fit; try again)\n")


def _parse(kind: Any, text: str, choices: list[str] | None) -> Any:
    if kind == "boolean":
        return {"y": True, "yes": True, "true": True, "n": False, "no": False, "false": False}.get(text.lower())
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            return None
    if kind == "array":
        items = [item.strip() for item in text.split(",") if item.strip()]
        return items if choices is None or all(item in choices for item in items) else None
    return text if choices is None or text in choices else None


def _fits(value: Any, prop: dict[str, Any]) -> bool:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return prop.get("minimum", value) <= value <= prop.get("maximum", value)
    if isinstance(value, str):
        return prop.get("minLength", 0) <= len(value) <= prop.get("maxLength", len(value))
    return True
