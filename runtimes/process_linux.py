"""The Linux half of the process helper: a pidfd for the child's exit, ``/proc`` for the call's processes.

Standard library only: this is the path of every call on Linux, and a one-shot
``toolexec run`` must not pay for importing psutil.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

_usable: bool | None = None


def available() -> bool:
    """Whether this system has both a working ``pidfd_open`` (Linux 5.3+) and a ``/proc`` to scan."""
    global _usable
    if _usable is None:
        _usable = False
        if hasattr(os, "pidfd_open") and os.path.exists("/proc/self/stat"):
            try:  # the call exists in Python but an old kernel or a seccomp filter may refuse it
                os.close(os.pidfd_open(os.getpid()))
                _usable = True
            except OSError:
                pass
    return _usable


class ExitWaiter:
    """A descriptor that becomes readable when the child exits (a pidfd); it does not reap the child."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._fd = os.pidfd_open(proc.pid)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def kill_marked(marker: str, pgid: int) -> int:
    """SIGKILL every live process of the group or carrying ``marker`` (``NAME=value``); wait until they are gone.

    Returns how many of them had left the tool's process group.
    """
    needle = marker.encode()
    victims: dict[int, bool] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            state, group = _state(int(name))
            if state in ("Z", "X", ""):
                continue
            if group != pgid:  # a dying group member's environ reads empty, so match it by group
                with open(f"/proc/{name}/environ", "rb") as handle:
                    if needle not in handle.read():
                        continue
            os.kill(int(name), signal.SIGKILL)
            victims[int(name)] = group != pgid
        except (OSError, ValueError):
            continue
    deadline = time.monotonic() + 5.0
    while victims and time.monotonic() < deadline and any(_state(pid)[0] not in ("Z", "X", "") for pid in victims):
        time.sleep(0.002)  # SIGKILL is asynchronous: the call is not over until they are gone
    return sum(victims.values())


def _state(pid: int) -> tuple[str, int]:
    """(state letter, process group) from /proc, or ("", 0) once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return "", 0
    return fields[0].decode(), int(fields[2])
