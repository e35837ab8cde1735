"""Hostile batches (issue 10): one malformed item of a ``toolexec call`` batch fails that item only.

Each row is one model answer holding good calls around malformed ones (a call id with NUL or a
lone surrogate, a non-object item, arguments that are not an object, a call without a name);
the whole answer is asserted exactly, in the provider's shape. After every row: no process,
descriptor or temporary file of the calls is left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project, cli
from tests.helpers import marked_processes

TOOL = 'def run(x: str = "") -> str:\n    """Echo."""\n    return "fine " + x\n'
BAD_ID = "a call id may not contain control characters or lone surrogates, got {!r}"


def openai_call(call_id: Any, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "ok", "arguments": arguments}}


def openai_result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def anthropic_result(call_id: str, content: str, error: bool) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": error}


OPENAI_SHAPE = "tool call {}: expected {{'id': …, 'type': 'function', 'function': {{'name': …, 'arguments': …}}}}"

ROWS: list[tuple[str, str, Any, Any]] = [
    (
        "openai-nul-id",
        "openai",
        [openai_call("a"), openai_call("b\0c"), openai_call("d", '{"x": "y"}')],
        [openai_result("a", "fine "), openai_result("b\0c", BAD_ID.format("b\0c")), openai_result("d", "fine y")],
    ),
    (
        "openai-lone-surrogate-id",
        "openai",
        [openai_call("a\ud800"), openai_call("b")],
        [openai_result("a\ud800", BAD_ID.format("a\ud800")), openai_result("b", "fine ")],
    ),
    (
        "openai-non-object-item",
        "openai",
        [openai_call("a"), 5, "text", None, openai_call("b")],
        [
            openai_result("a", "fine "),
            openai_result("call_1", OPENAI_SHAPE.format(1)),
            openai_result("call_2", OPENAI_SHAPE.format(2)),
            openai_result("call_3", OPENAI_SHAPE.format(3)),
            openai_result("b", "fine "),
        ],
    ),
    (
        "openai-bad-arguments-and-no-function",
        "openai",
        [openai_call("a", "{bad"), {"id": "f", "type": "function"}, openai_call(7)],
        [
            openai_result(
                "a",
                "arguments for tool 'ok' are not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
            ),
            openai_result("f", OPENAI_SHAPE.format(1)),
            openai_result("7", "fine "),
        ],
    ),
    (
        "anthropic-bad-ids-and-blocks",
        "anthropic",
        {
            "content": [
                {"type": "tool_use", "id": "a", "name": "ok", "input": {}},
                {"type": "tool_use", "id": "b\0", "name": "ok", "input": {}},
                {"type": "tool_use", "id": "c\udc00", "name": "ok", "input": {}},
                7,
                {"type": "tool_use", "id": "d", "name": "ok", "input": 5},
                {"type": "tool_use", "id": "e"},
            ]
        },
        {
            "role": "user",
            "content": [
                anthropic_result("a", "fine ", False),
                anthropic_result("b\0", BAD_ID.format("b\0"), True),
                anthropic_result("c\udc00", BAD_ID.format("c\udc00"), True),
                anthropic_result(
                    "d", "arguments for tool 'ok' must be a JSON object of parameter names to values, got an integer 5", True
                ),
                anthropic_result("e", "tool_use block 5: expected a 'name'", True),
            ],
        },
    ),
    (
        "responses-bad-ids-and-items",
        "responses",
        [
            {"type": "function_call", "call_id": "a", "name": "ok", "arguments": "{}"},
            {"type": "function_call", "call_id": "b\0", "name": "ok", "arguments": "{}"},
            "x",
            {"type": "function_call", "call_id": "c\ud800", "name": "ok", "arguments": "{}"},
        ],
        [
            {"type": "function_call_output", "call_id": "a", "output": "fine "},
            {"type": "function_call_output", "call_id": "b\0", "output": BAD_ID.format("b\0")},
            {"type": "function_call_output", "call_id": "c\ud800", "output": BAD_ID.format("c\ud800")},
        ],
    ),
    (
        "gemini-bad-ids-and-parts",
        "gemini",
        {
            "candidates": [
                {
                    "content": {
                        "parts": [
                            {"functionCall": {"name": "ok", "args": {}}},
                            5,
                            {"functionCall": {"name": "ok", "args": []}},
                            {"functionCall": {"id": "x\0", "name": "ok", "args": {}}},
                        ]
                    }
                }
            ]
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "ok", "response": {"output": "fine "}}},
                {
                    "functionResponse": {
                        "name": "ok",
                        "response": {
                            "error": "arguments for tool 'ok' must be a JSON object of parameter names to values, got an array []"
                        },
                    }
                },
                {"functionResponse": {"name": "ok", "id": "x\0", "response": {"error": BAD_ID.format("x\0")}}},
            ],
        },
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r[0])
def test_one_bad_item_fails_alone(row: tuple[str, str, Any, Any], project: Project, private_tmpdir: Path) -> None:
    _, format, batch, expected = row
    project.tool("ok.py", TOOL)
    executor = project.executor(["ok.py"])
    executor.build()
    descriptors = sorted(os.listdir("/proc/self/fd"))
    assert executor.answer(batch, format) == expected
    executor.close()  # (an open executor keeps a sandbox set up ahead for a tool it called twice: runtimes/sandbox_spare.py)
    assert marked_processes(private_tmpdir) == []
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert os.listdir(private_tmpdir) == []


def test_cli_batch_with_nul_and_surrogate_ids(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    """Through ``toolexec call``: exit 0, every item answered, the ids echoed back as JSON escapes."""
    project.tool("ok.py", TOOL)
    project.configure(["ok.py"])
    batch = json.dumps([openai_call("a"), openai_call("b\0"), openai_call("c\ud800"), 5])
    status, out, _ = cli(capsys, "--config", str(project.config), "call", input=batch)
    assert status == 0
    assert json.loads(out) == [
        openai_result("a", "fine "),
        openai_result("b\0", BAD_ID.format("b\0")),
        openai_result("c\ud800", BAD_ID.format("c\ud800")),
        openai_result("call_3", OPENAI_SHAPE.format(3)),
    ]


def anthropic_call(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "ok", "input": {}}


MIXED = "the input mixes tool calls of 2 providers' shapes ({}): one provider's reading would leave the others unanswered; send each provider's calls separately"


@pytest.mark.parametrize(
    ("batch", "format", "where"),
    [
        ([anthropic_call("t1"), openai_call("c1")], None, "anthropic at [0]; openai at [1]"),
        (
            [openai_call("c1"), {"type": "function_call", "call_id": "r1", "name": "ok", "arguments": "{}"}],
            "openai",
            "openai at [0]; responses at [1]",
        ),
        (
            [{"functionCall": {"name": "ok", "args": {}}}, anthropic_call("t1"), anthropic_call("t2"), {"type": "text"}],
            "gemini",
            "gemini at [0]; anthropic at [1], [2]",
        ),
        (
            {"role": "assistant", "tool_calls": [openai_call("c1")], "content": [{"type": "text"}, anthropic_call("t1")]},
            None,
            "openai at tool_calls[0]; anthropic at content[1]",
        ),
        (
            {"choices": [{"message": {"tool_calls": [openai_call("c1")]}}], "output": [{"type": "function_call", "name": "ok"}]},
            None,
            "responses at output[0]; openai at choices[0].message.tool_calls[0]",
        ),
    ],
    ids=["bare-list", "openai-named", "gemini-named", "openai-message", "response"],
)
def test_calls_of_several_providers_in_one_input_are_refused_not_dropped(
    batch: Any, format: str | None, where: str, project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read as one provider's batch, the others' calls would get no answer: refuse the input as a whole (exit 2)."""
    project.tool("ok.py", TOOL)
    project.configure(["ok.py"])
    status, out, err = cli(
        capsys, "--config", str(project.config), "call", *(["--format", format] if format else []), input=json.dumps(batch)
    )
    assert (status, out, err) == (2, "", f"toolexec: {MIXED.format(where)}\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 1000 + "]" * 1000, "the batch on stdin is nested more than 108 levels deep: no tool call's arguments can be"),
        (
            '{"tool_calls": [{"function": {"name": "ok", "arguments": ' + "{" * 150 + "}" * 150 + "}}]}",
            "the batch on stdin is nested more than 108 levels deep: no tool call's arguments can be",
        ),
        ('[{"id": ' + "7" * 4400 + "}]", "the batch on stdin is not valid JSON: an integer of more than 4300 digits"),
        ('[{"id": "a"}', "the batch on stdin is not valid JSON: Expecting ',' delimiter at line 1 column 13"),
    ],
    ids=["deep-list", "deep-arguments", "long-integer", "truncated"],
)
def test_a_batch_text_no_model_could_send_is_refused_with_a_message(
    text: str, message: str, project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.tool("ok.py", TOOL)
    project.configure(["ok.py"])
    assert cli(capsys, "--config", str(project.config), "call", input=text) == (2, "", f"toolexec: {message}\n")
