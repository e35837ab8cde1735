"""The records' class maker: what ``@dataclass(frozen=True)`` gave, without its start-up cost.

Every record of the public API (``ToolDeclaration``, ``ToolResult``, ``Config``…) is made with
it, so these are the guarantees callers relied on when they were dataclasses, including that
the ``dataclasses`` functions still accept them.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys

import pytest

from toolexec.config import McpSettings
from toolexec.records import Annotations, Kwargs, Limits, Metadata, ToolDeclaration, ToolResult
from toolexec.recordtype import FrozenInstanceError, asdict, field, field_names, record, replace


@record
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", compare=False)


@record(kw_only=False)
class Pair:
    left: str
    right: str = "r"


@record
class Labelled(Point):
    label: str = "p"


def declaration(**changes: object) -> ToolDeclaration:
    values: dict[str, object] = {
        "name": "t",
        "description": "d",
        "parameters": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}},
        "source": "/x/t.py",
        "language": "python",
        "invocation": Kwargs(),
    }
    return ToolDeclaration(**{**values, **changes})  # type: ignore[arg-type]


def test_init_fills_defaults_and_makes_a_fresh_default_per_record() -> None:
    one, two = Point(x=1), Point(x=2, y=3, tags=["a"], note="n")
    assert (one.x, one.y, one.tags, one.note) == (1, 0, [], "")
    assert (two.x, two.y, two.tags, two.note) == (2, 3, ["a"], "n")
    assert Point(x=1).tags is not one.tags
    assert field_names(Point) == ("x", "y", "tags", "note") == field_names(one)
    assert field_names(Labelled) == ("x", "y", "tags", "note", "label")
    assert Labelled(x=1).label == "p"
    assert Pair("a") == Pair(left="a", right="r")
    assert Pair("a", "b").right == "b"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Point(1), "Point() takes keyword arguments only; got 1 positional"),
        (lambda: Point(), "Point() missing required argument 'x'"),
        (lambda: Point(x=1, z=2), "Point() got an unexpected keyword argument 'z'"),
        (lambda: Pair("a", "b", "c"), "Pair() takes at most 2 positional arguments; got 3"),
        (lambda: Pair("a", left="b"), "Pair() got multiple values for argument 'left'"),
    ],
)
def test_a_wrong_construction_is_a_type_error_naming_the_field(make: object, message: str) -> None:
    with pytest.raises(TypeError) as raised:
        make()  # type: ignore[operator]
    assert str(raised.value) == message


def test_equality_hash_and_repr_follow_the_fields() -> None:
    assert Point(x=1, note="a") == Point(x=1, note="b")  # compare=False
    assert Point(x=1) != Point(x=2)
    assert Point(x=1) != Labelled(x=1)  # another class is never equal
    assert hash(Pair("a")) == hash(Pair("a"))
    assert len({Limits(timeout=1.0), Limits(timeout=1.0), Limits()}) == 2
    assert repr(Pair("a")) == "Pair(left='a', right='r')"
    assert repr(Point(x=1)) == "Point(x=1, y=0, tags=[], note='')"
    with pytest.raises(TypeError):
        hash(Point(x=1))  # a list inside: unhashable, as a frozen dataclass with a list is


def test_records_cannot_be_changed_after_they_are_made() -> None:
    point = Point(x=1)
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError, match="cannot delete field 'x'"):
        del point.x  # type: ignore[misc]
    with pytest.raises(AttributeError):
        point.other = 1  # type: ignore[attr-defined]
    assert point == Point(x=1)


def test_replace_and_asdict_work_through_nested_records() -> None:
    tool = declaration(metadata=Metadata(tags=("a",), annotations=Annotations(read_only=True)))
    changed = replace(tool, name="u")
    assert (changed.name, changed.metadata, tool.name) == ("u", tool.metadata, "t")
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        replace(tool, nope=1)
    data = asdict(tool)
    assert data["metadata"]["annotations"] == {"read_only": True, "destructive": None, "idempotent": None, "open_world": None}
    assert data["metadata"]["tags"] == ("a",)
    assert list(data["parameters"]["properties"]) == ["b", "a"]  # declaration order kept
    data["parameters"]["properties"].clear()
    assert tool.parameters["properties"]  # a copy, as dataclasses.asdict gives
    assert ToolDeclaration.from_dict(tool.to_dict()) == tool
    with pytest.raises(TypeError, match="asdict\\(\\) needs a record, not dict"):
        asdict({})


def test_the_dataclasses_functions_still_accept_the_public_records() -> None:
    tool = declaration()
    assert dataclasses.is_dataclass(tool) and dataclasses.is_dataclass(ToolDeclaration)
    assert [f.name for f in dataclasses.fields(tool)] == list(field_names(tool))
    assert dataclasses.replace(tool, name="u") == replace(tool, name="u")
    assert dataclasses.asdict(tool) == asdict(tool)
    assert dataclasses.replace(McpSettings(), page_size=5).page_size == 5
    assert dataclasses.replace(Pair("a"), right="z") == Pair("a", "z")
    result = ToolResult(
        ok=True, status="ok", output="x", error=None, exit_code=0, stderr="", duration_ms=1.0, tool_call_id="c", tool_name="t"
    )
    assert dataclasses.astuple(result)[:3] == (True, "ok", "x")


@record(kw_only=False, frozen=False)
class Counter:
    limit: int
    seen: list[int] = field(default_factory=list)


def test_a_changeable_record_can_be_changed_and_is_not_hashable() -> None:
    counter = Counter(3)
    counter.limit = 4
    counter.seen.append(1)
    assert counter == Counter(4, [1])
    with pytest.raises(TypeError, match="unhashable type: 'Counter'"):
        hash(counter)


def test_records_survive_copy_and_pickle() -> None:
    tool = declaration(metadata=Metadata(title="T"))
    assert copy.deepcopy(tool) == tool and copy.copy(tool) == tool
    assert pickle.loads(pickle.dumps(tool)) == tool
    assert pickle.loads(pickle.dumps(Pair("a"))) == Pair("a")


def test_making_records_imports_neither_dataclasses_nor_typing() -> None:
    code = "import sys, toolexec.records, toolexec.config; print(sorted({'dataclasses', 'typing', 'inspect'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


def test_a_record_shows_its_fields_to_inspect_and_help() -> None:
    import inspect
    import pydoc

    from toolexec import ToolCall, ToolResult
    from toolexec.recordtype import field, record

    assert str(inspect.signature(ToolCall)) == (
        "(*, name: 'str', arguments: 'Any', call_id: 'str | None' = None, timeout: 'float | None' = None, "
        "scopes: 'frozenset[str] | None' = None, "
        "input_responses: 'dict[str, InputResponse] | None' = None) -> None"
    )
    assert "ToolResult(*, ok: 'bool', status: 'Status', output: 'str'," in pydoc.render_doc(ToolResult, renderer=pydoc.plaintext)

    @record(kw_only=False)
    class Pair:
        left: int
        right: list[int] = field(default_factory=list)

    assert str(inspect.signature(Pair)) == "(left: 'int', right: 'list[int]' = <factory>) -> None"
    assert inspect.signature(Pair).bind(1, [2]).arguments == {"left": 1, "right": [2]}


def test_defining_a_record_imports_nothing() -> None:
    import subprocess
    import sys

    code = "import sys; import toolexec.records; print(sorted({'inspect', 'dataclasses', 'typing'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
