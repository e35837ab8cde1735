"""A one-shot ``toolexec run`` of a JavaScript or TypeScript tool starts its node first, before toolexec imports itself.

A cold one-shot call pays Python's start, toolexec's imports and the call's own work (~40 ms), then node's start
(~25 ms). Node's start does not depend on the call: the installed command (:mod:`toolexec.entry`) starts it at once,
as a *spare* (``node node_bootstrap.cjs TOOL`` waiting on stdin for its call, the tool not imported yet), from what
the last one-shot run of the same tool, from the same place, wrote down: the spare's argv (under the sandbox's
baseline, bwrap's included) and what it adds to the environment. The two starts then run side by side.

When the call is launched, the process helper adopts the spare if it is exactly what a cold start of this call
would have been (:func:`take`): the same argv, and the same environment but for the call's own ``LLM_*`` and
toolexec's variables, which the spare takes with the call, before the tool is imported (:func:`_compatible`). The call is then handed to it as to a warm spare (:mod:`toolexec.runtimes.warm_node`): its limits set
on the node, its pids cgroup joined by the node itself, its environment, working directory and request down its
stdin. Otherwise the spare is ended, unused, and the call starts cold; what this call's start would be is written
down for the next run (:func:`remember`). A run that launches nothing ends its spare at exit.

This module is imported before the rest of toolexec: the standard library's ``os`` and ``subprocess`` (and what that
imports), and :mod:`toolexec.serve_client` (which the run imported to try a server: how the config is named on the
command line, and the digest of the files named after it, are read the same way by both).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess

from toolexec.serve_client import config_option, fnv1a64  # (imported already: the run tried a server first)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

INFO = "{info-fd}"  # where the remembered argv names bwrap's --info-fd: this run's own descriptor
SPARE_VARIABLE = "TOOLEXEC_NODE_SPARE"
# What the spare takes with its call (the call's own, or toolexec's): never compared with what node started with.
_PER_CALL_PREFIXES = ("LLM_", "TOOLEXEC_")
_PER_CALL = frozenset({"TRACEPARENT", "TRACESTATE", "BAGGAGE"})


class Early:
    """The spare this run started, and the memo it came from."""

    def __init__(self, memo: str, known: bytes) -> None:
        self.memo, self.known = memo, known
        self.argv: list[str] = []  # as remembered (with INFO)
        self.additions: dict[str, str] = {}
        self.env: dict[str, str] = {}  # what node started with
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = self.info = self.progress = -1
        self.progress_in_spare = -1

    def start(self) -> None:
        """Start the remembered spare (nothing when the memo is not one)."""
        fields = self.known.decode("utf-8", "surrogateescape").split("\0")
        if "" not in fields:
            return
        cut = fields.index("")
        self.argv = fields[:cut]
        self.additions = dict(entry.split("=", 1) for entry in fields[cut + 1 :] if "=" in entry)
        if not self.argv:
            return
        ready_read, ready_write = os.pipe()
        self.progress, progress_write = os.pipe()
        info_read, info_write = os.pipe() if INFO in self.argv else (-1, -1)
        self.progress_in_spare = progress_write
        self.env = {**os.environ, **self.additions}
        argv = [str(info_write) if word == INFO else word for word in self.argv]
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**self.env, SPARE_VARIABLE: f"{ready_write}:{progress_write}:lazy"},
                start_new_session=True,
                close_fds=True,
                pass_fds=(ready_write, progress_write, *([info_write] if info_write >= 0 else [])),
            )
        except OSError:
            for fd in (ready_read, self.progress, info_read):
                _close(fd)
            self.progress = -1
            return
        finally:
            for fd in (ready_write, progress_write, info_write):
                _close(fd)
        self.ready, self.info = ready_read, info_read

    def matches(self, argv: Sequence[str], env: Mapping[str, str]) -> bool:
        """Whether the spare is what a cold start with ``argv`` (INFO for bwrap's info descriptor) and ``env`` makes."""
        return self.proc is not None and list(argv) == self.argv and _compatible(self.env, env, self.additions)

    def discard(self) -> None:
        """End an unused spare and release what this process holds of it."""
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for name in ("ready", "info", "progress"):
            _close(getattr(self, name))
            setattr(self, name, -1)


_early: Early | None = None


def begin(argv: Sequence[str]) -> None:
    """Start the spare a one-shot ``run`` of ``argv`` (the command's words) remembered, if any (see the module)."""
    global _early
    memo = memo_path(argv)
    if memo is None:
        return
    try:
        with open(memo, "rb") as handle:
            known = handle.read()
    except OSError:
        known = b""
    _early = Early(memo, known)
    if known:
        _early.start()
        atexit.register(_end)


def take(argv: Sequence[str], env: Mapping[str, str]) -> Early | None:
    """The started spare, handed over (once) when it is what ``argv`` and ``env`` would start; else None (and an
    unused spare is ended)."""
    early = _early
    if early is None or early.proc is None:
        return None
    if early.matches(argv, env):
        return early
    early.discard()
    return None


def remember(argv: Sequence[str], additions: Mapping[str, str], env: Mapping[str, str]) -> None:
    """Write down what this run's start was (argv with INFO, the environment it added), for the next run: only where
    the next run's spare could be adopted (the call's environment is the command's own, as far as node reads it)."""
    early = _early
    if early is None:
        return
    wanted = b""
    if _compatible({**os.environ, **additions}, env, additions):
        fields = [*argv, "", *(f"{name}={value}" for name, value in additions.items())]
        wanted = "\0".join(fields).encode("utf-8", "surrogateescape")
    if wanted == early.known:
        return
    try:
        if not wanted:
            os.unlink(early.memo)
            return
        os.makedirs(os.path.dirname(early.memo), mode=0o700, exist_ok=True)
        staging = f"{early.memo}.{os.getpid()}"
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as out:
            out.write(wanted)
        os.replace(staging, early.memo)
    except OSError:
        pass
    early.known = wanted


def began() -> bool:
    """Whether this process is a one-shot run that may start a spare (and remembers its start for the next one)."""
    return _early is not None


def memo_path(argv: Sequence[str]) -> str | None:
    """Where the start of a one-shot ``run`` of ``argv`` is remembered: keyed by the working directory, the config
    named (``--config``, ``TOOLEXEC_CONFIG``) and the tool's name, in toolexec's cache (a folder of the user's own
    that only they can open; None when it is not one, or ``argv`` names no tool)."""
    words = list(argv)
    if "run" not in words:
        return None
    rest = words[words.index("run") + 1 :]
    given = config_option(words)
    config = os.environ.get("TOOLEXEC_CONFIG", "") if given is None else given
    name = None
    skip = False
    for word in rest:
        if skip:
            skip = False
        elif word in ("--config", "--timeout", "--call-id", "--confirm"):
            skip = True
        elif not word.startswith("-"):
            name = word
            break
    if name is None:
        return None
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(cache, "toolexec", "one-shot")
    try:
        info = os.lstat(folder)
        if info.st_uid != os.getuid() or info.st_mode & 0o077 or not os.path.isdir(folder) or os.path.islink(folder):
            return None
    except FileNotFoundError:
        pass  # made by the first remember()
    except OSError:
        return None
    key = "\0".join((os.getcwd(), config, name))
    return os.path.join(folder, f"{fnv1a64(os.fsencode(key)):016x}")


def _compatible(start: Mapping[str, str], call: Mapping[str, str], additions: Mapping[str, str]) -> bool:
    """Whether a node started with ``start`` stands for one started with ``call``: every variable it started with is
    the call's too, with the same value (so nothing the call may not see, a secret toolexec keeps from its tools, is
    in what the node's ``/proc/self/environ`` shows), but for what toolexec added to the start (``additions``); and
    the call adds only its own and toolexec's variables, which the node takes with the call, before the tool's first
    line (anything else, a ``.env`` file's ``NODE_OPTIONS`` say, node's start might have read)."""
    if any(name not in additions and call.get(name) != value for name, value in start.items()):
        return False
    return all(name in start or name in _PER_CALL or name.startswith(_PER_CALL_PREFIXES) for name in call)


def _end() -> None:
    if _early is not None:
        _early.discard()


def _close(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)
