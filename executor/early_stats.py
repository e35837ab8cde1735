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
    from collections.abc import Iterable, Sequence

__all__ = ["begin", "remember", "stats_for"]

COMMANDS = frozenset({"list", "build"})  # the commands whose work starts with a whole no-change check
MAX_MEMO = 64 << 20  # a folder and a few hundred thousand names
CHUNK = 512  # the files the child stats before it sends their stats
SHARE = 256  # the files the check stats itself at a time, from the last back, while the child is not done
_VALUED = frozenset({"--config", "--agent", "--var"})  # the options before the command that take a value


class _Child:
    """The forked child taking the stats, and the memo it took them from."""

    def __init__(self, memo: str, known: bytes) -> None:
        self.memo, self.known = memo, known
        self.pid, self.fd = -1, -1

    def start(self) -> None:
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
                # the names as the memo holds them, encoded: the system call takes bytes as they are (no name
                # decoded, in either process, before the stats start); CHUNK at a time, each sent as it is taken
                folder, _, names = self.known.partition(b"\0\0")
                files = names.split(b"\0") if names else []
                _send(write, (stat_bytes(folder, files[first : first + CHUNK]) or b"" for first in range(0, len(files), CHUNK)))
                status = 0
            finally:
                os._exit(status)
        os.close(write)
        self.pid, self.fd = pid, read

    def take(self, tools_dir: str, files: Sequence[str]) -> bytes:
        """The packed stats of ``files`` (the memo's): the child's as far as it got, the rest taken here from the
        last file back until the two meet (a child still running when the check wants them, on a loaded machine or
        one core, costs the check half its stats, not the wait for all of them); the child ended and reaped."""
        count, got = len(files), bytearray()
        times: list[bytes] = []  # the child's, chunk by chunk
        sizes: list[bytes] = []
        mine: list[tuple[bytes, bytes]] = []  # this process's, from the last file back
        done, upto, ended = 0, count, False  # the child's files are [0, done); this process's [upto, count)
        os.set_blocking(self.fd, False)
        while done < upto:
            if not ended:
                try:
                    chunk = os.read(self.fd, 1 << 20)
                    got += chunk
                    ended = not chunk  # the child closed its end: it is done (or it died)
                except BlockingIOError:
                    pass
                except OSError:
                    ended = True
                while done < upto and len(got) >= (size := 32 * min(CHUNK, count - done) + 1):
                    half = (size - 1) // 2
                    times.append(bytes(got[:half]))
                    sizes.append(bytes(got[half + 1 : size]))
                    del got[:size]
                    done += (size - 1) // 32
            if done >= upto:
                break
            first = done if ended else max(done, upto - SHARE)  # the child gone: every file left is this process's
            packed = stat_bytes(tools_dir, files[first:upto]) or b""
            half = len(packed) // 2
            mine.append((packed[:half], packed[half + 1 :]))
            upto = first
        self.end(kill=True)
        kept = 16 * upto  # the child's stats of the files this process did not take (it may have taken more)
        ahead = b"".join(times)[:kept], b"".join(sizes)[:kept]
        behind = mine[::-1]
        return b"".join((ahead[0], *(t for t, _ in behind), b"\0", ahead[1], *(z for _, z in behind)))

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
    return child.take(tools_dir, files)


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
    # one join and one encoding of it (a name's encoding is its own whatever its neighbours: NUL is ASCII's in
    # every encoding a file system's names take), not one call per name: 10,000 names cost ~3 ms that way
    return os.fsencode(tools_dir) + b"\0\0" + os.fsencode("\0".join(files))


def _send(write: int, chunks: Iterable[bytes]) -> None:
    """Write each of ``chunks`` to the pipe ``write`` as soon as it takes it, never waiting for a reader while there
    are stats left to take (the check reads them only when it wants them), then the rest, waiting."""
    import contextlib  # noqa: PLC0415 - in the child only (the parent imports neither before it needs them)
    import fcntl  # noqa: PLC0415

    with contextlib.suppress(OSError):  # room for 30,000 files' stats, read in one go (else the pipe as it is)
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 1 << 20)
    os.set_blocking(write, False)
    pending = bytearray()
    for chunk in chunks:
        pending += chunk
        with contextlib.suppress(BlockingIOError):  # the pipe full: the next chunk's stats first
            del pending[: os.write(write, pending)]
    os.set_blocking(write, True)
    data = memoryview(pending)
    while data:
        data = data[os.write(write, data) :]


def _end() -> None:
    if _child is not None:
        _child.end(kill=True)
