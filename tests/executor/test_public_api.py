"""``toolexec.__all__`` is a deliberate API: exactly these names, every one resolves to a distinct object (no
aliases), and every type the public methods' signatures name can be imported from ``toolexec`` itself."""

from __future__ import annotations

import inspect
import re

import pytest

import toolexec
from toolexec import Executor, Toolkit

# The public API: a name added or removed here is an API decision, made on purpose.
PUBLIC = [
    "Annotations",
    "ApprovalRequest",
    "BadRequest",
    "Batch",
    "BeforeCall",
    "BuildError",
    "BuildReport",
    "CallControl",
    "CallDenied",
    "CallRefused",
    "Catalog",
    "CompileError",
    "Config",
    "ConfigError",
    "Decision",
    "Declarations",
    "Deny",
    "Diff",
    "DiscoveryError",
    "DiscoveryReport",
    "Entry",
    "Executor",
    "InvalidArguments",
    "Names",
    "PreparationFailed",
    "Problem",
    "Rewrite",
    "RuntimeUnavailable",
    "Sent",
    "ToolCall",
    "ToolDeclaration",
    "ToolResult",
    "ToolexecError",
    "Toolkit",
    "UnknownTool",
    "__version__",
    "format_tool_result",
    "format_tool_result_as_text",
    "load_config",
]
# What signatures may name without toolexec exporting it: the standard library's and the language's ...
STANDARD = {"Any", "Iterable", "Sequence", "Callable", "TracebackType", "None", "PathLike", "Literal", "Path", "Mapping"}
# ... and the closed vocabularies: Literal aliases of str that exist for type checkers only (records import no typing).
VOCABULARIES = {"Language", "Status", "Convention", "Reason"}
# Made by toolexec (Executor.catalog, BuildReport.catalog and their entries), never by a caller: not public.
MADE_BY_TOOLEXEC = {"Catalog.__init__", "Entry.__init__", "Entry.from_index"}


def test_all_names_exactly_the_public_api_and_each_name_resolves_to_its_own_object() -> None:
    assert toolexec.__all__ == PUBLIC
    resolved = {name: getattr(toolexec, name) for name in PUBLIC}
    assert [name for name, value in resolved.items() if value is None] == []
    by_object: dict[int, list[str]] = {}
    for name, value in resolved.items():
        if name != "__version__":
            by_object.setdefault(id(value), []).append(name)
    assert [names for names in by_object.values() if len(names) > 1] == []  # no alias
    with pytest.raises(AttributeError, match="module 'toolexec' has no attribute 'Definitions'"):
        _ = toolexec.Definitions  # type: ignore[attr-defined]


def _public_functions() -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for name in PUBLIC:
        value = getattr(toolexec, name)
        if inspect.isclass(value):
            if issubclass(value, BaseException):
                continue
            for attribute, member in vars(value).items():
                if attribute.startswith("_") and attribute != "__init__":
                    continue
                function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if callable(function) and f"{name}.{attribute}" not in MADE_BY_TOOLEXEC:
                    found.append((f"{name}.{attribute}", function))
        elif callable(value):
            found.append((name, value))
    return found


def test_the_types_public_signatures_name_are_exported() -> None:
    missing: dict[str, list[str]] = {}
    for where, function in _public_functions():
        for text in map(str, getattr(function, "__annotations__", {}).values()):
            for named in re.findall(r"\b[A-Z][A-Za-z]+\b", text):
                if named not in STANDARD | VOCABULARIES and named not in PUBLIC:
                    missing.setdefault(named, []).append(where)
    assert missing == {}
    assert ("Executor.call", Executor.call) in _public_functions()  # the case that was missing: CallControl


def test_the_aliases_are_gone() -> None:
    import toolexec.runtimes as runtimes

    assert not hasattr(toolexec, "Cancellation") and not hasattr(runtimes, "Cancellation")
    assert inspect.signature(Executor.call).parameters["cancel"].annotation == "CallControl | None"
    assert not hasattr(Executor, "definitions") and not hasattr(Toolkit, "definitions")


def test_declarations_are_a_list_that_also_says_its_format_and_notes(project) -> None:  # type: ignore[no-untyped-def]
    import json

    project.tool("bad-name.py", 'def run(x: int) -> int:\n    """Double."""\n    return 2 * x\n')
    declared = project.executor().declarations(format="openai")
    assert isinstance(declared, list) and json.loads(json.dumps(declared)) == list(declared)
    assert [d["function"]["name"] for d in declared] == ["bad_name"]
    assert (declared.format, declared.notes) == ("openai", [])


@pytest.mark.parametrize("record", ["ToolCall", "ToolResult", "ToolDeclaration", "Annotations", "Problem"])
def test_the_records_signatures_show_their_fields(record: str) -> None:
    parameters = inspect.signature(getattr(toolexec, record)).parameters
    assert parameters and all(p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters.values())
    assert "args" not in parameters and "kwargs" not in parameters
