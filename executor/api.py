"""The public Python API: one :class:`Executor` per config, safe to share between threads and tasks."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolexec.catalog import Catalog, expand_enabled, load_catalog
from toolexec.config import Config, load_config
from toolexec.engine import Engine
from toolexec.records import ToolCall, ToolDeclaration, ToolResult
from toolexec.runtimes.process import Cancellation

if TYPE_CHECKING:
    from toolexec.build import BuildReport


class Executor:
    """Builds, lists and calls the tools of one config.

    >>> ex = Executor("config.yaml")            # doctest: +SKIP
    >>> ex.call("demo_py", {"text": "hi"}).output  # doctest: +SKIP
    """

    def __init__(self, config: Config | str | os.PathLike[str] | None = None) -> None:
        self.config = config if isinstance(config, Config) else load_config(config)
        self._catalog: Catalog | None = None
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.config.max_parallel)

    @property
    def catalog(self) -> Catalog:
        """The catalog, rebuilt when a visible tool or the config changed since it was read."""
        with self._lock:
            if self._catalog is None or not self._catalog.is_fresh(self.config):
                catalog = load_catalog(self.config)
                if catalog is None or not catalog.is_fresh(self.config):
                    catalog = self.build().catalog
                self._catalog = catalog
            return self._catalog

    def build(self, *, force: bool = False, on_file: Callable[[str], None] | None = None) -> BuildReport:
        """Compile the visible tools (see :func:`toolexec.build.build`); ``on_file`` follows progress."""
        from toolexec.build import build  # compiling is only needed when something changed

        report = build(self.config, force=force, on_file=on_file)
        self._catalog = report.catalog
        return report

    def tools(self, *, enabled_only: bool = True) -> list[ToolDeclaration]:
        catalog = self.catalog
        return catalog.enabled(self.config) if enabled_only else list(catalog.tools.values())

    def broken(self, *, enabled_only: bool = True) -> list[dict[str, Any]]:
        """The visible tools that failed to build: ``name``, ``language``, ``source`` and ``error`` (every problem)."""
        from toolexec.compilers import language_of

        wanted = None if not enabled_only or self.config.enabled_tools is None else set(expand_enabled(self.config))
        return [
            {
                "name": entry.name,
                "language": language_of(entry.file) or "unknown",
                "source": str(self.config.tools_dir / entry.file),
                "error": "\n".join(entry.problems),
            }
            for entry in self.catalog.entries
            if entry.problems and (wanted is None or entry.name in wanted)
        ]

    def describe(self, name: str) -> ToolDeclaration:
        return self.catalog.get(name, self.config)

    def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        cancel: Cancellation | None = None,
    ) -> ToolResult:
        """Run one tool and return its result; never raises for a failed or refused call."""
        request = ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout)
        engine = Engine(self.config, self.catalog)
        with self._slots:
            return engine.invoke(request, cancel)

    async def acall(
        self, name: str, arguments: Any = None, *, call_id: str | None = None, timeout: float | None = None
    ) -> ToolResult:
        """As :meth:`call`; cancelling the awaiting task ends the tool's whole process tree."""
        import asyncio  # not at module level: it costs a one-shot `toolexec run` ~50 ms

        cancel = Cancellation()
        work = asyncio.ensure_future(
            asyncio.to_thread(self.call, name, arguments, call_id=call_id, timeout=timeout, cancel=cancel)
        )
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            cancel.cancel()
            await asyncio.wait([work])
            raise
        finally:
            if work.done():
                cancel.close()
