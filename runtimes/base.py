"""What a language runtime provides to the call engine: one method, :meth:`Runtime.prepare`."""

from __future__ import annotations

from toolexec.recordtype import field, record

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any, Protocol

    from toolexec.records import ToolDeclaration
    from toolexec.runtimes.warm import WarmSpec
    from toolexec.state import State
else:
    Protocol = object  # at run time Runtime is a plain base class; type checkers see the protocol


@record
class Site:
    """Where a call happens: what a runtime may consult to prepare it (never changes it)."""

    functions_dir: Path
    cwd: Path
    state: State
    # Interpreter overrides from config (``runtimes:``), per language.
    runtimes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The environment the tool will get (caller's, .env files, LLM_* variables).
    env: Mapping[str, str] = field(default_factory=dict)
    # The source text the declaration was compiled from: a runtime that can hand it to the interpreter runs
    # exactly it (None: read the file).
    code: str | None = None
    # The call may run warm (:mod:`toolexec.runtimes.warm`): a runtime that can says how in Prepared.warm.
    warm: bool = False


@record
class Prepared:
    """How to start one call: the argv, the bytes on stdin, and variables to add to the environment."""

    argv: list[str]
    stdin: bytes
    env_additions: dict[str, str] = field(default_factory=dict)
    # What the result should tell about how the call was prepared (e.g. a fallback interpreter).
    notes: tuple[str, ...] = ()
    # How the launch takes the call's file size bound (RLIMIT_FSIZE) from ``TOOLEXEC_FILE_LIMIT`` before the tool's
    # first line, so that no extra program starts it: its bootstrap sets it itself, in multiples of this many bytes
    # (0: it cannot; see :data:`toolexec.runtimes.process.FILE_LIMIT_VARIABLE`) ...
    sets_file_limit: int = 0
    # ... or its bootstrap waits until toolexec has set it on the started process (Linux).
    awaits_file_limit: bool = False
    # How to start this tool warm, when the site asked and the runtime can (None: the call is spawned cold).
    warm: WarmSpec | None = None


class Runtime(Protocol):
    """How one language's tools are started. The process itself is run by :mod:`toolexec.runtimes.process`."""

    def prepare(self, tool: ToolDeclaration, arguments: dict[str, Any], site: Site) -> Prepared:
        """The launch of one call, or ``CallRefused`` (a precondition, an argument the runtime cannot
        pass) or ``RuntimeUnavailable`` (no interpreter, a failed transpile)."""
        ...
