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
