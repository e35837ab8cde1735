"""The installed ``toolexec`` command (and ``python -m toolexec``): a ``run`` goes through the running server of its
config when there is one (:mod:`toolexec.serve_client`, which imports almost nothing), else the full CLI is loaded.

Only this module and the client are imported before the server answers: a one-shot call through a server costs
the interpreter's start and a few syscalls, not toolexec's imports (``tests/executor/test_serve.py`` counts them).
"""

import gc
import sys

TYPE_CHECKING = False  # typing is not imported: the client is the first thing a one-shot run pays for
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = ["program"]


def program() -> int:
    """``toolexec`` as installed: through a running ``toolexec serve`` when one takes the call, else
    :func:`toolexec.cli.program`.

    It starts with the cyclic garbage collector off: start-up makes thousands of objects (modules, classes,
    functions, the catalog's records) and frees almost none, so the collector's passes while toolexec imports itself
    are wasted work (~3 ms of a one-shot run). A one-shot ``run`` keeps it off: the process makes one call and ends,
    and what it frees is freed by reference counting (its cyclic garbage is a few hundred objects however long the
    tool runs). Every other command, the long-lived servers among them, turns it back on once parsed (see
    :func:`toolexec.cli.main`).
    """
    gc.disable()
    if "run" in sys.argv[1:]:  # only a one-shot run is ever served
        from toolexec.serve_client import through_server
        from toolexec.version import __version__

        status = through_server(sys.argv[1:], __version__)
        if status is not None:
            _served_exit(status)
        from toolexec import early

        early.begin(sys.argv[1:])  # the tool's process (its sandbox too) starts now, beside toolexec's imports
        if early.spare_pid() is not None:
            from toolexec.runtimes import process_linux

            early.guarded(process_linux.announce, process_linux.withdraw)
    else:
        from toolexec import early_stats

        early_stats.begin(sys.argv[1:])  # a list's or build's no-change stats start now, beside toolexec's imports
    from toolexec.cli import program as full

    return full()


def _served_exit(status: int) -> "NoReturn":
    """End a run the server made at once, with its status: the interpreter's teardown (its modules, its objects, its
    final collections) is ~1.5 ms of a served run's ~15, and this process holds nothing to tear down: it wrote
    nothing itself but what :mod:`toolexec.serve_client` flushed, started no thread and registered no exit handler."""
    import os  # (imported by the interpreter's start already: no cost)

    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib is not imported on the client's path
            stream.flush()
        except Exception:  # a closed or broken stream: nothing more to say on it
            pass
    os._exit(status)
