"""``toolexec.__all__`` is a deliberate API: every name resolves, and every type the public methods' signatures name
can be imported from ``toolexec`` itself."""

from __future__ import annotations

import inspect
import re

import pytest

import toolexec
from toolexec import Executor, Toolkit

# What signatures may name without toolexec exporting it: the standard library's and the language's.
STANDARD = {"Any", "Iterable", "Sequence", "Callable", "TracebackType", "None", "PathLike", "Literal"}


def test_every_exported_name_resolves() -> None:
    assert [name for name in toolexec.__all__ if getattr(toolexec, name, None) is None] == []
    assert sorted(toolexec.__all__) == toolexec.__all__


@pytest.mark.parametrize("owner", [Executor, Toolkit])
def test_the_types_public_signatures_name_are_exported(owner: type) -> None:
    named = set()
    for name, member in vars(owner).items():
        if name.startswith("_") and name != "__init__":
            continue
        function = member.fget if isinstance(member, property) else member
        if not callable(function):
            continue
        annotations = [str(a) for a in getattr(function, "__annotations__", {}).values()]
        for text in annotations:
            named |= set(re.findall(r"\b[A-Z][A-Za-z]+\b", text))
    missing = sorted(n for n in named - STANDARD if n not in toolexec.__all__)
    assert missing == []
    assert "CallControl" in named  # the case that was missing


def test_the_old_alias_is_gone() -> None:
    import toolexec.runtimes as runtimes

    assert not hasattr(toolexec, "Cancellation") and not hasattr(runtimes, "Cancellation")
    assert inspect.signature(Executor.call).parameters["cancel"].annotation == "CallControl | None"
