"""Private paths in the temporary directory: a new file (0600) or directory (0700) made as ``tempfile`` would make it,
without importing ``tempfile`` and ``random`` (a one-shot run pays for every import), where ``tempfile.gettempdir()``
would put it; and the guard told to remove one should this process die. A call's files (toolexec.callfiles) and a
warm pool's directories (toolexec.runtimes.warm) are made with them.
"""

from __future__ import annotations

import contextlib
import os
import sys

from toolexec.errors import StateUnavailable, ToolexecError

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["guarded", "private_path", "temporary_directories"]


def guarded(path: str, on: bool) -> None:
    """Tell the process's guard (the Linux backend's, where it is the one chosen) to remove ``path`` at its death."""
    from toolexec.runtimes import process_linux
    from toolexec.runtimes.process import backend

    with contextlib.suppress(ToolexecError):  # a bad TOOLEXEC_PROCESS_BACKEND: the call itself says so
        if backend() is process_linux:
            process_linux.remove_at_death(path, on)


def private_path(prefix: str, suffix: str, *, directory: bool = False, within: str | None = None) -> str:
    """A new empty file, 0600, made as ``tempfile.mkstemp`` makes one (``O_EXCL``, never through a link) and where it
    would (or in ``within``); its path. With ``directory``, a new empty directory, 0700, as ``tempfile.mkdtemp``
    makes one. StateUnavailable when no candidate directory takes it."""
    problem: OSError | None = None
    for directory_path in [within] if within is not None else temporary_directories():
        for _ in range(100):
            path = os.path.join(directory_path, f"{prefix}{os.urandom(6).hex()}{suffix}")
            try:
                if directory:
                    os.mkdir(path, 0o700)
                else:
                    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            except FileExistsError:
                continue
            except OSError as exc:  # missing, unwritable, read-only: the next candidate, as gettempdir does
                problem = exc
                break
            return path
    where = problem.filename if problem is not None and isinstance(problem.filename, str) else "the temporary directory"
    reason = (problem.strerror or str(problem)) if problem is not None else f"no free name for {prefix}"
    raise StateUnavailable(os.path.dirname(where) or where, f"cannot create the call's files there: {reason}")


def temporary_directories() -> Iterator[str]:
    """``tempfile.gettempdir()``'s candidates in its order: ``tempfile.tempdir`` where a program set it (then only
    that), else TMPDIR, TEMP, TMP, the system's directories, the working directory."""
    chosen = getattr(sys.modules.get("tempfile"), "tempdir", None)
    if chosen:
        yield os.path.abspath(chosen)
        return
    for name in ("TMPDIR", "TEMP", "TMP"):
        value = os.environ.get(name)
        if value:
            yield os.path.abspath(value)
    yield from ("/tmp", "/var/tmp", "/usr/tmp")
    try:
        yield os.getcwd()
    except OSError:  # the working directory was removed
        yield os.curdir
