"""The portable half of the process helper, for POSIX systems without pidfd or ``/proc`` (macOS, the BSDs).

The child's exit wakes the supervising loop through a pipe written by a thread
blocked in ``waitpid`` (through :meth:`subprocess.Popen.wait`, which holds Popen's
own lock, so nothing else reaps the child behind its back). That costs one thread
per call but no latency and no polling, unlike a short select timeout around
``poll()``. The call's processes are found with psutil: the tool's process group, and
anything carrying the call's marker in its environment, which also finds the ones
that left the group and were reparented to init (a snapshot of the child's
descendants would miss those).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time

import psutil

_GONE = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


class ExitWaiter:
    """A descriptor that becomes readable once the child has exited (and been reaped by Popen)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._read, write = os.pipe()

        def wait() -> None:
            try:
                proc.wait()
            finally:  # the thread owns the write end: it can never be closed under it and reused
                with contextlib.suppress(OSError):
                    os.write(write, b"x")
                os.close(write)

        self._thread = threading.Thread(target=wait, name=f"toolexec-wait-{proc.pid}", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            os.close(self._read)
            os.close(write)
            raise

    def fileno(self) -> int:
        """The read end of the pipe the waiting thread writes to when the child exits."""
        return self._read

    def close(self) -> None:
        """Join the waiting thread and release the pipe; call only once the child has been killed or has exited."""
        self._thread.join()
        if self._read >= 0:
            os.close(self._read)
            self._read = -1


def with_death_signal(argv: list[str]) -> list[str]:
    """``argv`` unchanged: a parent-death signal is a Linux feature."""
    return argv


def enter(mark: str = "", files: tuple[str, ...] = (), *, told: bool = True) -> None:
    """Nothing to set up before a spawn."""


def tell(mark: str, files: tuple[str, ...] = ()) -> None:
    """No guard to tell."""


def register(pid: int, mark: str = "", files: tuple[str, ...] = (), *, started_after: int = 0, told: bool = True) -> None:
    """Nothing to remember: the marker and the group find the call's processes (no call runs warm here)."""


def leave(pid: int | None, mark: str = "") -> None:
    """Nothing to release."""


def kill_marked(marker: str, pgid: int, *, leader: int = -1, reaped: bool = False) -> int:
    """Kill the call's processes (:func:`_kill_pass`) until a pass over the process table finds none (``leader``: the
    Linux backend's; this one has no pidfd, and takes the group by its number: once the tool is ``reaped``, only while
    no process has that number, which the system gives no new process while a process of the group is left)."""
    if reaped and psutil.pid_exists(pgid):
        pgid = -1  # a new process has it: by the marker alone
    escaped: set[int] = set()
    deadline = time.monotonic() + 10.0
    for _ in range(200):  # a process forking faster than it is killed loses within a few passes
        victims = _kill_pass(marker, pgid)
        escaped.update(pid for pid, outside in victims if outside)
        if not victims or time.monotonic() >= deadline:
            break
    return len(escaped)


def _kill_pass(marker: str, pgid: int) -> list[tuple[int, bool]]:
    """SIGKILL every live process of the group ``pgid`` (-1: none) or carrying ``marker`` (``NAME=value``); wait until
    they are gone.

    A process's environment is readable only where the system permits (on macOS:
    processes of the same user); those of other users cannot have inherited the
    marker from the tool anyway, unless the tool ran a set-user-ID program.
    Returns each one's pid and whether it had left the tool's process group.
    """
    name, _, value = marker.partition("=")
    me = os.getpid()
    victims: list[tuple[psutil.Process, bool]] = []
    for process in psutil.process_iter():
        if process.pid == me:
            continue
        try:
            if process.status() in _GONE:
                continue
            in_group = pgid > 0 and _group(process.pid) == pgid  # (-1: no group is the call's)
            # a dying group member's environment may read empty, so match it by group first
            if not in_group and process.environ().get(name) != value:
                continue
            process.kill()  # psutil checks the pid was not reused since the process was listed
            victims.append((process, not in_group))
        except (psutil.Error, OSError):
            continue
    pending = [process for process, _ in victims]
    deadline = time.monotonic() + 5.0
    while pending and time.monotonic() < deadline:
        pending = [process for process in pending if _alive(process)]
        if pending:
            time.sleep(0.002)  # SIGKILL is asynchronous: the call is not over until they are gone
    return [(process.pid, outside) for process, outside in victims]


def _group(pid: int) -> int:
    """The process group of ``pid``, or -1 where the system will not tell (then only the marker counts)."""
    try:
        return os.getpgid(pid)
    except PermissionError:
        return -1


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() not in _GONE
    except psutil.Error:
        return False


def reap_orphan(pid: int, start: int | None) -> None:
    """Nothing to do: this backend makes no subreaper, so a confined call's namespace init goes to init."""
