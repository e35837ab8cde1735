"""The one reader of JSON that comes from outside: a model's arguments, a batch of calls, a tool's structured
output and its progress lines. All of it is hostile input, so it is read as JSON and nothing more:

* no ``NaN``, ``Infinity`` or ``-Infinity`` (Python's ``json`` reads them; no other JSON reader does);
* no number that overflows to infinity (``1e400``), no integer longer than Python converts (``MAX_DIGITS``);
* no key twice in one object (readers disagree on which value wins: a hook or a log could see one, the tool
  the other);
* at most ``max_depth`` brackets deep, counted before the recursive parser sees the text.

Every refusal is a :class:`NotJSON` whose text says why, in one wording wherever it is read. A leaf module
(standard library only): both ``toolexec`` and ``toolexec.runtimes`` read with it.
"""

from __future__ import annotations

import json
import math

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

MAX_DIGITS = 4300  # Python's own bound on converting an integer to and from text


class NotJSON(ValueError):
    """Why a text is not strict JSON: ``NaN is not a JSON number``, ``nested more than 100 levels deep``, …"""


def loads(text: str, max_depth: int) -> Any:
    """The value of ``text``, strict JSON at most ``max_depth`` levels deep; :class:`NotJSON` saying why not."""
    if too_deep(text, max_depth):
        raise NotJSON(f"nested more than {max_depth} levels deep")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite, object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise NotJSON(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except NotJSON:
        raise
    except RecursionError:
        raise NotJSON(f"nested more than {max_depth} levels deep") from None
    except ValueError:  # an integer of more digits than Python converts
        raise NotJSON(f"an integer of more than {MAX_DIGITS} digits") from None


def too_deep(text: str, limit: int) -> bool:
    """Whether JSON text opens more than ``limit`` brackets at once (strings skipped), without parsing it."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _refuse_constant(name: str) -> Any:
    raise NotJSON(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotJSON(f"{text[:40]} is too large for a JSON number (it would be infinite)")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise NotJSON(f"the key {json.dumps(twice)[:60]} appears twice in one object")
    return value
