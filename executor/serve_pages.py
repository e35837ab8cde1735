"""The pages of ``toolexec serve``'s memory a served call writes, learnt from a call and copied ahead by the children
that wait for the next ones.

A forked CPython writes to nearly every page it reads (reference counts): each page a served call touches first costs
it a copy-on-write fault. A waiting child used to copy every private page of the server's memory ahead
(:func:`toolexec.runtimes.process_linux.own_pages`: ~26 MiB, ~14 ms of CPU per call on a loaded 2-core machine,
beside the call running then), of which a call writes about a tenth. Now the first :data:`FIRST` children, and one
in :data:`RELEARN` after them, copy nothing ahead: each takes its call's faults and, once its client has its answer,
tells the server which of the pages it shared at its fork it now holds alone
(:func:`~toolexec.runtimes.process_linux.written_pages`); the server keeps the union, and the other children copy
those pages only. A page a call writes that no learning call did is copied on write, as before; where the kernel does
not say which pages a process holds alone, every child copies all of them, as before.

The message is the server's own children's (a datagram on a socket pair made before any fork; no tool can reach
it), and what it names is only ever copied in a child's own memory.
"""

from __future__ import annotations

import contextlib
import marshal
import socket
from collections.abc import Callable

from toolexec.runtimes import process_linux

__all__ = ["RELEARN", "HotPages", "union", "within"]

RELEARN = 50  # one waiting child in this many learns the pages anew (the server's memory changes as it runs)
FIRST = 3  # the first children all learn (a tool's first call runs cold, the next warm: they write other pages)
MAX_RUNS = 4096  # runs of pages a message may name (a few hundred are usual)


class HotPages:
    """In the server: the runs of pages the last learning call wrote, and whether the next child learns. In a child:
    what it copies ahead, or what it learns from its call."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, int]] | None = None  # (start, length): None, nothing learnt (yet): copy every page
        self.blind = False  # the kernel does not say which pages a process holds alone: every child copies every page
        self.learning = False  # the child forked next learns (set by forking())
        self._forks = 0
        self._regions: list[tuple[int, int]] | None = None  # in a learning child: the private mappings at its fork
        self.told, self._tell = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        for end in (self.told, self._tell):
            end.setblocking(False)

    def forking(self) -> None:
        """In the server, before each fork of a waiting child: whether that child learns."""
        self.learning = not self.blind and (self._forks < FIRST or self._forks % RELEARN == 0)
        self._forks += 1

    # --- in a child ---------------------------------------------------------------------------------------------

    def forked(self) -> None:
        """In a child: the server's end is not its to read; a learning child notes its private mappings now."""
        self.told.close()
        if self.learning:
            try:
                self._regions = process_linux.private_regions()
            except OSError:
                self._regions = None

    def copy_ahead(self, until: Callable[[], bool]) -> None:
        """While waiting: copy the pages a call likely writes (every private page until one was learnt), until a
        client waits; a learning child copies none (its call's faults are what it learns from)."""
        if self._regions is not None:
            return
        runs = self.runs
        if runs is not None:  # only what is still this child's private writable memory (its mappings may have moved)
            try:
                runs = within(runs, process_linux.private_regions())
            except OSError:
                return
        process_linux.own_pages(until=until, regions=runs)

    def tell(self) -> None:
        """After a learning child's call: tell the server the pages it holds alone now (its call wrote them)."""
        if self._regions is None:
            return
        runs = process_linux.written_pages(self._regions)
        self._regions = None
        if len(runs) > MAX_RUNS:
            return  # (the server keeps what it learnt before)
        message = marshal.dumps(runs)
        with contextlib.suppress(OSError):  # (a full queue: the next learning child tells it)
            self._tell.send(message)

    # --- in the server ------------------------------------------------------------------------------------------

    def receive(self) -> None:
        """Read what the learning children told: the runs of the latest (none: the kernel does not say)."""
        while True:
            try:
                message = self.told.recv(1 << 20)
            except OSError:  # (none left, or closed)
                return
            try:
                runs = marshal.loads(message)
            except (EOFError, ValueError, TypeError):
                continue
            if not isinstance(runs, list) or not all(_run(item) for item in runs):
                continue
            if runs:
                self.runs = union(self.runs or [], runs)
            else:
                self.runs, self.blind = None, True

    def close(self) -> None:
        for end in (self.told, self._tell):
            end.close()


def within(runs: list[tuple[int, int]], regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``runs`` inside ``regions`` (both (start, length), each sorted by start and disjoint)."""
    found, index = [], 0
    for start, length in runs:
        end = start + length
        while index < len(regions) and sum(regions[index]) <= start:
            index += 1
        other = index
        while other < len(regions) and regions[other][0] < end:
            low, high = max(start, regions[other][0]), min(end, sum(regions[other]))
            if low < high:
                found.append((low, high - low))
            other += 1
    return found


def union(runs: list[tuple[int, int]], more: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The pages of ``runs`` and of ``more``, as sorted disjoint runs (start, length)."""
    found: list[tuple[int, int]] = []
    for start, length in sorted(runs + more):
        if found and start <= sum(found[-1]):
            low, size = found[-1]
            found[-1] = (low, max(size, start + length - low))
        else:
            found.append((start, length))
    return found


def _run(item: object) -> bool:
    return (
        isinstance(item, tuple)
        and len(item) == 2
        and all(isinstance(number, int) and number >= 0 for number in item)
        and item[1] > 0
    )
