"""Approval: a ``before_call`` hook sees each call, with its tool and validated arguments, before it runs.

The hook (a plain or an ``async`` function) returns what to do::

    def before_call(request: ApprovalRequest) -> Decision:
        if request.may_modify:   # not declared read-only or non-destructive, as --confirm destructive reads it
            return Deny("this tool needs a person's yes")   # the model reads this, as an error result
        if request.tool.name == "fs_ls" and "path" not in request.arguments:
            return Rewrite({**request.arguments, "path": "."})        # re-validated before it runs
        return None                                                   # allow (so does True)

    Executor(before_call=before_call)

``False`` denies without a reason of its own. A hook that raises denies the call too,
with the exception as the reason. :func:`confirm_on_terminal` is the hook behind
``toolexec run/call --confirm destructive|all``.
"""

from __future__ import annotations

import json
import select
import threading
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, NamedTuple, Protocol

from toolexec.records import Annotations, InputRequest, InputResponse, ToolDeclaration

__all__ = ["ApprovalRequest", "BeforeCall", "Decision", "Deny", "Rewrite", "confirm_on_terminal", "needs_confirmation"]


@dataclass(frozen=True)
class ApprovalRequest:
    """One call awaiting approval: the tool (with its annotations), the validated arguments, the call id."""

    tool: ToolDeclaration
    arguments: dict[str, Any]
    call_id: str | None

    @property
    def annotations(self) -> Annotations:
        """The tool's behaviour hints (read-only, destructive, idempotent, open-world; None when undeclared)."""
        return self.tool.metadata.annotations

    @property
    def may_modify(self) -> bool:
        """Whether the tool may modify something: it is declared neither read-only nor non-destructive.

        A tool without hints may (MCP's reading of undeclared hints), so this is not
        ``annotations.destructive``, which is None then. ``--confirm destructive`` asks about these tools.
        """
        return needs_confirmation(self.tool, "destructive")


class Deny(NamedTuple):
    """Do not run the call; ``reason`` is what the model reads."""

    reason: str


class Rewrite(NamedTuple):
    """Run the call with these arguments instead (they are validated again first)."""

    arguments: dict[str, Any]


Decision = Deny | Rewrite | bool | None
BeforeCall = Callable[[ApprovalRequest], "Decision | Awaitable[Decision]"]
# What answers a tool's question mid-call (toolexec.asking; Executor(on_input=...)): an InputResponse or its JSON
# form ({"action": "accept", "content": {...}}), or None to hand the question back as an input_required result;
# or a coroutine function giving the same.
OnInput = Callable[[InputRequest], "InputResponse | dict[str, Any] | Awaitable[InputResponse | dict[str, Any] | None] | None"]

ConfirmMode = Literal["destructive", "all"]


def needs_confirmation(tool: ToolDeclaration, mode: ConfirmMode) -> bool:
    """Whether ``--confirm mode`` asks before ``tool`` runs.

    ``destructive`` asks for every tool that may modify something: all but the ones
    declared read-only or declared not destructive (MCP's reading of undeclared hints).
    """
    if mode == "all":
        return True
    hints = tool.metadata.annotations
    return hints.read_only is not True and hints.destructive is not False


class Waker(Protocol):
    """What ends a pending question when it becomes readable: a :class:`~toolexec.runtimes.process.CallControl`."""

    def fileno(self) -> int:
        """A descriptor that becomes readable when the question should end."""
        ...


def confirm_on_terminal(mode: ConfirmMode, *, terminal: str = "/dev/tty", wake: Waker | None = None) -> BeforeCall:
    """A hook that asks on the terminal (not stdin, which may hold the batch) before the calls ``mode`` names.

    Only ``y`` or ``yes`` allows; anything else, or no terminal to ask on, denies.
    Questions are asked one at a time. When ``wake`` becomes readable (the CLI's call
    control, cancelled by Ctrl-C or SIGTERM) a pending question ends and the call is cancelled (nothing runs).
    """
    lock = threading.Lock()

    def ask(request: ApprovalRequest) -> Decision:
        if not needs_confirmation(request.tool, mode):
            return None
        arguments = _printable(json.dumps(request.arguments, ensure_ascii=False))
        with lock:
            try:
                # Unbuffered bytes: a terminal is not seekable, which the text mode "r+" would need.
                with open(terminal, "rb+", buffering=0) as tty:
                    answer = _ask(tty, f"toolexec: run {request.tool.name} {arguments}? [y/N] ", wake)
            except OSError:
                return Deny(f"--confirm {mode} needs a terminal to ask on, and there is none")
        if answer is None:
            return Deny("cancelled while asking; nothing ran")
        if answer in ("y", "yes"):
            return None
        return Deny("the user declined the call")

    return ask


def _printable(text: str) -> str:
    """``text`` with every control and format character escaped: a model's arguments never steer the terminal."""
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c)[0] == "C" else c for c in text)


def _ask(tty: BinaryIO, question: str, wake: Waker | None) -> str | None:
    """Write ``question`` and read one line of answer (at most 256 bytes; end of input is no answer);
    None when ``wake`` became readable first."""
    tty.write(question.encode("utf-8", "backslashreplace"))
    waiting = [tty] if wake is None else [tty, wake]
    if wake is not None and wake in select.select(waiting, [], [])[0]:
        tty.write(b"\n")  # the question's line ends; the answer will not come
        return None
    return tty.readline(256).decode("utf-8", "replace").strip().lower()
