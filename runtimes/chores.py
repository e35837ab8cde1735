"""Work a call's result need not wait for, done after the call on a thread of its own: :class:`Chores`.

A call's cgroup takes the kernel a grace period to remove (~10 ms, mostly waiting); a warm call's private files take
the journal of a large ext4 ``/tmp`` a few hundred microseconds to empty or remove (milliseconds under load). None of
it changes the call's result, so none of it is on the call's path: each is queued on a :class:`Chores` and done, in
order, by its one thread. The thread waits a little for more work before it ends (a thread started per call costs
the next call a start and a wake-up), and :meth:`Chores.drain` waits until everything queued is done and the thread
has ended: an executor's close, and this process's exit, leave nothing behind. A process forked from one that queued
chores does its own: its copy of each queue starts empty, with no thread (its parent's are not its), and starts its
own as its parent did.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable

LINGER_SECONDS = 1.0  # how long the thread waits for the next chore before it ends


class Chores:
    """One queue of chores and the thread that does them (started with the first, ended once idle ``linger``
    seconds or drained). A chore that raises is dropped (what it tidies is then left for the next one, or for the
    process's guard): it never ends the thread."""

    def __init__(self, name: str, *, linger: float = LINGER_SECONDS) -> None:
        self.name = name
        self.linger = linger
        self._queue: list[Callable[[], object]] = []
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = False  # a chore is being done (taken off the queue)
        self._stopping = False  # drain() asks the thread to end once the queue is empty
        _queues.add(self)

    def add(self, chore: Callable[[], object]) -> None:
        """Do ``chore`` soon, after those queued before it."""
        with self._changed:
            self._queue.append(chore)
            if self._thread is None:
                self._stopping = False
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
            else:
                self._changed.notify_all()

    def idle(self) -> bool:
        """Whether nothing is queued or being done."""
        with self._changed:
            return not self._queue and not self._busy

    def drain(self, timeout: float | None = 10.0) -> bool:
        """Wait (up to ``timeout`` seconds) until every chore queued is done and the thread has ended; whether it has."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
            done = self._changed.wait_for(lambda: self._thread is None, timeout)
        return done

    def _work(self) -> None:
        while True:
            with self._changed:
                self._busy = False
                self._changed.notify_all()
                if not self._queue and not self._stopping:
                    self._changed.wait_for(lambda: self._queue or self._stopping, self.linger)
                if not self._queue:
                    self._thread = None
                    self._changed.notify_all()
                    return
                chore = self._queue.pop(0)
                self._busy = True
            _quietly(chore)
            del chore  # (not held while the thread lingers: it may be all that keeps its owner, a pool, alive)

    def _forget(self) -> None:
        """In a forked child: the parent's chores and thread are not this process's."""
        self._queue = []
        self._changed = threading.Condition()
        self._thread = None
        self._busy = self._stopping = False


_queues: weakref.WeakSet[Chores] = weakref.WeakSet()


def _forget_after_fork() -> None:
    for queue in list(_queues):
        queue._forget()


os.register_at_fork(after_in_child=_forget_after_fork)


def _quietly(chore: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # a chore only tidies: what it leaves, the next one (or the guard) removes
        chore()
