"""Runtimes: how each language's tools are started and their results read back.

:func:`runtime_for` gives the :class:`~runtimes.base.Runtime` of a language;
:mod:`runtimes.process` is the single process helper all of them share.
"""

from __future__ import annotations

from importlib import import_module

from executor.records import Language
from runtimes.base import Context, Runtime
from runtimes.process import Cancellation, Capture, Finished, Launch, run_process

__all__ = ["Cancellation", "Capture", "Context", "Finished", "Launch", "Runtime", "run_process", "runtime_for"]

_CLASSES = {
    "python": "PythonRuntime",
    "bash": "BashRuntime",
    "typescript": "TypeScriptRuntime",
    "javascript": "JavaScriptRuntime",
}
_cache: dict[str, Runtime] = {}


def runtime_for(language: Language) -> Runtime:
    if language not in _cache:
        module = import_module(f"runtimes.{language}")
        _cache[language] = getattr(module, _CLASSES[language])()
    return _cache[language]
