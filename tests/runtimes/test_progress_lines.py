"""A tool's progress lines read as hostile input: each line is one whole event or nothing, never an exception.

(The same lines end to end, through a real tool, the Python API and MCP: tests/executor/test_hostile_mcp.py.)
"""

from __future__ import annotations

from typing import Any

import pytest

from toolexec.runtimes.progress import LINE_LIMIT, MESSAGE_LIMIT, parse_progress


@pytest.mark.parametrize(
    ("line", "event"),
    [
        (b'{"progress": 3}', {"progress": 3}),
        (b'{"progress": 0.5, "total": 1, "message": "half"}', {"progress": 0.5, "total": 1, "message": "half"}),
        (b'{"progress": 2, "total": null, "message": 7}', {"progress": 2}),
        (b'{"progress": 2, "total": "ten"}', {"progress": 2}),
        (b'{"progress": 2, "total": 1e999}', None),  # an overflowing number makes the line no JSON
        (b'{"progress": 1, "message": "\\udbff\\udfff \\udfff"}', {"progress": 1, "message": "\U0010ffff \ufffd"}),
        (b'{"progress": 1, "message": "na\xefve \xf0\x9f\x98"}', {"progress": 1, "message": "na\ufffdve \ufffd"}),
        (b'{"progress": 1, "message": "' + b"m" * 5000 + b'"}', {"progress": 1, "message": "m" * MESSAGE_LIMIT}),
        (b'{"progress": 1, "detail": ' + b"{" * 17 + b"}" * 17 + b"}", None),
        (b'{"progress": 1, "message": "' + b"[" * 500 + b'"}', {"progress": 1, "message": "[" * 500}),
        (b"[" * 100_000, None),
        (b'{"progress": 1' + b" " * LINE_LIMIT + b"}", None),
        (b'{"progress": -Infinity}', None),
        (b'{"progress": NaN, "total": 3}', None),
        (b'{"progress": 1, "total": NaN}', None),
        (b'{"progress": ' + b"1" * 4400 + b"}", None),
        (b'{"progress": 1' + b"0" * 400 + b"}", None),  # an integer no float can hold
        (b'{"progress": false}', None),
        (b'{"progress": "3"}', None),
        (b"[3]", None),
        (b"3", None),
        (b"", None),
        (b"\xff\xfe", None),
    ],
    ids=lambda value: value[:24].decode("latin-1") if isinstance(value, bytes) else None,
)
def test_one_line_is_one_whole_event_or_none(line: bytes, event: dict[str, Any] | None) -> None:
    assert parse_progress(line) == event
