"""A one-shot run's exit and its parent-death guard (:mod:`toolexec.runtimes.process_linux`): what the exit costs
when the guard holds the run's cgroups (a root toolexec's pids cgroup, left to the guard), waiting for its word as
the exit did before session 15, against ending its input and going (what a run whose call is over does now), and
against an exit with no cgroup (an ordinary user's: it waits for the guard's end, which has nothing to do).

    python benchmarks/guard_end_bench.py [RUNS]

Each variant starts the real guard (its argv from ``process_linux``), tells it a cgroup place (a ``C`` line naming a
folder with no cgroup in it: nothing is removed), lets it settle as it has by a call's end, then times the exit's
part: the variants alternate; printed, the median of each and the load average.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from toolexec.runtimes import process_linux


def _guard(lines: str) -> tuple[subprocess.Popen[bytes], socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(
        process_linux._guard_argv(),
        stdin=theirs.fileno(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"PATH": process_linux.GUARD_PATH},
        cwd="/",
        start_new_session=True,
    )
    theirs.close()
    ours.sendall(lines.encode())
    time.sleep(0.02)  # (up and reading, as it is by a call's end)
    return proc, ours


def waited_for_its_word(place: str) -> float:
    """The exit before: the guard's input ended, and its word (after its shell has started) waited for."""
    proc, end = _guard(f"C {os.urandom(8).hex()} {place}\n")
    started = time.perf_counter()
    end.shutdown(socket.SHUT_WR)
    end.settimeout(5)
    assert end.recv(1) == b"."
    end.close()
    taken = time.perf_counter() - started
    proc.wait()
    return taken * 1000


def not_waited(place: str) -> float:
    """The exit now, with nothing left for the guard but the cgroups: its input ended, nothing waited for."""
    proc, end = _guard(f"C {os.urandom(8).hex()} {place}\n")
    started = time.perf_counter()
    end.close()
    taken = time.perf_counter() - started
    proc.wait()
    return taken * 1000


def without_cgroups(place: str) -> float:
    """An exit whose guard holds no cgroup (an ordinary user's): its input ended, its end waited for."""
    proc, end = _guard(f"+ {2**22 + 1}\n- {2**22 + 1}\n")
    started = time.perf_counter()
    end.close()
    proc.wait()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 41
    variants: dict[str, Callable[[str], float]] = {
        "guard holding cgroups, its word waited for (before)": waited_for_its_word,
        "guard holding cgroups, not waited for (now)": not_waited,
        "guard holding no cgroup (an ordinary user's exit)": without_cgroups,
    }
    times: dict[str, list[float]] = {label: [] for label in variants}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as place:
        for _ in range(runs):
            for label, run in variants.items():
                times[label].append(run(place))
    print(f"load average: {load:.2f} -> {os.getloadavg()[0]:.2f}; runs: {runs}")
    for label, found in times.items():
        print(f"| {label} | {statistics.median(found):.2f} ms |")


if __name__ == "__main__":
    main()
