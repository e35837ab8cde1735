"""Runtimes: how each language's tools are started and their results read back.

:func:`runtime_for` gives the :class:`~toolexec.runtimes.base.Runtime` of a language;
:mod:`toolexec.runtimes.process` is the single process helper all of them share.
"""

from __future__ import annotations

from importlib import import_module

from toolexec.runtimes.base import Prepared, Runtime, Site
from toolexec.runtimes.process import CallControl, Capture, Finished, Launch, run_process

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from toolexec.records import Language

__all__ = [
    "CallControl",
    "Capture",
    "Finished",
    "Launch",
    "Prepared",
    "Runtime",
    "Site",
    "look_up_host",
    "run_process",
    "runtime_for",
]

_CLASSES = {
    "python": "PythonRuntime",
    "bash": "BashRuntime",
    "typescript": "TypeScriptRuntime",
    "javascript": "JavaScriptRuntime",
}
_cache: dict[str, Runtime] = {}


def runtime_for(language: Language) -> Runtime:
    """The runtime of a language, made once per process (its module is imported on first use)."""
    if language not in _cache:
        module = import_module(f"{__name__}.{language}")
        _cache[language] = getattr(module, _CLASSES[language])()
    return _cache[language]


def look_up_host() -> None:
    """Make, in this process, every lookup a call would make once per process (each runtime; the process helper's
    C library handle; bwrap, whether it makes namespaces, the cgroups a call's limits use; prlimit; and the modules
    they load), so that processes forked from this one (``toolexec serve``'s children) start each call with none
    left to make. Looking never fails: what is missing stays missing, and a call says so as it would have."""
    import sys

    for language in _CLASSES:
        runtime_for(language)  # type: ignore[arg-type]
    if not sys.platform.startswith("linux"):
        return
    from toolexec.runtimes import baseline, cgroup, process_linux, sandbox

    process_linux.available()
    process_linux._libc_prctl()
    if sandbox.bwrap() is not None:
        sandbox.mechanism()
        baseline.usable()
    root = sandbox._pids_root()
    if root is not None:
        cgroup.sweep_once(root)
    cgroup.memory_parent()
    sandbox._prlimit()
