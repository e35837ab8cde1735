"""A tool's progress lines, read as hostile input.

A tool appends lines such as ``{"progress": 3, "total": 10, "message": "3 of 10 files"}`` to the
pipe named by ``LLM_PROGRESS``. Each line becomes at most one event, and only one that any JSON
writer downstream (the MCP server's protocol stream, a Python caller's callback) can send as is:

* a line is at most :data:`LINE_LIMIT` bytes, and strict JSON (:mod:`toolexec.strictjson`) at most
  :data:`MAX_DEPTH` brackets deep, checked before parsing (a line of 30,000 ``[`` never reaches the recursive
  parser); a key given twice makes it no report;
* bytes that are not UTF-8 become U+FFFD, as do lone surrogates written as ``\\ud800`` escapes;
* ``progress`` and ``total`` are finite numbers (no ``NaN``, ``Infinity`` or ``1e400``; an integer
  too long for Python to read is no number);
* ``message`` is text, at most :data:`MESSAGE_LIMIT` characters.

Anything else is skipped: a tool's progress can never fail a call.
"""

from __future__ import annotations

import math
import re

from toolexec import strictjson

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

LINE_LIMIT = 1 << 16
MAX_DEPTH = 16  # a progress report is one flat object: anything deeper is not one
MESSAGE_LIMIT = 1000
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_progress(line: bytes) -> dict[str, Any] | None:
    """The event data of one progress line (``progress``, and ``total``/``message`` when given), or None."""
    if len(line) > LINE_LIMIT:
        return None
    try:
        report = strictjson.loads(line.decode("utf-8", "replace"), MAX_DEPTH)
    except strictjson.NotJSON:
        return None
    if not isinstance(report, dict):
        return None
    progress = _number(report.get("progress"))
    if progress is None:
        return None
    event: dict[str, Any] = {"progress": progress}
    total = _number(report.get("total"))
    if total is not None:
        event["total"] = total
    message = report.get("message")
    if isinstance(message, str):
        event["message"] = _SURROGATE.sub("\ufffd", message[:MESSAGE_LIMIT])
    return event


def _number(value: Any) -> int | float | None:
    """``value`` when it is a finite JSON number (an integer a float can hold), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return value if math.isfinite(float(value)) else None
    except OverflowError:
        return None
