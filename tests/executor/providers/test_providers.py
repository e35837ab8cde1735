"""Providers' shapes: tool calls parsed into records, results rendered back, and `toolexec call` end to end."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Project, toolexec
from toolexec.errors import BadRequest
from toolexec.providers import Batch, parse_batch, refusal, render
from toolexec.records import ToolCall, ToolResult

ACCEPTED = (
    "expected tool calls in one of these shapes: "
    "anthropic: a list of content blocks holding tool_use blocks, or a message (or response) whose content holds them; "
    "responses: a list of output items holding function_call items, or a response whose 'output' holds them; "
    "gemini: a list of parts holding functionCall parts, a content with 'parts', a response with 'candidates', "
    "or the SDK's function_calls list; "
    "openai: a list of tool_calls, {'tool_calls': [...]}, an assistant message carrying them, or a response with 'choices'"
)

ADD = 'def run(a: int, b: int = 1) -> int:\n    """Add."""\n    return a + b\n'
BARRIER = '''
import os, time

def run(n: int, of: int) -> str:
    """Arrive at a barrier in the cache dir and wait until all have arrived (or give up)."""
    cache = os.environ["LLM_TOOL_CACHE_DIR"]
    open(os.path.join(cache, f"arrived-{n}"), "w").close()
    deadline = time.monotonic() + 20
    while len([f for f in os.listdir(cache) if f.startswith("arrived-")]) < of:
        if time.monotonic() > deadline:
            return f"{n}: alone"
        time.sleep(0.01)
    return f"{n}: together"
'''


def openai_call(call_id: str, name: str, arguments: object) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_openai_batch_in_order_with_one_bad_call(project: Project) -> None:
    project.tool("add.py", ADD)
    batch = [
        openai_call("c1", "add", '{"a": 1, "b": 2}'),
        openai_call("c2", "add", {"a": 40}),
        openai_call("c3", "ad", "{}"),
        openai_call("c4", "add", '{"a": "x"}'),
        openai_call("c5", "add", "{oops"),
    ]
    done = toolexec("--config", str(project.configure()), "call", input=json.dumps({"role": "assistant", "tool_calls": batch}))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "tool", "tool_call_id": "c2", "content": "41"},
        {"role": "tool", "tool_call_id": "c3", "content": "unknown tool 'ad'; did you mean 'add'?"},
        {
            "role": "tool",
            "tool_call_id": "c4",
            "content": "invalid arguments for tool 'add':\n- parameter 'a': expected an integer, got a string \"x\"",
        },
        {
            "role": "tool",
            "tool_call_id": "c5",
            "content": "arguments for tool 'add' are not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        },
    ]


def test_anthropic_blocks_and_message(project: Project) -> None:
    project.tool("add.py", ADD)
    project.tool("fail.py", 'def run():\n    """Fail."""\n    raise RuntimeError("nope")\n')
    config = str(project.configure())
    blocks = [
        {"type": "text", "text": "Let me add."},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2}},
        {"type": "tool_use", "id": "toolu_2", "name": "fail", "input": {}},
    ]
    as_list = json.loads(toolexec("--config", config, "call", input=json.dumps(blocks)).stdout)
    expected = [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_2",
            "content": "Tool call 'fail' exited with code 1: RuntimeError: nope",
            "is_error": True,
        },
    ]
    assert as_list == expected
    as_message = json.loads(
        toolexec("--config", config, "call", input=json.dumps({"role": "assistant", "content": blocks})).stdout
    )
    assert as_message == {"role": "user", "content": expected}


def test_calls_run_concurrently_up_to_max_parallel(project: Project) -> None:
    project.tool("barrier.py", BARRIER)
    batch = [openai_call(f"c{n}", "barrier", {"n": n, "of": 3}) for n in range(3)]
    done = toolexec("--config", str(project.configure(max_parallel=3)), "call", input=json.dumps(batch))
    assert [m["content"] for m in json.loads(done.stdout)] == ["0: together", "1: together", "2: together"]


def test_malformed_batch_is_refused(project: Project) -> None:
    project.tool("add.py", ADD)
    config = str(project.configure())
    bad_json = toolexec("--config", config, "call", input="[{")
    assert (bad_json.returncode, bad_json.stdout) == (2, "")
    assert bad_json.stderr.startswith("toolexec: the batch on stdin is not valid JSON: ")
    empty = toolexec("--config", config, "call", input="\n")
    assert (empty.returncode, empty.stdout, empty.stderr) == (
        2,
        "",
        "toolexec: the batch on stdin is empty: expected a model's tool calls as JSON (OpenAI, Responses API, Anthropic, Gemini)\n",
    )
    wrong_shape = toolexec("--config", config, "call", input='{"calls": 1}')
    assert (wrong_shape.returncode, wrong_shape.stderr) == (
        2,
        f"toolexec: {ACCEPTED}\n",
    )
    not_a_message = toolexec("--config", config, "call", input='{"role": "assistant", "content": "hi"}')
    assert (not_a_message.returncode, not_a_message.stderr) == (
        2,
        f"toolexec: {ACCEPTED}\n",
    )


OPENAI_SHAPE = "expected {'id': …, 'type': 'function', 'function': {'name': …, 'arguments': …}}"


def test_a_malformed_call_is_refused_in_its_place_and_the_others_run(project: Project) -> None:
    project.tool("add.py", ADD)
    config = str(project.configure())
    batch = [openai_call("c1", "add", {"a": 1}), {"id": "x"}, "junk", openai_call("c4", "add", {"a": 2})]
    done = toolexec("--config", config, "call", input=json.dumps(batch))
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == [
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
        {"role": "tool", "tool_call_id": "x", "content": f"tool call 1: {OPENAI_SHAPE}"},
        {"role": "tool", "tool_call_id": "call_2", "content": f"tool call 2: {OPENAI_SHAPE}"},
        {"role": "tool", "tool_call_id": "c4", "content": "3"},
    ]
    blocks = [
        {"type": "tool_use", "id": "toolu_a", "input": {"a": 1}},
        {"type": "tool_use", "id": "toolu_b", "name": "add", "input": {"a": 5}},
    ]
    done = toolexec("--config", config, "call", input=json.dumps({"role": "assistant", "content": blocks}))
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_a", "content": "tool_use block 0: expected a 'name'", "is_error": True},
            {"type": "tool_result", "tool_use_id": "toolu_b", "content": "6", "is_error": False},
        ],
    }


CALLS = [openai_call("c1", "add", '{"a": 1}'), {"type": "function", "function": {"name": "add", "arguments": {"a": 2}}}]
PARSED = (
    ToolCall(name="add", arguments='{"a": 1}', call_id="c1"),
    ToolCall(name="add", arguments={"a": 2}, call_id="call_1"),
)


@pytest.mark.parametrize(
    ("data", "as_message"),
    [(CALLS, False), ({"tool_calls": CALLS}, True), ({"role": "assistant", "content": None, "tool_calls": CALLS}, True)],
    ids=["list", "tool_calls", "assistant-message"],
)
def test_openai_shapes_parse_to_calls(data: Any, as_message: bool) -> None:
    assert parse_batch(data) == Batch("openai", PARSED, as_message=as_message)
    assert parse_batch(data, "openai") == parse_batch(data)


BLOCKS = [
    {"type": "thinking", "thinking": "…"},
    {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
    {"type": "text", "text": "and"},
    {"type": "tool_use", "name": "add", "input": {"a": 2}},
]


def test_anthropic_shapes_parse_to_calls_ignoring_other_blocks() -> None:
    calls = (
        ToolCall(name="add", arguments={"a": 1}, call_id="toolu_1"),
        ToolCall(name="add", arguments={"a": 2}, call_id="toolu_3"),
    )
    assert parse_batch(BLOCKS) == Batch("anthropic", calls, as_message=False)
    assert parse_batch({"role": "assistant", "content": BLOCKS}) == Batch("anthropic", calls, as_message=True)
    assert parse_batch({"role": "assistant", "content": [{"type": "text", "text": "no calls"}]}) == Batch(
        "anthropic", (), as_message=True
    )


def test_malformed_items_become_refusals_in_place() -> None:
    batch = parse_batch([{"id": "a", "function": {"name": 3}}, openai_call("b", "add", "{}"), None])
    assert batch.entries == (
        refusal("a", "", f"tool call 0: {OPENAI_SHAPE}"),
        ToolCall(name="add", arguments="{}", call_id="b"),
        refusal("call_2", "", f"tool call 2: {OPENAI_SHAPE}"),
    )
    assert batch.calls == [ToolCall(name="add", arguments="{}", call_id="b")]
    assert refusal("a", "", "boom").to_dict() == {
        "ok": False,
        "status": "refused",
        "output": "",
        "error": "boom",
        "exit_code": 2,
        "stderr": "",
        "duration_ms": 0.0,
        "tool_call_id": "a",
        "tool_name": "",
        "signal": None,
        "tool_call_error": "Tool call '' failed: boom",
        "notes": [],
        "output_file": None,
        "stderr_file": None,
        "reason": "bad_request",
    }


def result(call_id: str, output: str, error: str | None = None) -> ToolResult:
    return ToolResult(
        ok=error is None,
        status="ok" if error is None else "error",
        output=output,
        error=error,
        exit_code=0 if error is None else 1,
        stderr="",
        duration_ms=1.0,
        tool_call_id=call_id,
        tool_name="add",
    )


def test_complete_and_render_keep_input_order() -> None:
    batch = parse_batch([openai_call("a", "add", "{}"), {"id": "b"}, openai_call("c", "add", "{}")])
    results = batch.complete([result("a", "1"), result("c", "partial", error="Tool call 'add' exited with code 1")])
    assert render(batch, results) == [
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": f"tool call 1: {OPENAI_SHAPE}"},
        {"role": "tool", "tool_call_id": "c", "content": "Tool call 'add' exited with code 1\npartial"},
    ]
    with pytest.raises(ValueError, match="got 1 results for 2 calls"):
        batch.complete([result("a", "1")])
    blocks = parse_batch(BLOCKS)
    assert render(blocks, [result("toolu_1", "2"), result("toolu_3", "", error="nope")]) == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "2", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_3", "content": "nope", "is_error": True},
    ]


@pytest.mark.parametrize(
    ("data", "provider", "message"),
    [
        ({"calls": 1}, None, ACCEPTED),
        ("text", None, ACCEPTED),
        ([], "bard", "unknown provider 'bard'; known providers: anthropic, gemini, openai, responses"),
        (
            {"calls": 1},
            "openai",
            "expected tool calls in openai's shape: a list of tool_calls, {'tool_calls': [...]}, "
            "an assistant message carrying them, or a response with 'choices'",
        ),
        (
            [{"type": "function_call"}],
            "anthropic",
            "expected tool calls in anthropic's shape: a list of content blocks holding tool_use blocks, "
            "or a message (or response) whose content holds them",
        ),
    ],
)
def test_what_is_no_batch_is_refused_as_a_whole(data: Any, provider: str | None, message: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_batch(data, provider)
    assert str(refused.value) == message


def test_an_empty_batch_answers_with_nothing(project: Project) -> None:
    project.tool("add.py", ADD)
    for empty in ("[]", "null"):
        done = toolexec("--config", str(project.configure()), "call", input=empty)
        assert (done.returncode, done.stdout, done.stderr) == (
            0,
            "[]\n",
            "toolexec: note: the input holds no tool calls; nothing ran\n",
        )
