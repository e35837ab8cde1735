"""A ``list`` or a ``build`` takes the no-change check's stats in a child it forks at its start, beside its imports.

A no-change check stats every visible tool file (:meth:`toolexec.catalog.Catalog.is_fresh`; a file edited in place
changes no directory, so nothing cheaper is sound without a watcher): ~25 ms at 10,000 files, after ~35 ms of
toolexec's own start that does not depend on them. The installed command (:mod:`toolexec.entry`) forks, before it
imports the rest of toolexec, a child that stats the files the last such command of the same config, from the same
place, checked (a *memo*: the tools folder and the visible files' names, in order) and sends the packed stats back
through a pipe (:func:`toolexec.filestats.stat_bytes`, the check's own loop). The check takes them
(:func:`stats_for`) only when it checks that very folder and those very names, in that order; otherwise it ends the
child and stats the files itself, then writes down what it checked for the next command (:func:`remember`).

So a memo that is stale, another config's, or forged changes nothing but whether the stats were taken early: what is
compared with the catalog is always the stats of the files this command's config names. They are taken after the
command started, as its own would be: a file edited before the command started is seen; one edited while it runs may
be seen or not, as before. On one core the child's work is the command's own, moved; on two it is hidden behind the
imports (``benchmarks/scale_bench.py``). The memo is read only when only this user could have written it
(:func:`toolexec.early.read_own`), in toolexec's cache.

This module is imported before the rest of toolexec, with what it needs of :mod:`toolexec.early` (the memos'
folder, reading and writing them), :mod:`toolexec.filestats` and :mod:`toolexec.serve_client` (how the config is
named on the command line, the digest of a name).
"""

from __future__ import annotations

import atexit
import os

from toolexec.early import cache_folder, read_own, write_own
from toolexec.filestats import stat_bytes
from toolexec.serve_client import config_option, fnv1a64

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["begin", "remember", "stats_for"]

COMMANDS = frozenset({"list", "build"})  # the commands whose work starts with a whole no-change check
MAX_MEMO = 64 << 20  # a folder and a few hundred thousand names
_VALUED = frozenset({"--config", "--agent", "--var"})  # the options before the command that take a value


class _Child:
    """The forked child taking the stats, and the memo it took them from."""

    def __init__(self, memo: str, known: bytes) -> None:
        self.memo, self.known = memo, known
        self.pid, self.fd = -1, -1

    def start(self) -> None:
        folder, _, names = self.known.partition(b"\0\0")
        files = [os.fsdecode(name) for name in names.split(b"\0")] if names else []
        tools_dir = os.fsdecode(folder)
        read, write = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            return
        if pid == 0:  # the child: the stats, down the pipe, and out (no exit handler, no buffered stream of the parent)
            status = 1
            try:
                os.close(read)
                for fd in (0, 1, 2):  # never the command's streams: a parent killed (-9) leaves its caller's pipe open
                    if fd != write:  # (as long as this child stats, a forged memo's millions of names say)
                        try:  # noqa: SIM105 - (contextlib is not imported before toolexec)
                            os.close(fd)
                        except OSError:
                            pass
                data = memoryview(stat_bytes(tools_dir, files) or b"")
                while data:
                    data = data[os.write(write, data) :]
                status = 0
            finally:
                os._exit(status)
        os.close(write)
        self.pid, self.fd = pid, read

    def take(self) -> bytes | None:
        """The child's stats once it has ended well, else None."""
        chunks = []
        try:
            while True:
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        except OSError:
            chunks = []
        _, status = self.end()
        return b"".join(chunks) if status == 0 and chunks else None

    def end(self, *, kill: bool = False) -> tuple[int, int]:
        """Reap the child (killed first with ``kill``); its status, once."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.pid <= 0:
            return 0, -1
        pid, self.pid = self.pid, -1
        try:
            if kill:
                os.kill(pid, 9)
            return os.waitpid(pid, 0)
        except OSError:
            return 0, -1


_child: _Child | None = None


def begin(argv: Sequence[str]) -> None:
    """Fork the child for a ``list`` or ``build`` of ``argv`` (the command's words) when its memo names files."""
    global _child
    memo = memo_path(argv)
    if memo is None:
        return
    known = read_own(memo, MAX_MEMO)
    _child = _Child(memo, known)
    if b"\0\0" in known:
        _child.start()
        atexit.register(_end)


def stats_for(tools_dir: str, files: Sequence[str]) -> bytes | None:
    """The packed stats of ``files`` in ``tools_dir`` the child took, when it took them of exactly these (once); else
    None (and a child that took others is ended)."""
    child = _child
    if child is None or child.pid <= 0:
        return None
    if child.known != _memo(tools_dir, files):
        child.end(kill=True)
        return None
    return child.take()


def remember(tools_dir: str, files: Sequence[str]) -> None:
    """Write down what this command checked, for the next one (nothing when it is what its memo says already)."""
    child = _child
    if child is None:
        return
    wanted = _memo(tools_dir, files)
    if wanted == child.known:
        return
    write_own(child.memo, wanted)
    child.known = wanted


def memo_path(argv: Sequence[str]) -> str | None:
    """Where a ``list`` or ``build`` of ``argv`` remembers its check: keyed by the working directory and the config
    named (``--config``, ``TOOLEXEC_CONFIG``), in toolexec's cache; None for any other command."""
    skip = False
    command = None
    for word in argv:
        if skip:
            skip = False
        elif word in _VALUED:
            skip = True
        elif not word.startswith("-"):
            command = word
            break
    if command not in COMMANDS:
        return None
    folder = cache_folder("fresh")
    if folder is None:
        return None
    given = config_option(argv)
    config = os.environ.get("TOOLEXEC_CONFIG", "") if given is None else given
    try:
        here = os.getcwd()
    except OSError:  # a working directory removed: nothing is remembered for it (the command goes on as it would)
        return None
    key = "\0".join((here, config))
    return os.path.join(folder, f"{fnv1a64(os.fsencode(key)):016x}")


def _memo(tools_dir: str, files: Sequence[str]) -> bytes:
    names = b"\0".join(os.fsencode(name) for name in files)
    return os.fsencode(tools_dir) + b"\0\0" + names


def _end() -> None:
    if _child is not None:
        _child.end(kill=True)
