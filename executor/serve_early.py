"""Tools' processes started ahead of ``toolexec serve``'s calls: the one-shot run's early start, made by the waiting child.

A one-shot ``toolexec run`` starts its tool's process before it imports toolexec (:mod:`toolexec.early`): a cold
Python tool's interpreter (~10 ms, as much as ``python -c pass``), a Bash tool's bash, each under the baseline in its
bwrap, from what the last run of that tool, from that place, wrote down (a *memo*). A served call is a child forked
ahead by the server; its call's own start would be on its path. So the start is made ahead by the child that waits
for the call, from what the last served call was::

    child N (its call)  ── told(argv, cwd, env., umask): a datagram ──→  server: keeps the last; once no call runs,
                                                                         hands it to the child that waits
    child N+1 (waiting)  ←─ the last call (a pipe of its own) ─┘  stands where that call stood (its directory and
      environment, its umask) and starts the spare its memo names, exactly as a one-shot run in that place would
      (:func:`toolexec.early.begin`), then stands back; at its own call (:func:`toolexec.early.arrive`) the spare is
      kept only when this call's environment and config files are what it started with, and adopted only when it
      is what this call's cold start would be (:func:`toolexec.early.take`: kind, argv, directory (the very one, not
      only its path), umask, environment)

A Bash tool under the baseline is not told: it keeps the sandbox set up ahead (:mod:`toolexec.serve_spares`), whose
launcher starts its bash (faster on the call's path, measured as root, than its bash started ahead).

So nothing is started that a one-shot run of the same command, in the same place, would not start itself: the memo
is toolexec's own (read only when only this user could have written it), its start digest (the environment and
the config files) must match, and the tool's own code is read only once the call has its go (a tool edited on disk
in between runs its new code). What crosses between processes is plain data (``marshal`` of strings and bytes),
checked field by field, from the server's own children only (a socket pair made before they were forked); a
message that does not read back is dropped.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import socket

from toolexec import early
from toolexec.runtimes import process_linux

__all__ = ["MAX_TOLD", "ServedEarly", "read_call", "start_ahead", "write_call"]

MAX_TOLD = 1 << 17  # bytes of one call told: its words, its directory, its environment (a larger one is not told)


class ServedEarly:
    """In the server, the last call its children told (:attr:`next`, for the next waiting child); in a child, its end
    of that queue (see the module)."""

    def __init__(self, *, idle: float) -> None:
        self.idle = idle  # seconds a spare started ahead waits for its call, then is ended (the next call starts cold)
        self.owner = os.getpid()
        self.told, self._tell = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        for end in (self.told, self._tell):
            end.setblocking(False)
        self.next: bytes | None = None  # the last call told (the server's), as it came
        self.started = False  # in a child: a spare was started ahead of its call

    def forked(self) -> None:
        """In a child: the server's end of the queue is not the child's to read."""
        self.told.close()
        self.next = None

    def tell(self, argv: list[str], cwd: bytes, environ: dict[bytes, bytes], umask: int) -> None:
        """In a child, once its call is done: what it was, when its start was written down for the next run (a memo
        a spare can be started from); else that there is nothing to start ahead."""
        if os.getpid() == self.owner:
            return
        remembered = early.remembered()
        # A Bash tool under the baseline keeps the sandbox set up ahead (toolexec.serve_spares), whose launcher starts
        # its bash: measured faster on a served call's path than its bash started ahead (which, for root, makes and
        # joins the call's pids cgroup on that path), at the cost of the launcher's Python start, off the path.
        wanted = remembered is not None and remembered != ("bash", True)
        message = write_call(argv, cwd, environ, umask) if wanted else b""
        if len(message) > MAX_TOLD:
            message = b""
        with contextlib.suppress(OSError):  # (a full queue: the next call tells it again)
            self._tell.send(message)

    def receive(self) -> None:
        """In the server: the last call told replaces the one kept (an empty one: nothing is started ahead)."""
        while True:
            try:
                message = self.told.recv(MAX_TOLD)
            except OSError:  # (none left, or the queue closed)
                return
            self.next = message if read_call(message) is not None else None

    def close(self) -> None:
        for end in (self.told, self._tell):
            end.close()


def write_call(argv: list[str], cwd: bytes, environ: dict[bytes, bytes], umask: int) -> bytes:
    """A call's words, directory, environment and umask as plain data."""
    try:
        return marshal.dumps((list(argv), cwd, sorted(environ.items()), umask))
    except ValueError:
        return b""


def read_call(message: bytes) -> tuple[list[str], bytes, dict[bytes, bytes], int] | None:
    """:func:`write_call`'s fields, or None when ``message`` is not one, whole and well typed."""
    try:
        argv, cwd, items, umask = marshal.loads(message)
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv) or not isinstance(cwd, bytes):
        return None
    if not isinstance(items, list):
        return None
    environ: dict[bytes, bytes] = {}
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and all(isinstance(part, bytes) for part in item)):
            return None
        name, value = item
        if not name or b"=" in name or b"\0" in name or b"\0" in value:
            return None
        environ[name] = value
    if b"\0" in cwd or not cwd.startswith(b"/"):
        return None
    if type(umask) is not int or not 0 <= umask <= 0o777:
        return None
    return argv, cwd, environ, umask


def start_ahead(message: bytes) -> bool:
    """In a waiting child: start the spare of the call ``message`` tells, standing where that call stood (its
    directory, environment and umask: the spare inherits them) as a one-shot run there would
    (:func:`toolexec.early.begin`), then stand back. True when a spare runs."""
    found = read_call(message)
    if found is None:
        return False
    argv, cwd, environ, umask = found
    try:
        here = os.open(".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # (the server's directory, not this user's to open: the child stays where the call was; its call
        here = -1  # stands it where the caller stands anyway)
    saved = dict(os.environb)
    mask = os.umask(umask)
    try:
        try:
            os.chdir(cwd)
        except OSError:
            return False
        _set_environment(environ)
        early.begin(argv)
        if early.spare_pid() is None:
            return False
        early.guarded(process_linux.announce, process_linux.withdraw)
        return early.spare_pid() is not None
    finally:
        os.umask(mask)
        _set_environment(saved)
        if here >= 0:
            os.fchdir(here)
            os.close(here)


def _set_environment(environ: dict[bytes, bytes]) -> None:
    for name in [name for name in os.environb if name not in environ]:
        del os.environb[name]
    for name, value in environ.items():
        if os.environb.get(name) != value:
            os.environb[name] = value
