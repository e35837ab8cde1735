"""The one strict JSON reader: JSON and nothing a lenient reader lets through, each refusal in one wording
wherever the text came from (a model's arguments, a batch, a tool's structured output, its progress lines)."""

from __future__ import annotations

import pytest

from tests.conftest import Project
from toolexec.runtimes.progress import parse_progress
from toolexec.strictjson import NotJSON, loads, too_deep

REFUSED = {
    "nan": ('{"n": NaN}', "NaN is not a JSON number"),
    "infinity": ("[-Infinity]", "-Infinity is not a JSON number"),
    "overflow": ('{"n": 1e400}', "1e400 is too large for a JSON number (it would be infinite)"),
    "digits": ("9" * 5000, "an integer of more than 4300 digits"),
    "duplicate": ('{"path": "a", "path": "b"}', 'the key "path" appears twice in one object'),
    "nested-duplicate": ('{"a": [{"k\\u00e9": 1, "k\\u00e9": 2}]}', 'the key "k\\u00e9" appears twice in one object'),
    "deep": ("[" * 11 + "]" * 11, "nested more than 10 levels deep"),
    "malformed": ('{"a": }', "Expecting value at line 1 column 7"),
    "trailing": ("{} x", "Extra data at line 1 column 4"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_is_not_strict_json_is_refused_saying_why(case: str) -> None:
    text, reason = REFUSED[case]
    with pytest.raises(NotJSON) as refused:
        loads(text, 10)
    assert str(refused.value) == reason


def test_json_is_read_as_json() -> None:
    text = '{"a": [1, 2.5, -3e2, null, true, false, {}], "b": "\\ud83d\\ude00", "c": {"a": 1}}'
    assert loads(text, 10) == {"a": [1, 2.5, -300.0, None, True, False, {}], "b": "\U0001f600", "c": {"a": 1}}
    assert loads("[" * 10 + "]" * 10, 10) == [[[[[[[[[[]]]]]]]]]]


def test_depth_is_counted_outside_strings_only() -> None:
    assert too_deep('["' + "[" * 50 + '"]', 2) is False
    assert too_deep('[[["\\"[["]]]', 2) is True


def test_every_reader_refuses_a_key_given_twice(project: Project) -> None:
    project.tool("echo.py", 'def run(path: str) -> str:\n    """Echo."""\n    return path\n')
    result = project.executor().call("echo", '{"path": "/tmp/safe", "path": "/etc/shadow"}')
    assert (result.status, result.error) == (
        "refused",
        "arguments for tool 'echo' are not valid JSON: the key \"path\" appears twice in one object",
    )
    assert parse_progress(b'{"progress": 1, "progress": 2}') is None
    assert parse_progress(b'{"progress": 1, "total": 2}') == {"progress": 1, "total": 2}
