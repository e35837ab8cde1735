"""Where a confined launch's time goes: bwrap alone, each option a confined call uses added one at a time, against
the same program started unconfined; and what the call's path would cost with the sandbox set up ahead of it.

    python benchmarks/sandbox_pieces_bench.py [RUNS]

Every variant runs ``/bin/true`` (no interpreter: what is left is the sandbox's own cost), alternated with a bare
``/bin/true`` start; printed: the median and the median of the adjacent differences. The rows, in order:

- bwrap with ``--bind / /`` only (its own start: exec, clone, the mount namespace, pivot_root, its init's fork);
- then ``--unshare-user``, ``--unshare-pid``, ``--unshare-ipc --unshare-uts --unshare-cgroup-try``,
  ``--unshare-net`` (a network namespace, its loopback brought up), ``--ro-bind / /`` in place of ``--bind``,
  ``--dev /dev``, ``--proc /proc``, ``--tmpfs /tmp``, ``--die-with-parent --new-session --cap-drop ALL``: each row
  adds one to the row above, the last is what :func:`toolexec.runtimes.sandbox.wrap` runs before the view;
- six binds more (a typical view and the call's own files);
- ``/bin/sh`` moving itself into the call's cgroups before it becomes bwrap (a root toolexec's calls);
- the same full sandbox set up ahead and waiting (its program blocked on a pipe), timed from the byte that lets it go
  on to its end: the figure a pre-set-up sandbox, one per call, would leave on the call's path.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

STEPS: list[tuple[str, list[str]]] = [
    ("bwrap --bind / /", []),
    ("+ --unshare-user", ["--unshare-user"]),
    ("+ --unshare-pid", ["--unshare-pid"]),
    ("+ ipc, uts, cgroup namespaces", ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]),
    ("+ --unshare-net", ["--unshare-net"]),
    ("+ --ro-bind / / (for --bind)", []),
    ("+ --dev /dev", ["--dev", "/dev"]),
    ("+ --proc /proc", ["--proc", "/proc"]),
    ("+ --tmpfs /tmp", ["--tmpfs", "/tmp"]),
    ("+ --die-with-parent --new-session --cap-drop ALL", ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]),
]


def _bwrap() -> str | None:
    from toolexec.runtimes import sandbox

    return sandbox.bwrap()


def _started(argv: list[str], **options: object) -> Callable[[], float]:
    def run() -> float:
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, **options)  # type: ignore[call-overload]
        return (time.perf_counter() - started) * 1000

    return run


def _ahead(argv: list[str]) -> Callable[[], float]:
    """The sandbox of ``argv`` (bwrap's options) made before the timing starts; timed: one byte, and its end."""

    def run() -> float:
        read, write = os.pipe()
        script = "read line <&3; exec /bin/true"
        process = subprocess.Popen([*argv, "--", "/bin/sh", "-c", script], pass_fds=(read,), stdin=subprocess.DEVNULL)
        os.close(read)
        try:
            deadline = time.monotonic() + 10
            while not _waiting(process.pid) and time.monotonic() < deadline:  # set up: its program reads the pipe
                time.sleep(0.002)
            started = time.perf_counter()
            os.write(write, b"\n")
            process.wait()
            return (time.perf_counter() - started) * 1000
        finally:
            os.close(write)
            if process.poll() is None:
                process.kill()
                process.wait()

    return run


def _waiting(pid: int) -> bool:
    """Whether the shell inside bwrap's tree sleeps (in its ``read``: its sandbox is made)."""
    try:
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            stat = Path(f"/proc/{child}/stat").read_text()
            if stat[stat.index("(") + 1 : stat.rindex(")")] == "sh" and stat[stat.rindex(")") + 2] == "S":
                return True
            if _waiting(int(child)):
                return True
    except (OSError, ValueError):
        return False
    return False


def variants(binary: str, root: Path) -> list[tuple[str, Callable[[], float]]]:
    """(label, timed start) for every row, the bare start first."""
    found: list[tuple[str, Callable[[], float]]] = [("/bin/true, unconfined", _started(["/bin/true"]))]
    namespaces: list[str] = []  # bwrap's options before the root's bind, and the mounts after it (order matters)
    mount = ["--bind", "/", "/"]
    mounts: list[str] = []
    for label, added in STEPS:
        if label.startswith("+ --ro-bind"):
            mount = ["--ro-bind", "/", "/"]
        elif added[:1] in (["--dev"], ["--proc"], ["--tmpfs"]):
            mounts += added
        else:
            namespaces += added
        found.append((label, _started([binary, *namespaces, *mount, *mounts, "--", "/bin/true"])))
    full = [binary, *namespaces, *mount, *mounts]
    places = {name: root / name for name in ("functions", "cache", "out", "failure", "artifacts")}
    for name, path in places.items():
        path.mkdir() if name in ("functions", "cache", "artifacts") else path.touch()
    (places["functions"] / "cache").mkdir()
    view = ["--ro-bind-try", str(places["functions"]), str(places["functions"])]
    view += ["--tmpfs", str(places["functions"] / "cache"), "--bind-try", str(places["cache"]), str(places["cache"])]
    for name in ("out", "failure", "artifacts"):
        view += ["--bind", str(places[name]), str(places[name])]
    found.append(("+ 6 binds (a view and the call's files)", _started([*full, *view, "--", "/bin/true"])))
    join = 'while [ "$1" != -- ]; do shift; done; shift; exec "$@"'  # the cgroup join's shell, without a cgroup
    found.append(
        (
            "+ /bin/sh before bwrap (root's cgroup join)",
            _started(["/bin/sh", "-c", join, "sh", "--", *full, *view, "--", "/bin/true"]),
        )
    )
    found.append(("the same sandbox set up ahead, from its go", _ahead([*full, *view])))
    return found


def measure(runs: int) -> list[tuple[str, float, float]]:
    """(label, median ms, median added to the adjacent bare start) per row; empty without bwrap."""
    binary = _bwrap()
    if binary is None:
        return []
    with tempfile.TemporaryDirectory() as directory:
        found = variants(binary, Path(directory))
        for _, run in found:  # warm the page cache
            run()
        times: dict[str, list[float]] = {label: [] for label, _ in found}
        for _ in range(runs):
            for label, run in found:
                times[label].append(run())
    bare = times[found[0][0]]
    return [
        (label, statistics.median(times[label]), statistics.median(b - a for a, b in zip(bare, times[label], strict=True)))
        for label, _ in found
    ]


def pieces_rows(b: object) -> list[object]:
    """The rows of this section in ``make bench`` (``b``: run.py's Bench, unused)."""
    from harness import RUNS
    from run import Row, ms

    return [
        Row(f"sandbox launch: {label}", ms(median), "/bin/true", f"{added:+.1f} ms") for label, median, added in measure(RUNS)[1:]
    ]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 41
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print("| launch | median | added to /bin/true |")
    print("| --- | --- | --- |")
    for label, median, added in measure(runs):
        print(f"| {label} | {median:.2f} ms | {added:+.2f} ms |")


if __name__ == "__main__":
    main()
