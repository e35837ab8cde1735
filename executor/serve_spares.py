"""Sandboxes set up ahead of ``toolexec serve``'s calls: each waiting child makes the spare of the call that is likely next.

A served call runs in a child forked ahead by the server (:mod:`toolexec.serve`), one call per child: the spares of
an ``Executor`` (:class:`~toolexec.runtimes.sandbox_spare.Spares`, kept by the process that makes the calls) would
never see a second call there. So the kind of spare is learnt across children, and the spare is made by the child
that will use it::

    child N (its call)  ── order(key, recipe): a datagram ──→  server: counts the kinds; from a kind's second call
                                                               on, once no call runs, hands the recipe to the child
    child N+1 (waiting for its client)  ←─ the recipe (a pipe of its own) ─┘   that waits, which makes the spare
      takes the spare at its call when it is that call's (key, and the checks of :meth:`Spare.fits` at the launch)

So a spare is still used once, by one call, and is made exactly as the cold start of that call would make it: its
bwrap is the child's own (the call's status is its exit), announced to the child's guard (a child killed outright
takes it along), discarded, unused, when the call is of another kind, runs warm or never comes (the server's end).
What crosses between processes is plain data (``marshal`` of strings, numbers and tuples), checked field by field;
a recipe that does not read back is dropped (that call runs cold). A recipe can make a spare only; whether a call
uses it is decided by the call's own confinement, computed by the call (``fits``): no recipe can lessen a call's
isolation.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import socket
from collections.abc import Hashable

from toolexec.callfiles import new_call_files
from toolexec.recordtype import field_names
from toolexec.runtimes import sandbox_spare
from toolexec.runtimes.sandbox import BWRAP_VARIABLE, Confinement
from toolexec.runtimes.sandbox_spare import Recipe, Spare, Spares

__all__ = ["MAX_RECIPE", "ServedSpares", "read_recipe", "write_recipe"]

MAX_RECIPE = 1 << 20  # bytes of one recipe (its paths: the hidden list, the places seen)
KINDS_SEEN = 256  # kinds of call the server counts at once (the oldest are forgotten)
_FIELDS = frozenset(field_names(Confinement()))
# What the making of a spare reads of the environment (the waiting child's: the server's), which a cold start would
# read of the caller's: the bwrap to run, and where a declared policy's call files are made. A spare is used only when
# the caller's are the same.
_READ = (BWRAP_VARIABLE, "TMPDIR", "TEMP", "TMP")


class ServedSpares(Spares):
    """The spares of ``toolexec serve``: in the server, the kinds of call its children ordered and the recipe to hand
    to the next child; in a child, the one spare it made while it waited (see the module)."""

    def __init__(self, *, idle: float) -> None:
        super().__init__(most=1, idle=idle)
        self.idle = idle
        self.owner = os.getpid()
        self.orders, self._order = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        for end in (self.orders, self._order):
            end.setblocking(False)
        self._counts: dict[bytes, int] = {}
        self.next: bytes | None = None  # the recipe for the next waiting child (the server's), as it came
        self.key: Hashable | None = None  # the kind of this child's spare
        self.spare: Spare | None = None  # this child's spare (made while it waited)
        self._made_with: tuple[str | None, ...] = ()  # the variables of _READ when it was made
        self.taken = 0  # in a child: calls that started in its spare (a served call's own count: 0 or 1)

    # --- in a child ---------------------------------------------------------------------------------------------

    def forked(self) -> None:
        """In a child: the server's end of the orders is not the child's to read; what the server held is not its."""
        self.orders.close()
        self._counts.clear()
        self.next = None

    def make(self, message: bytes) -> None:
        """Make the spare ``message`` (a recipe the server handed over) describes, replacing one of another kind."""
        found = read_recipe(message)
        if found is None:
            return
        key, recipe = found
        if self.spare is not None:
            if key == self.key and self.spare.alive():
                return
            self.discard()
        self._made_with = _environment()
        self.spare = sandbox_spare.make(recipe)
        self.key = key if self.spare is not None else None

    def take(self, key: Hashable) -> Spare | None:
        """This child's spare when it was made for calls of ``key`` and is untouched (else None: the call starts cold;
        a spare of another kind is discarded at the child's end)."""
        spare = self.spare
        if spare is None or key != self.key or os.getpid() == self.owner:
            return None
        self.spare = self.key = None
        if spare.alive() and spare.intact() and _environment() == self._made_with:  # (the caller's, now)
            self.taken += 1
            return spare
        spare.discard()
        return None

    def order(self, key: Hashable, recipe: Recipe) -> None:
        """Tell the server this call's kind and how its sandbox was made (nothing in the server's own process)."""
        if os.getpid() == self.owner:
            return
        message = write_recipe(key, recipe)
        if message is not None and len(message) <= MAX_RECIPE:
            with contextlib.suppress(OSError):  # (a full queue: the next call tells it again)
                self._order.send(message)

    def discard(self) -> None:
        """End this child's spare, unused."""
        spare, self.spare, self.key = self.spare, None, None
        if spare is not None and not spare.consumed:
            spare.discard()

    def __len__(self) -> int:
        """Spares waiting in this process: this child's one, or none."""
        return int(self.spare is not None)

    def wait_made(self, timeout: float = 10.0) -> bool:
        """Nothing is made on a thread here (a child makes its spare before it takes its call): True at once."""
        return True

    def close(self) -> None:
        """End this process's spare, if any, and its ends of the orders' queue."""
        self.discard()
        for end in (self.orders, self._order):
            end.close()
        super().close()

    # --- in the server ------------------------------------------------------------------------------------------

    def receive(self) -> None:
        """Read the children's orders: a kind ordered a second time becomes the recipe for the next waiting child."""
        while True:
            try:
                message = self.orders.recv(MAX_RECIPE)
            except OSError:  # (none left, or the queue closed)
                return
            found = read_recipe(message)
            if found is None:
                continue
            kind = marshal.dumps(found[0])
            seen = self._counts.pop(kind, 0) + 1
            self._counts[kind] = min(seen, sandbox_spare.SECOND)
            if len(self._counts) > KINDS_SEEN:
                self._counts.pop(next(iter(self._counts)))
            if seen >= sandbox_spare.SECOND:
                self.next = message


def write_recipe(key: Hashable, recipe: Recipe) -> bytes | None:
    """``key`` and ``recipe`` as plain data (None when they are not: that kind gets no spare). A declared policy's
    spare makes its own call files, as the engine's recipe does (``new_call_files`` of the key's tool)."""
    if not isinstance(key, tuple) or not all(isinstance(part, (str, bool)) for part in key):
        return None
    confinement = {name: getattr(recipe.confinement, name) for name in _FIELDS}
    confinement["files"] = ()  # a new spare's files are its own (made from the key)
    try:
        umask = sandbox_spare.current_umask() if recipe.umask is None else recipe.umask  # (the caller's, in a served call)
        return marshal.dumps((key, confinement, tuple(recipe.places), recipe.cwd, umask))
    except ValueError:
        return None


def read_recipe(message: bytes) -> tuple[tuple[str | bool, ...], Recipe] | None:
    """The key and recipe of ``message`` (:func:`write_recipe`'s), or None when it is not one, whole and well typed."""
    try:
        key, fields, places, cwd, umask = marshal.loads(message)
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(key, tuple) or len(key) < 3 or not all(isinstance(part, (str, bool)) for part in key):
        return None
    if not isinstance(fields, dict) or set(fields) != _FIELDS or not isinstance(cwd, str) or not _strings(places):
        return None
    if type(umask) is not int or not 0 <= umask <= 0o777:
        return None
    if not all(isinstance(value, (str, bool, int, type(None))) or _strings(value) for value in fields.values()):
        return None
    try:
        confinement = Confinement(**fields)
    except TypeError:
        return None
    if key[0] == "confined" and len(key) == 4 and isinstance(key[1], str) and isinstance(key[3], bool):
        tool, asking = key[1], key[3]
        files = lambda: new_call_files(tool, asking)  # noqa: E731 - the recipe's own maker of files
        return key, Recipe(confinement=confinement, places=places, cwd=cwd, umask=umask, files=files)
    if key[0] == "baseline" and len(key) == 3 and confinement.baseline:
        return key, Recipe(confinement=confinement, places=places, cwd=cwd, umask=umask)
    return None


def _environment() -> tuple[str | None, ...]:
    return tuple(os.environ.get(name) for name in _READ)


def _strings(value: object) -> bool:
    return isinstance(value, tuple) and all(isinstance(item, str) for item in value)
