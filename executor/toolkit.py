"""A toolkit: a named subset of an executor's tools, offered and called on its own; and the discovery report.

>>> fs = Executor().toolkit("fs")             # doctest: +SKIP   (a mapping_tools alias)
>>> fs.names()                                 # doctest: +SKIP
['fs_cat', 'fs_ls']
>>> fs.declarations(format="anthropic")         # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolexec.errors import UnknownTool
from toolexec.records import ToolCall, ToolDeclaration, ToolResult

if TYPE_CHECKING:
    from toolexec.api import Executor
    from toolexec.catalog import Catalog
    from toolexec.config import Config
    from toolexec.providers import Declarations
    from toolexec.runtimes.process import CallControl

__all__ = ["DiscoveryError", "DiscoveryReport", "Toolkit"]


class Toolkit:
    """Some of an executor's tools under one name: their declarations, and calls limited to them.

    A call of a tool outside the toolkit is refused (reason ``unknown_tool``) with a
    message listing what the toolkit holds; calls share the executor's limiter and hook.
    """

    def __init__(self, executor: Executor, name: str, tools: Sequence[str]) -> None:
        self.executor = executor
        self.name = name
        self.tools = tuple(dict.fromkeys(tools))

    def names(self) -> list[str]:
        """The toolkit's tool names, sorted."""
        return sorted(self.tools)

    def has(self, name: str) -> bool:
        """Whether ``name`` (or the provider-safe name of one) is in the toolkit."""
        return self.executor.original_name(name) in self.tools

    def get(self, name: str) -> ToolDeclaration:
        """The declaration of one of the toolkit's tools."""
        self._check(self.executor.original_name(name))
        return self.executor.get(self.executor.original_name(name))

    def manifest(self) -> list[dict[str, Any]]:
        """Name, description and input schema of each tool, sorted by name."""
        return [entry for entry in self.executor.manifest() if entry["name"] in self.tools]

    def declarations(self, format: str = "openai", *, json_schema: bool = False) -> Declarations:
        """The toolkit's tools declared in ``format`` (names as the whole executor maps them)."""
        return self.executor.declarations(format, json_schema=json_schema, only=self.tools)

    def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        cancel: CallControl | None = None,
    ) -> ToolResult:
        """As :meth:`Executor.call`, for the toolkit's tools only."""
        call = ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout)
        return self.executor.calls.run(call, cancel, admit=self._check)

    def call_many(self, calls: Iterable[ToolCall], *, cancel: CallControl | None = None) -> list[ToolResult]:
        """As :meth:`Executor.call_many`; a call outside the toolkit is refused in its place."""
        return self.executor._call_many(calls, cancel, admit=self._check)

    async def acall(
        self, name: str, arguments: Any = None, *, call_id: str | None = None, timeout: float | None = None
    ) -> ToolResult:
        """As :meth:`Executor.acall`, for the toolkit's tools only."""
        call = ToolCall(name=name, arguments=arguments, call_id=call_id, timeout=timeout)
        return await self.executor._acall(call, admit=self._check)

    def _check(self, name: str) -> None:
        """The toolkit's filter on the call path: a tool outside it is refused (reason ``unknown_tool``)."""
        if name not in self.tools:
            raise UnknownTool(name, (), because=f"it is not in toolkit {self.name!r}, which holds: {', '.join(self.names())}")


@dataclass(frozen=True)
class DiscoveryError:
    """A visible tool file that did not build: where, and why."""

    file: str
    line: int
    message: str


@dataclass(frozen=True)
class DiscoveryReport:
    """What tool discovery found: the files searched, the tools loaded, and each file's errors."""

    searched: list[str]
    loaded: list[str]
    errors: list[DiscoveryError]


_LOCATED = re.compile(r"(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<message>.*)", re.DOTALL)


def discovery_report(config: Config, catalog: Catalog, registered: Iterable[ToolDeclaration]) -> DiscoveryReport:
    """The report for ``catalog`` (and the tools registered at run time)."""
    extra = list(registered)
    searched = [str(config.tools_dir / entry.file) for entry in catalog.entries] + [tool.source for tool in extra]
    loaded = [entry.name for entry in catalog.entries if entry.declaration is not None] + [tool.name for tool in extra]
    errors = []
    for entry in catalog.entries:
        for problem in entry.problems:
            located = _LOCATED.match(problem)
            if located:
                errors.append(DiscoveryError(located["file"], int(located["line"]), located["message"]))
            else:
                errors.append(DiscoveryError(str(config.tools_dir / entry.file), 0, problem))
    return DiscoveryReport(searched, loaded, errors)
