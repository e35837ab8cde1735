"""Processes that outlive the call that needed them, started by one thread that lives as long as this process:
:func:`lasting`.

bwrap's ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which the kernel fires when the *thread* that started the
process ends, not only the process. A warm server (or a sandbox set up ahead) is started by whichever call first
needs it, on that call's thread: a thread of ``call_many``'s pool, an anyio worker of ``toolexec mcp``, a served
run's child's. Those threads end while the server serves on (a pool shut down, a worker idle for ten seconds), and
the server died with them, with every call running in it. Every process meant to outlive its caller's thread is
therefore started here, by one daemon thread that ends only with this process (when the death signal is what is
wanted). A process forked from this one has no such thread: it starts its own on first use.
"""

from __future__ import annotations

import os
import threading

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

__all__ = ["lasting"]


class _Job:
    __slots__ = ("done", "error", "result", "start")

    def __init__(self, start: Callable[[], object]) -> None:
        self.start = start
        self.done = threading.Event()
        self.result: object = None
        self.error: BaseException | None = None


_lock = threading.Lock()
_jobs: list[_Job] = []
_wake = threading.Condition(_lock)
_thread: threading.Thread | None = None
_owner = -1  # the process whose thread ``_thread`` is


def lasting(start: Callable[[], T]) -> T:
    """``start()`` (a ``subprocess.Popen`` of a process that must outlive the calling thread), run on this process's
    starter thread; what it returned, or what it raised, raised here."""
    global _thread, _owner
    if threading.current_thread() is _thread:
        return start()
    job = _Job(start)
    with _lock:
        if _owner != os.getpid() or _thread is None:  # first use, or a forked child: its parent's thread is not here
            _jobs.clear()
            _owner = os.getpid()
            _thread = threading.Thread(target=_serve, name="toolexec-starter", daemon=True)
            _thread.start()
        _jobs.append(job)
        _wake.notify()
    job.done.wait()
    if job.error is not None:
        raise job.error
    return job.result  # type: ignore[return-value]


def _serve() -> None:
    while True:
        with _lock:
            _wake.wait_for(lambda: bool(_jobs))
            job = _jobs.pop(0)
        try:
            job.result = job.start()
        except BaseException as exc:  # handed to the caller, whatever it is
            job.error = exc
        finally:
            job.done.set()
