"""A demonstration tool: every parameter type toolexec understands, echoed back with the LLM_* environment."""

import json
import os
from typing import Literal


def run(
    text: str,
    count: int = 1,
    ratio: float = 0.5,
    loud: bool = False,
    tags: list[str] = [],
    scores: dict[str, float] = {},
    mood: Literal["calm", "busy", "sleepy"] = "calm",
    note: str | None = None,
) -> dict:
    """Echo the arguments back, together with the LLM_* variables the tool was given.

    Use it to see how toolexec passes each kind of value to a Python tool.

    Args:
        text: Any text; it is repeated `count` times.
        count: How many times to repeat the text.
        ratio: A number between 0 and 1, echoed as is.
        loud: Shout the text in capitals.
        tags: A list of labels.
        scores: A mapping from names to numbers.
        mood: One of a fixed set of moods.
        note: An optional remark; left out when not given.

    Title: Python demonstration
    Tags: demo
    Read-only: true
    Open-world: false
    Examples:
        {"text": "hello", "count": 2}
        {"text": "hi", "loud": true, "mood": "busy", "scores": {"a": 1.5}}
    """
    said = " ".join([text.upper() if loud else text] * count)
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("LLM_")}
    return {
        "said": said,
        "ratio": ratio,
        "tags": tags,
        "scores": scores,
        "mood": mood,
        "note": note,
        "env": json.loads(json.dumps(env)),
    }
