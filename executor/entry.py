"""The installed ``toolexec`` command (and ``python -m toolexec``): a ``run`` goes through the running server of its
config when there is one (:mod:`toolexec.serve_client`, which imports almost nothing), else the full CLI is loaded.

Only this module and the client are imported before the server answers: a one-shot call through a server costs
the interpreter's start and a few syscalls, not toolexec's imports (``tests/executor/test_serve.py`` counts them).
"""

import gc
import sys

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
            return status
        from toolexec import node_early

        node_early.begin(sys.argv[1:])  # a JavaScript or TypeScript tool's node starts now, beside toolexec's imports
    from toolexec.cli import program as full

    return full()
