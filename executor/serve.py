"""``toolexec serve``: one-shot ``toolexec run`` calls of one config, served on a private Unix socket.

::

    toolexec run …  ── connect ─→  serve (one thread, never runs a call)  ── fork ─→  child: stands where the caller
      (the client,                   peer's uid checked, at most              stands (cwd, umask, environment, the
      toolexec.serve_client)         max_clients children                     caller's stdin/stdout/stderr), takes
                      ←─────────── ready / no ──────────────────────────────  the token, runs the call as the local
                      ── signals ─────────────────────────────────────────→   CLI does (toolexec.cli.dispatch), prints its
                      ←─────────── exit N ────────────────────────────────    result there, exits

The server imports and warms what a call needs once (the modules, the config and catalog snapshots); each call
is a fork of it, so a call pays for neither the interpreter's start nor toolexec's imports, and a client, however
hostile, can disturb nothing but its own child. The child runs the same code a local ``toolexec run`` runs (the
one call path: validation, approval, caps, audit, sandbox, timeouts), after checking that the local run would use
this server's config (:func:`toolexec.config.locate`, in the caller's directory and environment).

The socket is ``serve-<digest of the config's path>.sock`` in the user's own 0700 folder
(:func:`toolexec.serve_client.socket_folder`), made 0600; a lock file beside it (``flock``) says a server is
alive, so a socket left by a server that died is replaced safely and two servers never share a config. Both are
removed when the server ends (SIGTERM, SIGINT, SIGHUP; for ``toolexec mcp``'s, when its stdin closes), after the
calls still running were cancelled as a Ctrl-C cancels a local run.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import errno
import fcntl
import gc
import io
import marshal
import os
import resource  # noqa: F401 - the file-size limit (imported here once for every child, as are the lazy ones below)
import select
import selectors
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import import_module
from typing import Any

import toolexec.api
import toolexec.calls
import toolexec.catalog
import toolexec.catalog_store
import toolexec.config
import toolexec.confine
import toolexec.runtimes.argc_built
import toolexec.schemarefs
import toolexec.state
import toolexec.tracing
import toolexec.validation
from toolexec import early
from toolexec.cli import dispatch, quick_run
from toolexec.config import Config, load_config, locate
from toolexec.errors import BadRequest
from toolexec.runtimes import look_up_host, process_linux
from toolexec.runtimes.process_linux import protect
from toolexec.runtimes.warm import WarmPool, WarmServer, WarmSpec
from toolexec.serve_client import (
    FORWARDED,
    MAX_REQUEST,
    PROTOCOL,
    TOKEN,
    UNIX_PATH_MAX,
    folder_problem,
    socket_folder,
    socket_name,
)
from toolexec.serve_early import MAX_TOLD, ServedEarly, start_ahead
from toolexec.serve_pages import HotPages
from toolexec.serve_spares import MAX_RECIPE, ServedSpares
from toolexec.version import __version__
from toolexec.vouch import Vouch

__all__ = ["Server", "companion", "serve", "stop_companion"]

REQUEST_SECONDS = 5.0  # a client has this long to send its request: a slow one loses only its own child
SPARES = 1  # children forked ahead, each waiting for a connection: a call never waits for a fork
STOP_SECONDS = 10.0  # calls cancelled at the server's end have this long to print their result, then are killed
_STOPPING = ("SIGTERM", "SIGINT", "SIGHUP")
# What a child tells the server down its pipe: a call runs, then how it started (none of these: cold).
RAN, IN_SPARE, IN_WARM, IN_EARLY = b"+", b"s", b"w", b"e"
# What a call may import besides the runtimes, imported by the server so that no child pays for it (a test checks
# that a served call imports nothing more): explaining a refused argument, suggesting a name, reading a result's
# media type, a tool's caps, building a changed tool (the compilers and their grammars), a confined call's agents.
PRELOADED = (
    "difflib", "hashlib", "mimetypes", "shlex", "encodings.unicode_escape", "jsonschema", "fastjsonschema",
    "toolexec.agent_folders", "toolexec.build", "toolexec.capspec", "toolexec.mcp_settings", "toolexec.mediatype",
    "toolexec.runtimes.seccomp",
    "toolexec.runtimes.netproxy", "toolexec.runtimes.shims", "toolexec.runtimes.warm_fork", "toolexec.runtimes.warm_bash",
    *(f"toolexec.compilers.{language}" for language in ("python", "bash", "javascript", "typescript")),
    "tree_sitter_python", "tree_sitter_bash", "tree_sitter_javascript", "tree_sitter_typescript",
)  # fmt: skip


def serve(
    config: str | os.PathLike[str] | None,
    *,
    max_clients: int = 64,
    for_mcp: bool = False,
    verbose: bool = False,
    warm: bool | None = None,
) -> int:
    """Serve ``config``'s one-shot calls until a stopping signal (or, ``for_mcp``, the end of stdin); 0 then.
    ``warm``: True runs every tool warm, None the tools that ask (docs/performance.md)."""
    server = Server(config, max_clients=max_clients, warm=warm)
    try:
        if not server.open(quiet_when_served=for_mcp):
            return 0
        banner = f"toolexec: serving {server.config_path} on {server.path} (pid {os.getpid()}); Ctrl-C stops"
        server.run(watch_stdin=for_mcp, on_ready=None if for_mcp else lambda: _say(banner))
    finally:
        server.close()
    if verbose:
        started = (
            f"{server.in_spares} in a sandbox set up ahead, {server.in_warm} forked from a warm server, "
            f"{server.in_early} in their tool's process started ahead"
        )
        _say(f"toolexec: served {server.served} call(s) ({started}, the others cold); removed {server.path}")
    return 0


def companion(config_path: str | os.PathLike[str], *, warm: bool | None = None) -> subprocess.Popen[bytes] | None:
    """``toolexec mcp``'s own socket server for ``config_path``: a ``toolexec serve`` that ends when its stdin (a pipe
    only this process holds) closes, however this process ends; quietly absent when another server has the config.
    A process of its own, because a server forks, and forking the MCP server (threads, an event loop) is unsafe.
    ``warm``: as ``toolexec mcp --warm`` (True: every tool warm)."""
    argv = [sys.executable, "-m", "toolexec", "serve", "--config", os.fspath(config_path), "--until-stdin-closes"]
    try:
        return subprocess.Popen(
            [*argv, *(["--warm"] if warm else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the MCP server's terminal ends it through the pipe, after mcp
        )
    except OSError:
        return None


def stop_companion(process: subprocess.Popen[bytes] | None, timeout: float = STOP_SECONDS + 2) -> None:
    """End :func:`companion`'s server (its stdin closed) and wait for it."""
    if process is None:
        return
    with contextlib.suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Server:
    """The socket server of one config: :meth:`open`, :meth:`run`, :meth:`close`."""

    def __init__(self, config: str | os.PathLike[str] | None, *, max_clients: int = 64, warm: bool | None = None) -> None:
        self.config: Config = load_config(config)
        self.warm = warm
        self.pool: ServedPool | None = None
        self.sandboxes: ServedSpares | None = None  # the sandboxes the waiting children set up ahead of their calls
        self.pages: HotPages | None = None  # the pages of this process's memory a call writes (toolexec.serve_pages)
        self._recipes: dict[int, int] = {}  # a waiting child's pid: the pipe its recipe goes down (toolexec.serve_spares)
        self.early: ServedEarly | None = None  # the last call, whose tool's process the waiting child starts ahead
        self._lasts: dict[int, int] = {}  # a waiting child's pid: the pipe the last call goes down (toolexec.serve_early)
        self.config_path = os.path.realpath(locate(config).path)
        self.folder = socket_folder()
        self.path = os.path.join(self.folder, socket_name(self.config_path))
        self.lock_path = self.path.removesuffix(".sock") + ".lock"
        self.max_clients = max_clients
        self.children: set[int] = set()
        self.served = 0  # calls run (a child that refused its request is not counted)
        self.in_spares = 0  # of them, calls that started in a sandbox their child set up ahead (serve_spares)
        self.in_warm = 0  # of them, calls forked from a warm server of the server's (`serve --warm`, `Warm: true`)
        self.in_early = 0  # of them, calls whose tool's process was started ahead (toolexec.serve_early)
        self._ran_read, self._ran_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # a byte per call a child ran
        self._took_read, self._took_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # a spare's pid, once it accepted
        self.spares: set[int] = set()
        self._listener: socket.socket | None = None
        self._lock_fd = -1
        self._inode: tuple[int, int] | None = None
        self._stop = False
        self._vouch: Vouch | None = None  # vouches that no tool file changed, for `list` and `build` (toolexec.vouch)

    # --- the socket -----------------------------------------------------------------------------------------

    def open(self, *, quiet_when_served: bool = False) -> bool:
        """Take the lock and listen; False when another server holds this config (BadRequest unless quiet)."""
        if not hasattr(socket, "SO_PEERCRED"):
            raise BadRequest("toolexec serve needs SO_PEERCRED to check who connects (Linux); run tools with toolexec run")
        if len(os.fsencode(self.path)) > UNIX_PATH_MAX:
            raise BadRequest(
                f"the socket path {self.path} is longer than the {UNIX_PATH_MAX} bytes a Unix socket may have; "
                "set XDG_RUNTIME_DIR (or XDG_STATE_HOME) to a shorter folder"
            )
        with contextlib.suppress(FileExistsError):
            os.makedirs(self.folder, mode=0o700)
        if (problem := folder_problem(self.folder)) is not None:
            raise BadRequest(f"cannot serve on a socket in {self.folder}: {problem}; it must be a folder of your own (mode 700)")
        protect()  # undumpable, as every process that runs tools is: its children inherit it
        holder = self._lock()
        if holder is not None:
            if quiet_when_served:
                return False
            raise BadRequest(f"a server for {self.config_path} is already running{holder} on {self.path}; stop it first")
        try:
            self._listen()
        except BaseException:
            self._unlock()
            raise
        vouch = Vouch(self.config_path)
        with contextlib.suppress(OSError):  # (only `list` and `build` are slower without it)
            vouch.open()
            self._vouch = vouch
        self._warm()
        if process_linux.available():  # (warm calls need pidfd and /proc: elsewhere every call runs cold)
            self.pool = ServedPool(max_servers=self.config.warm_max, idle=self.config.warm_idle)
            self.pages = HotPages()
            self.early = ServedEarly(idle=self.config.warm_idle)
            toolexec.calls.served_pool = self.pool  # what every child forked from here uses
            if self.config.sandbox != "off":
                self.sandboxes = ServedSpares(idle=self.config.warm_idle)
                toolexec.calls.served_spares = self.sandboxes
        return True

    def _lock(self) -> str | None:
        """Hold the lock file for the server's life; `` (pid N)`` of the holder when another server holds it."""
        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode("ascii", "replace").strip()
                os.close(fd)
                return f" (pid {holder})" if holder.isdigit() else ""
            except BaseException:
                os.close(fd)
                raise
            # The file may have been removed by the server that held it, just before it let go: then lock anew.
            mine, there = os.fstat(fd), _stat(self.lock_path)
            if there is not None and (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
                os.ftruncate(fd, 0)
                os.write(fd, str(os.getpid()).encode())
                self._lock_fd = fd
                return None
            os.close(fd)

    def _listen(self) -> None:
        """Bind the socket (0600 from the start), replacing one a dead server left."""
        found = _stat(self.path)
        if found is not None:  # no server holds the lock: whatever is there is stale
            if not stat.S_ISSOCK(found.st_mode):
                raise BadRequest(f"{self.path} is in the way and is not a socket; remove it")
            os.unlink(self.path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mask = os.umask(0o177)
        try:
            listener.bind(self.path)
        except BaseException:
            listener.close()
            raise
        finally:
            os.umask(mask)
        os.chmod(self.path, 0o600)
        info = os.stat(self.path)
        self._inode = (info.st_dev, info.st_ino)
        listener.listen(128)
        listener.setblocking(False)
        self._listener = listener

    def _warm(self) -> None:
        """Import and look up what a call needs, once, so that no child pays for it (``look_up_host``: the runtimes,
        bwrap and what it can do here, cgroups), then freeze what is made: a child's collections never walk (and so
        never copy) the server's objects. Nothing of the config's is read or written here: the catalog is the calls'
        to check (and rebuild) as a local run does, never the server's at its start."""
        look_up_host()
        for name in PRELOADED:
            import_module(name)
        toolexec.state.sha256_hex(b"")  # the interpreter's own SHA-256 module
        # What the catalog's freshness is checked against besides the files: the compilers' own (a scan and a stat
        # of each; cached for the process). The children compile with the compilers this process loaded, so theirs.
        toolexec.catalog.compilers_fingerprint()
        if self._vouch is not None:
            self._vouch.current()  # the files watched and stated once now: the first `list` finds the answer made
        gc.collect()
        gc.freeze()

    def close(self) -> None:
        """Stop listening, cancel the calls still running, stop the warm servers, remove the socket and the lock
        file."""
        if self._vouch is not None:
            self._vouch.close()
            self._vouch = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            found = _stat(self.path)
            if found is not None and (found.st_dev, found.st_ino) == self._inode:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
        self._end_children()
        if self.pool is not None:
            self.pool.close()
            toolexec.calls.served_pool = None
            self.pool = None
        if self.sandboxes is not None:
            self.sandboxes.close()
            toolexec.calls.served_spares = None
            self.sandboxes = None
        if self.pages is not None:
            self.pages.close()
            self.pages = None
        if self.early is not None:
            self.early.close()
            self.early = None
        for fd in (*self._recipes.values(), *self._lasts.values()):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._recipes.clear()
        self._lasts.clear()
        self._count_runs()
        for fd in (self._ran_read, self._ran_write, self._took_read, self._took_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._ran_read = self._ran_write = self._took_read = self._took_write = -1
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.lock_path)  # while still held: a server starting now locks a new file
            os.close(self._lock_fd)
            self._lock_fd = -1

    # --- the loop -------------------------------------------------------------------------------------------

    def run(self, *, watch_stdin: bool = False, on_ready: Callable[[], None] | None = None) -> None:
        """Accept and fork until a stopping signal (or, ``watch_stdin``, the end of stdin); ``on_ready`` is called
        once the stopping signals are handled."""
        assert self._listener is not None, "open() first"
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        previous = {}
        old_wakeup = signal.set_wakeup_fd(wake_write)
        try:
            for name in _STOPPING:
                previous[getattr(signal, name)] = signal.signal(getattr(signal, name), self._stopping)
            previous[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, lambda *_: None)
            with selectors.DefaultSelector() as selector:
                selector.register(wake_read, selectors.EVENT_READ, "wake")
                selector.register(self._ran_read, selectors.EVENT_READ, "ran")
                selector.register(self._took_read, selectors.EVENT_READ, "took")
                if self.pool is not None:
                    selector.register(self.pool.asked, selectors.EVENT_READ, "warm")
                if self.sandboxes is not None:
                    selector.register(self.sandboxes.orders, selectors.EVENT_READ, "orders")
                if self.pages is not None:
                    selector.register(self.pages.told, selectors.EVENT_READ, "pages")
                if self.early is not None:
                    selector.register(self.early.told, selectors.EVENT_READ, "early")
                if self._vouch is not None:
                    selector.register(self._vouch.fileno(), selectors.EVENT_READ, "vouch")
                listening = False
                if watch_stdin:
                    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
                if on_ready is not None:
                    on_ready()
                while not self._stop:
                    self._reap()
                    self._spare()
                    self._hand_last()
                    self._hand_recipe()
                    if listening != (not self.spares):  # no spare waits (all busy): the server answers, busy
                        listening = not self.spares
                        if listening:
                            selector.register(self._listener, selectors.EVENT_READ, "accept")
                        else:
                            selector.unregister(self._listener)
                    for key, _ in selector.select(timeout=5.0):
                        if key.data == "accept":
                            self._accept()
                        elif key.data == "took":
                            self._took()
                        elif key.data == "wake":
                            with contextlib.suppress(OSError):
                                os.read(wake_read, 512)
                        elif key.data == "ran":
                            self._count_runs()
                        elif key.data == "pages":
                            self.pages.receive()  # type: ignore[union-attr]  # (registered only when there is one)
                        elif key.data == "early":
                            self.early.receive()  # type: ignore[union-attr]  # (registered only when there is one)
                        elif key.data == "orders":
                            self.sandboxes.receive()  # type: ignore[union-attr]  # (registered only when there is one)
                        elif key.data == "warm":
                            assert self.pool is not None
                            self.pool.start_asked()
                        elif key.data == "vouch":
                            self._vouch.answer()  # type: ignore[union-attr]  # (registered only when there is one)
                        elif not _read_some(sys.stdin.fileno()):
                            self._stop = True
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for number, handler in previous.items():
                signal.signal(number, handler)
            os.close(wake_read)
            os.close(wake_write)

    def _stopping(self, *_: object) -> None:
        self._stop = True

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # out of descriptors: the client falls back; the server goes on
                if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM, errno.ECONNABORTED):
                    return
                raise
            with conn:  # only when every child is busy: a spare takes every other connection
                refusal = b"no busy: the server runs as many calls as it may (--max-clients)\n"
                if _peer_uid(conn) != os.getuid():
                    refusal = b"no uid: this server serves its own user only\n"
                conn.setblocking(False)
                with contextlib.suppress(OSError):
                    conn.send(refusal)

    def _spare(self) -> None:
        """Keep a child forked ahead, waiting for the next connection (its process guard already started)."""
        while len(self.spares) < SPARES and len(self.children) < self.max_clients and not self._stop:
            stopping = {getattr(signal, name) for name in _STOPPING}
            signal.pthread_sigmask(signal.SIG_BLOCK, stopping)  # until the child has its own handlers
            server = os.getpid()
            recipe_read, recipe_write = os.pipe2(os.O_CLOEXEC) if self.sandboxes is not None else (-1, -1)
            last_read, last_write = os.pipe2(os.O_CLOEXEC) if self.early is not None else (-1, -1)
            if self.pages is not None:
                self.pages.forking()
            try:
                pid = os.fork()
                if pid == 0:
                    self._child(server, recipe_read, recipe_write, last_read, last_write)  # never returns
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping)
                for fd in (recipe_read, last_read):
                    if fd >= 0:
                        os.close(fd)
            self.children.add(pid)
            self.spares.add(pid)
            if recipe_write >= 0:
                self._recipes[pid] = recipe_write
            if last_write >= 0:
                self._lasts[pid] = last_write

    def _hand_last(self) -> None:
        """Hand the last call told (:mod:`toolexec.serve_early`) to the children waiting, once no call runs (the
        start of its tool's process is never beside a call): each gets it whole or not at all, once."""
        told = self.early
        if told is None or told.next is None or self.children != self.spares:
            return
        message, told.next = told.next, None
        _hand(self._lasts, message)

    def _hand_recipe(self) -> None:
        """Hand the recipe of the spare the next call likely needs (:mod:`toolexec.serve_spares`) to the children
        waiting, once no call runs (its making is never on a call's path): each gets one, whole or not at all."""
        sandboxes = self.sandboxes
        if sandboxes is None or sandboxes.next is None or self.children != self.spares:
            return
        message, sandboxes.next = sandboxes.next, None
        _hand(self._recipes, message)

    def _took(self) -> None:
        """The spares that took a connection (each wrote its pid): no longer spare."""
        with contextlib.suppress(OSError):
            data = os.read(self._took_read, 4096)
            for start in range(0, len(data) - 3, 4):
                pid = int.from_bytes(data[start : start + 4], sys.byteorder)
                self.spares.discard(pid)
                self._forget_recipe(pid)

    def _forget_recipe(self, pid: int) -> None:
        for held in (self._recipes, self._lasts):
            fd = held.pop(pid, -1)
            if fd >= 0:
                os.close(fd)

    def _count_runs(self) -> None:
        with contextlib.suppress(OSError):
            told = os.read(self._ran_read, 65536)
            self.served += told.count(RAN)
            self.in_spares += told.count(IN_SPARE)
            self.in_warm += told.count(IN_WARM)
            self.in_early += told.count(IN_EARLY)

    def _reap(self) -> None:
        for pid in list(self.children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self.children.discard(pid)
                self.spares.discard(pid)
                self._forget_recipe(pid)

    def _end_children(self) -> None:
        """Cancel every call still running (SIGTERM: a local run's Ctrl-C) and wait for them, killing the slow."""
        for pid in self.children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while self.children:
            self._reap()
            if not self.children:
                break
            if time.monotonic() > deadline:
                for pid in self.children:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.01)

    # --- a call, in the forked child ------------------------------------------------------------------------

    def _child(self, server: int, recipe: int = -1, recipe_write: int = -1, last: int = -1, last_write: int = -1) -> None:
        """A spare: wait for a connection (setting up the sandbox of the recipe the server hands down ``recipe``, if
        one comes first), serve that one client and exit. Whatever happens, this process ends here (never back in
        the server's loop)."""
        code = 1
        try:
            os.setsid()  # no Ctrl-C of the server's terminal reaches a call; the server cancels its own
            signal.set_wakeup_fd(-1)
            for name in (*_STOPPING, "SIGCHLD"):
                number = getattr(signal, name)
                signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {getattr(signal, name) for name in _STOPPING})
            # A waiting child holds the socket: should the server be killed outright, it must not outlive it.
            process_linux.die_with_parent(signal.SIGKILL)
            if os.getppid() != server:
                return  # the server ended before the signal was asked for
            if self.pool is not None:
                self.pool.forked()
            for fd in (recipe_write, last_write, *self._recipes.values(), *self._lasts.values()):  # (the others' too)
                with contextlib.suppress(OSError):
                    os.close(fd)
            if self.sandboxes is not None:
                self.sandboxes.forked()
            if self.pages is not None:
                self.pages.forked()
            if self.early is not None:
                self.early.forked()
            gc.disable()  # a call's process is a one-shot run, whose cyclic garbage waits for its end (toolexec.entry)
            for fd in (self._lock_fd, self._ran_read, self._took_read):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if self._vouch is not None:
                self._vouch.drop()  # (the server's to answer and to remove)
            if process_linux.available():
                process_linux.ensure_guard()  # before the call: a call's first spawn would start it
            listener = self._listener
            assert listener is not None
            _read_ahead(self.config_path)
            if self.pages is not None:  # the copy-on-write faults a call would take, taken while waiting (not longer)
                self.pages.copy_ahead(until=lambda: _pending(listener))
            if self.sandboxes is not None or self.early is not None:
                # The server's end, while waiting: out through the clean-up, so that the sandbox set up ahead and
                # the tool's process started ahead (early's exit handler: killed and reaped) are gone before this
                # child is (under `sandbox: off` the default action left the latter to the guard, a moment later).
                for number in (signal.SIGTERM, signal.SIGHUP):
                    signal.signal(number, _end_waiting)
            conn = _accept_one(listener, recipe, self.sandboxes, last, self.early)
            for number in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(number, signal.SIG_DFL)
            listener.close()
            for fd in (recipe, last):
                if fd >= 0:
                    os.close(fd)
            process_linux.die_with_parent(None)  # a call taken runs to its end, server or no server
            os.write(self._took_write, os.getpid().to_bytes(4, sys.byteorder))
            os.close(self._took_write)
            if _peer_uid(conn) != os.getuid():
                conn.sendall(b"no uid: this server serves its own user only\n")
                code = 0
            else:
                code = Child(conn, self.config_path, self._ran_write, self.warm, self.early).serve()
                if self.pages is not None:
                    self.pages.tell()  # (a learning child's: its client has its answer)
        except BaseException:  # the child must end here, and says nothing on the server's terminal
            code = 1
        finally:
            if self.sandboxes is not None:
                with contextlib.suppress(BaseException):
                    self.sandboxes.close()  # a spare its call did not take (another kind, or no call at all)
            with contextlib.suppress(BaseException):
                atexit._run_exitfuncs()
            os._exit(code)


class Child:
    """One client's call, in its own forked process."""

    def __init__(
        self, conn: socket.socket, config_path: str, ran: int = -1, warm: bool | None = None, told: ServedEarly | None = None
    ) -> None:
        self.conn = conn
        self.told = told  # where the call is told once done, for the next child's early start (toolexec.serve_early)
        # its words, directory, environment and umask
        self.call: tuple[list[str], bytes, dict[bytes, bytes], int] = ([], b"", {}, 0o022)
        self.config_path = config_path
        self.warm = warm  # which tools run warm (the server's own servers): True every one, None those that ask
        self.ran = ran  # told a byte when the call runs, and one more of how it started (RAN, IN_SPARE, IN_WARM)
        self.done = False

    def serve(self) -> int:
        """Read, check and run the client's call; the exit status the client is told."""
        self.conn.setblocking(True)
        self.conn.settimeout(REQUEST_SECONDS)
        fds: list[int] = []
        try:
            try:
                body, fds = self._receive()
                args = self._stand_in(body, fds)
            except Refused as refusal:
                self._send(f"no {refusal}\n".encode("utf-8", "replace"))
                return 0
            token, fds = fds[3], []  # stdin, stdout and stderr are the child's own now
            if not _take(token):
                return 0  # the client took it back (it gave up waiting): it runs the call itself
            self._send(f"ready {os.getpid()}\n".encode())
            self.conn.settimeout(None)
            with contextlib.suppress(OSError):
                os.write(self.ran, RAN)
            self._watch()
            if self.told is not None:
                early.arrive(self.call[0])  # this process is that one-shot run now (its spare, its memo)
            code = dispatch(args)
            _release_streams()
            self._unwatch()
            with contextlib.suppress(OSError):
                os.write(self.ran, _started_in())
                os.close(self.ran)
            self._send(f"exit {code}\n".encode())
            if self.told is not None:
                self.told.tell(*self.call)
            return code
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            self.conn.sendall(data)

    def _receive(self) -> tuple[bytes, list[int]]:
        """The request's body and the four descriptors that came with it; Refused for anything else."""
        fds: list[int] = []
        try:
            try:
                data, ancillary, flags, _ = self.conn.recvmsg(65536, socket.CMSG_SPACE(4 * 4))
            except TimeoutError:
                raise Refused(f"slow: the request did not arrive within {REQUEST_SECONDS:g} seconds") from None
            if not data:
                raise Refused("malformed request: it ended before it began")
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    count = len(payload) // 4
                    fds += struct.unpack(f"{count}i", payload[: count * 4])
            if flags & socket.MSG_CTRUNC or len(fds) != 4:
                raise Refused("malformed request: it must come with stdin, stdout, stderr and the token (four descriptors)")
            if len(data) < 4:
                data += self._exactly(4 - len(data))
            size = int.from_bytes(data[:4], "big")
            if size > MAX_REQUEST:
                raise Refused(f"too large: a request may have at most {MAX_REQUEST} bytes, this one says {size}")
            body = data[4:]
            if len(body) > size:
                raise Refused(f"malformed request: {len(body)} bytes where it said {size}")
            body += self._exactly(size - len(body))
            return body, fds
        except BaseException:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise

    def _exactly(self, count: int) -> bytes:
        """``count`` more bytes of the request, within its deadline (a slow client is refused)."""
        chunks, wanted = [], count
        deadline = time.monotonic() + REQUEST_SECONDS
        while wanted > 0:
            self.conn.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                chunk = self.conn.recv(min(wanted, 1 << 20))
            except TimeoutError:
                raise Refused(f"slow: the request did not arrive within {REQUEST_SECONDS:g} seconds") from None
            if not chunk:
                raise Refused("malformed request: it ended early")
            chunks.append(chunk)
            wanted -= len(chunk)
        return b"".join(chunks)

    def _stand_in(self, body: bytes, fds: list[int]) -> Any:
        """Stand where the caller stands (directory, umask, environment, streams); the parsed call, or Refused."""
        fields = body.split(b"\0")
        if fields[-1:] != [b""]:
            raise Refused("malformed request: its fields must each end in NUL")
        fields.pop()
        if not fields or fields[0] != PROTOCOL:
            raise Refused(f"version: this server speaks {PROTOCOL.decode()}")
        if len(fields) < 8:
            raise Refused("malformed request: too few fields")
        version, cwd, umask, *streams = fields[1:7]
        if version.decode("ascii", "replace") != __version__:
            raise Refused(f"version: this server is toolexec {__version__}")
        try:
            argc = int(fields[7])
            mask = int(umask)
        except ValueError:
            raise Refused("malformed request: the umask and the argument count must be numbers") from None
        if not 0 <= argc <= len(fields) - 8 or not 0 <= mask <= 0o777:
            raise Refused("malformed request: the argument count or the umask is out of range")
        argv = [os.fsdecode(word) for word in fields[8 : 8 + argc]]
        environ = {}
        for item in fields[8 + argc :]:
            name, equals, value = item.partition(b"=")
            if not equals or not name:
                raise Refused("malformed request: an environment entry is not NAME=value")
            environ[name] = value
        encodings = []
        for given in streams:
            encoding, _, errors = given.decode("ascii", "replace").partition(":")
            try:
                codecs.lookup(encoding)
                codecs.lookup_error(errors)
            except LookupError:
                raise Refused(f"malformed request: unknown encoding or error handler {given!r:.60}") from None
            encodings.append((encoding, errors))
        args = quick_run(argv)
        if args is None or args.command != "run":
            raise Refused("unsupported: the server runs `toolexec run NAME [ARGS]` with --json, --timeout, --call-id only")
        if args.confirm or args.ask or args.verbose:
            raise Refused("terminal: --confirm, --ask and -v need the local terminal")
        try:
            os.chdir(cwd)
        except OSError as error:
            raise Refused(f"cwd: {error.strerror}") from None
        os.umask(mask)
        for name in [name for name in os.environb if name not in environ]:
            del os.environb[name]
        for name, value in environ.items():  # (only what differs is set: each setting is a putenv)
            if os.environb.get(name) != value:
                os.environb[name] = value
        try:
            used = os.path.realpath(locate(args.config).path)
        except Exception as error:  # the local run says what is wrong with its config
            raise Refused(f"config: {error}") from None
        if used != self.config_path:
            raise Refused(f"config: this call's config is {used}, this server's {self.config_path}")
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
            if fd > 2:
                os.close(fd)
        sys.stdin, sys.stdout, sys.stderr = (_text_stream(fd, *encodings[fd]) for fd in (0, 1, 2))
        self.call = (argv, cwd, environ, mask)
        args.config = self.config_path
        args.handle_signals = True
        args.served_warm = self.warm
        return args

    def _watch(self) -> None:
        """From now on, raise each signal the client forwards in this process (the CLI's handlers cancel the call);
        the client gone (its connection closed) is a SIGTERM, as a local run's end is. The kernel says when the
        client spoke (SIGIO): no thread is started for it (its start waited for the scheduler on a busy machine)."""
        fd = self.conn.fileno()
        self.conn.setblocking(False)
        signal.signal(signal.SIGIO, self._client_spoke)
        fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
        self._client_spoke()  # what it said before the kernel was asked to tell

    def _client_spoke(self, *_: object) -> None:
        allowed = {getattr(signal, name) for name in FORWARDED if hasattr(signal, name)}
        while not self.done:
            try:
                data = self.conn.recv(64)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.done = True
                os.kill(os.getpid(), signal.SIGTERM)
                return
            for number in data:
                if number in allowed:
                    os.kill(os.getpid(), number)

    def _unwatch(self) -> None:
        self.done = True
        signal.signal(signal.SIGIO, signal.SIG_IGN)
        self.conn.setblocking(True)


def _started_in() -> bytes:
    """How this child's call started, for the server's count (:data:`IN_SPARE`, :data:`IN_WARM`, else nothing)."""
    spares, pool = toolexec.calls.served_spares, toolexec.calls.served_pool
    if isinstance(spares, ServedSpares) and spares.taken:
        return IN_SPARE
    if isinstance(pool, ServedPool) and pool.lent:
        return IN_WARM
    if early.adopted():
        return IN_EARLY
    return b""


def _read_ahead(config_path: str) -> None:
    """What every call of the config reads before its tool's own files, read while waiting for it: the config and the
    catalog's index (each taken by the call only while the file is unchanged; with 10,000 tools, ~2 ms of parsing and
    digests off the call's path). Nothing is built or written here: whatever is wrong, the call finds and says."""
    with contextlib.suppress(Exception):
        toolexec.catalog_store.prime(toolexec.config.prime(config_path))


def _release_streams() -> None:
    """Flush what the call printed and let go of the caller's stdin, stdout and stderr (each now /dev/null), before
    the client is told the status: a caller reading the command's output (``$(toolexec run …)``, a pipe) sees its end
    as the command exits, not once this process has also torn itself down (its guard, its memory: milliseconds)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)


def _take(token: int) -> bool:
    """Read the token's byte (see :mod:`toolexec.serve_client`): True when this child took it and runs the call,
    False when the client took it back first, or sent something else than a pipe holding it."""
    try:
        if not stat.S_ISFIFO(os.fstat(token).st_mode):
            return False
        os.set_blocking(token, False)  # the client's own pipe (it made it non-blocking too): a hostile one cannot hang us
        return os.read(token, 2) == TOKEN
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(token)


def _serves_now(server: WarmServer) -> bool:
    """Whether a call starting now may run in ``server``: none of the files it loaded changed (a child found one
    had, ran its call cold and asked for a new server)."""
    return server.loaded is None or server.loaded.serves(time.monotonic_ns())


class ServedPool(WarmPool):
    """The warm servers of ``toolexec serve``: started by the server's own process alone (every call is a child
    forked from it, and a server a child started would end with that child), used by every child through the
    descriptors it inherited. A child that finds no server for its call runs it cold and asks the server's process
    (a datagram, :attr:`asked`) to start one, which the children forked after use. No idle watch runs (a thread in
    a process that forks): the servers stop with ``toolexec serve``, and at most ``max_servers`` run."""

    def __init__(self, *, max_servers: int, idle: float) -> None:
        super().__init__(max_servers=max_servers, idle=idle)
        self.owner = os.getpid()
        self.lent = 0  # in a child: servers its call was given (and did not give back as failed): it forked from one
        self.asked, self._ask = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.asked.setblocking(False)
        self._ask.setblocking(False)

    def server(self, spec: WarmSpec) -> WarmServer | None:
        """In the server's process: the running server for ``spec`` (started now if need be). In a child: the
        running one, or None (the call runs cold) once the server's process is asked to start it."""
        if os.getpid() == self.owner:
            return super().server(spec)
        with self._lock:  # (no thread of the server's holds it when it forks: it runs none)
            entry = self._entries.get(spec.key)
        if entry is None:  # (one known not to run warm is not asked for again)
            self._request(spec)
            return None
        if entry.server is not None:
            self.lent += 1
        return entry.server

    def discard(self, spec: WarmSpec, server: WarmServer) -> None:
        """``server`` failed a call's start: in a child, the server's process is asked to start a new one."""
        if os.getpid() == self.owner:
            super().discard(spec, server)
        else:
            self.lent = max(0, self.lent - 1)
            self._request(spec)

    def home(self, tool: str) -> str | None:
        """None: a served run's call under a policy runs cold (a confined server's calls' directory and sandbox would
        be made by a child that ends with its call)."""
        return None

    def _request(self, spec: WarmSpec) -> None:
        if spec.confinement is not None:  # (never asked for: see home)
            return
        fields = {name: getattr(spec, name) for name in ("kind", "tool", "payload", "cwd", "key", "isolated")}
        message = marshal.dumps({**fields, "argv": list(spec.argv), "env": dict(spec.env)})
        with contextlib.suppress(OSError):  # (a full queue: the next call asks again)
            self._ask.send(message)

    def forked(self) -> None:
        """In a child: its end of the server's queue of requests is not the child's to read."""
        self.asked.close()

    def start_asked(self) -> None:
        """In the server's process: start the servers the children asked for (a dead one is replaced)."""
        while True:
            try:
                message = self.asked.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                return
            try:
                spec = WarmSpec(**marshal.loads(message))
            except (EOFError, ValueError, TypeError):
                continue
            with self._lock:
                entry = self._entries.get(spec.key)
            server = entry.server if entry is not None else None
            if server is not None and (not server.alive() or not _serves_now(server)):
                super().discard(spec, server)
            super().server(spec)

    def _ensure_reaper(self) -> None:
        """No idle watch (see the class)."""

    def close(self) -> None:
        super().close()
        for end in (self.asked, self._ask):
            end.close()


class Refused(Exception):
    """A request the server does not take; its text is the reason the client is told."""


def _text_stream(fd: int, encoding: str, errors: str) -> io.TextIOWrapper:
    """A standard stream on ``fd`` as the interpreter makes one: stdout line-buffered on a terminal, stderr always."""
    raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
    buffered: Any = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
    line = fd == 2 or (fd == 1 and raw.isatty())
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, line_buffering=line)


class _Ending:
    """A waiting child told to end while it starts a sandbox (or whose server was killed outright meanwhile): it ends
    once the sandbox is started (or undone), never in the middle of its start (a bwrap started and not yet known to
    the guard would outlive the child)."""

    making = False
    asked = False


def _end_waiting(*_: object) -> None:
    """A waiting child told to end: out through its cleanup (which ends the sandbox it set up ahead)."""
    if _Ending.making:
        _Ending.asked = True
        return
    raise SystemExit(0)


def _accept_one(
    listener: socket.socket,
    recipe: int = -1,
    sandboxes: ServedSpares | None = None,
    last: int = -1,
    told: ServedEarly | None = None,
) -> socket.socket:
    """The next connection (the listener is shared with the server, which keeps it non-blocking); meanwhile, the
    sandbox of the recipe that comes down ``recipe`` is set up (and ended after ``sandboxes.idle`` seconds unused),
    and the tool's process of the last call, which comes down ``last``, is started (:mod:`toolexec.serve_early`: it
    stands for the call's own start, so no sandbox is set up beside it)."""
    message = b""
    waiting: list[int] = [listener.fileno(), *([recipe] if recipe >= 0 and sandboxes is not None else [])]
    if last >= 0 and told is not None:
        waiting.append(last)
    said = b""
    while True:
        idle = sandboxes.idle if sandboxes is not None and sandboxes.spare is not None else None
        if told is not None and early.spare_pid() is not None:
            idle = told.idle
        ready, _, _ = select.select(waiting, [], [], idle)
        if not ready:  # waited too long: the next call (if any) starts cold
            if sandboxes is not None:
                sandboxes.discard()
            early.end_spare()
            continue
        if last in ready and listener.fileno() not in ready:
            chunk = os.read(last, 65536)
            said += chunk
            if not chunk:
                waiting.remove(last)
                if told is not None and len(said) <= MAX_TOLD:
                    server = os.getppid()
                    _Ending.making = True
                    process_linux.die_with_parent(None)  # (the server killed outright: noticed once it is started)
                    try:
                        told.started = start_ahead(said)
                    finally:
                        _Ending.making = False
                        process_linux.die_with_parent(signal.SIGKILL)
                    if _Ending.asked or os.getppid() != server:
                        raise SystemExit(0)
                    if told.started and sandboxes is not None:
                        sandboxes.discard()  # (the tool's own start stands for it)
            continue
        if recipe in ready and listener.fileno() not in ready:  # (a client waiting goes first)
            chunk = os.read(recipe, 65536)
            message += chunk
            if not chunk:
                waiting.remove(recipe)
                if sandboxes is not None and len(message) <= MAX_RECIPE and not (told is not None and told.started):
                    server = os.getppid()
                    _Ending.making = True
                    process_linux.die_with_parent(None)  # (the server killed outright: noticed once it is started)
                    try:
                        sandboxes.make(message)
                    finally:
                        _Ending.making = False
                        process_linux.die_with_parent(signal.SIGKILL)
                    if _Ending.asked or os.getppid() != server:
                        raise SystemExit(0)
            continue
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            continue
        conn.setblocking(True)
        return conn


def _pending(listener: socket.socket) -> bool:
    """Whether a client waits on ``listener`` (a connection to accept), now."""
    try:
        return bool(select.select([listener], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _peer_uid(conn: socket.socket) -> int:
    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return -1
    return int(uid)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _read_some(fd: int) -> bool:
    """Read what stdin has; False at its end."""
    try:
        return bool(os.read(fd, 65536))
    except BlockingIOError:
        return True
    except OSError:
        return False


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _hand(pipes: dict[int, int], message: bytes) -> None:
    """Write ``message`` once down each child's pipe in ``pipes`` (pid -> its write end), closing them all: a child that
    does not read never holds the server up, and one whose pipe was full gets a part only (and finds nothing in it)."""
    for pid in list(pipes):
        fd = pipes.pop(pid)
        try:
            os.set_blocking(fd, False)
            os.write(fd, message)
        except OSError:
            pass
        finally:
            os.close(fd)
