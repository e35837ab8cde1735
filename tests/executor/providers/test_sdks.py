"""Round trips with the providers' own SDK types: ``openai``, ``anthropic`` and ``google-genai``.

Each response is built as the SDK builds it from what the API sent (offline: the pydantic
models are constructed directly), then handed over every way a program would: the object
itself, each of the SDK's dumps (``model_dump()``, ``model_dump_json()``, ``to_json_dict()``),
and the SDK's own list of calls. ``Executor.answer`` and ``toolexec call`` must run every
call and answer in the provider's shape, which the SDK's own request types accept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic.types as anthropic_types
import pytest
from anthropic.types.user_message_param import UserMessageParam
from google.genai import types as genai
from openai.types.chat import ChatCompletion, ChatCompletionToolMessageParam
from openai.types.responses import Response
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter

from tests.conftest import Project, toolexec
from toolexec import Executor

ADD = 'def run(a: int, b: int = 1) -> int:\n    """Add two numbers."""\n    return a + b\n'


def chat_completion(*calls: tuple[str, str, dict[str, Any]]) -> ChatCompletion:
    tool_calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        for call_id, name, arguments in calls
    ]
    message = {"role": "assistant", "content": None if calls else "Nothing to do.", "tool_calls": tool_calls or None}
    choice = {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}
    return ChatCompletion.model_validate(
        {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test", "choices": [choice]}
    )


def response(*calls: tuple[str, str, dict[str, Any]]) -> Response:
    text = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []}
    items = [
        {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}
        for call_id, name, arguments in calls
    ]
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-test",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [{"type": "reasoning", "id": "rs_1", "summary": []}, text, *items],
        }
    )


def message(*calls: tuple[str, str, dict[str, Any]]) -> anthropic_types.Message:
    blocks: list[Any] = [anthropic_types.ThinkingBlock(type="thinking", thinking="…", signature="s")]
    blocks += [anthropic_types.TextBlock(type="text", text="Adding.")]
    blocks += [anthropic_types.ToolUseBlock(type="tool_use", id=i, name=n, input=a) for i, n, a in calls]
    return anthropic_types.Message(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-test",
        content=blocks,
        stop_reason="tool_use" if calls else "end_turn",
        stop_sequence=None,
        usage=anthropic_types.Usage(input_tokens=1, output_tokens=1),
    )


def generated(*calls: tuple[str, str, dict[str, Any]]) -> genai.GenerateContentResponse:
    parts = [genai.Part(text="Adding.")]
    parts += [genai.Part(function_call=genai.FunctionCall(id=i, name=n, args=a)) for i, n, a in calls]
    content = genai.Content(role="model", parts=parts)
    return genai.GenerateContentResponse(candidates=[genai.Candidate(content=content, finish_reason=genai.FinishReason.STOP)])


CALLS = (("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 40}), ("c3", "add", {"a": "x"}))
BAD = "invalid arguments for tool 'add':\n- parameter 'a': expected an integer, got a string \"x\""
ANSWERS: dict[str, Any] = {
    "openai": [
        {"role": "tool", "tool_call_id": "c1", "content": "3"},
        {"role": "tool", "tool_call_id": "c2", "content": "41"},
        {"role": "tool", "tool_call_id": "c3", "content": BAD},
    ],
    "responses": [
        {"type": "function_call_output", "call_id": "c1", "output": "3"},
        {"type": "function_call_output", "call_id": "c2", "output": "41"},
        {"type": "function_call_output", "call_id": "c3", "output": BAD},
    ],
    "anthropic": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "3", "is_error": False},
        {"type": "tool_result", "tool_use_id": "c2", "content": "41", "is_error": False},
        {"type": "tool_result", "tool_use_id": "c3", "content": BAD, "is_error": True},
    ],
    "gemini": [
        {"functionResponse": {"name": "add", "id": "c1", "response": {"output": "3"}}},
        {"functionResponse": {"name": "add", "id": "c2", "response": {"output": "41"}}},
        {"functionResponse": {"name": "add", "id": "c3", "response": {"error": BAD}}},
    ],
}


def _json(text: str) -> Any:
    return json.loads(text)


# (provider, how the program hands the response over, whether the answer is a whole message, the input)
Handed = Callable[[tuple[tuple[str, str, dict[str, Any]], ...]], Any]
WAYS: list[tuple[str, str, bool, Handed]] = [
    ("openai", "ChatCompletion", True, lambda c: chat_completion(*c)),
    ("openai", "ChatCompletion.model_dump()", True, lambda c: chat_completion(*c).model_dump()),
    ("openai", "ChatCompletion.model_dump_json()", True, lambda c: _json(chat_completion(*c).model_dump_json())),
    ("openai", "ChatCompletionMessage", True, lambda c: chat_completion(*c).choices[0].message),
    ("openai", "ChatCompletionMessage.model_dump()", True, lambda c: chat_completion(*c).choices[0].message.model_dump()),
    (
        "openai",
        "ChatCompletionMessage.model_dump_json()",
        True,
        lambda c: _json(chat_completion(*c).choices[0].message.model_dump_json()),
    ),
    ("openai", "ChatCompletion.to_dict()", True, lambda c: chat_completion(*c).to_dict()),
    ("openai", "ChatCompletion.to_json()", True, lambda c: _json(chat_completion(*c).to_json())),
    ("openai", "message.tool_calls", False, lambda c: chat_completion(*c).choices[0].message.tool_calls),
    ("responses", "Response", True, lambda c: response(*c)),
    ("responses", "Response.model_dump()", True, lambda c: response(*c).model_dump()),
    ("responses", "Response.model_dump_json()", True, lambda c: _json(response(*c).model_dump_json())),
    ("responses", "response.output", False, lambda c: response(*c).output),
    ("anthropic", "Message", True, lambda c: message(*c)),
    ("anthropic", "Message.model_dump()", True, lambda c: message(*c).model_dump()),
    ("anthropic", "Message.model_dump_json()", True, lambda c: _json(message(*c).model_dump_json())),
    ("anthropic", "Message.to_dict()", True, lambda c: message(*c).to_dict()),
    ("anthropic", "Message.to_json()", True, lambda c: _json(message(*c).to_json())),
    ("anthropic", "message.content", False, lambda c: message(*c).content),
    ("gemini", "GenerateContentResponse", True, lambda c: generated(*c)),
    ("gemini", "GenerateContentResponse.model_dump()", True, lambda c: generated(*c).model_dump(mode="json")),
    (
        "gemini",
        "GenerateContentResponse.model_dump(by_alias)",
        True,
        lambda c: generated(*c).model_dump(mode="json", by_alias=True),
    ),
    ("gemini", "GenerateContentResponse.model_dump_json()", True, lambda c: _json(generated(*c).model_dump_json())),
    (
        "gemini",
        "GenerateContentResponse.model_dump(exclude_none)",
        True,
        lambda c: generated(*c).model_dump(mode="json", exclude_none=True),
    ),
    ("gemini", "GenerateContentResponse.to_json_dict()", True, lambda c: generated(*c).to_json_dict()),
    ("gemini", "content.model_dump()", True, lambda c: generated(*c).candidates[0].content.model_dump(mode="json")),  # type: ignore[index, union-attr]
    ("gemini", "response.function_calls", False, lambda c: generated(*c).function_calls),
    (
        "gemini",
        "[f.model_dump() for f in function_calls]",
        False,
        lambda c: [f.model_dump() for f in generated(*c).function_calls or ()],
    ),
    (
        "gemini",
        "[f.to_json_dict() for f in function_calls]",
        False,
        lambda c: [f.to_json_dict() for f in generated(*c).function_calls or ()],
    ),
]


def as_message(provider: str, answer: list[dict[str, Any]]) -> Any:
    """The answer to a whole message or response, as toolexec gives it."""
    if provider == "anthropic":
        return {"role": "user", "content": answer}
    if provider == "gemini":
        return {"role": "user", "parts": answer}
    return answer  # OpenAI's tool messages and Responses' items go into the next request as they are


def conforms(kind: Any, value: dict[str, Any]) -> None:
    """``value`` is accepted by the SDK's TypedDict ``kind`` and holds no key it does not know."""
    TypeAdapter(kind).validate_python(value)
    assert kind.__required_keys__ <= value.keys() <= kind.__required_keys__ | kind.__optional_keys__


def accepted_by_the_sdk(provider: str, answer: Any) -> None:
    """The SDK's own request types take the answer as the next turn's input."""
    if provider == "gemini":
        parts = answer["parts"] if isinstance(answer, dict) else answer
        if isinstance(answer, dict):
            genai.Content.model_validate(answer)  # its models forbid unknown fields
        for part in parts:
            assert genai.Part.model_validate(part).function_response is not None
        return
    if provider == "anthropic":
        blocks = answer["content"] if isinstance(answer, dict) else answer
        if isinstance(answer, dict):
            conforms(UserMessageParam, answer)
        for block in blocks:
            conforms(anthropic_types.ToolResultBlockParam, block)
        return
    kind = ChatCompletionToolMessageParam if provider == "openai" else FunctionCallOutput
    for item in answer:
        conforms(kind, item)


@pytest.fixture
def executor(project: Project) -> Executor:
    project.tool("add.py", ADD)
    return Executor(project.configure())


@pytest.mark.parametrize(("provider", "way", "whole", "handed"), WAYS, ids=[w[1] for w in WAYS])
def test_the_sdks_objects_and_dumps_round_trip_through_answer(
    executor: Executor, provider: str, way: str, whole: bool, handed: Handed
) -> None:
    data = handed(CALLS)
    batch = executor.parse_calls(data)
    assert (batch.provider, [call.call_id for call in batch.calls]) == (provider, ["c1", "c2", "c3"])
    answer = executor.answer(data)
    expected = ANSWERS[provider]
    assert answer == (as_message(provider, expected) if whole else expected)
    accepted_by_the_sdk(provider, answer)
    assert executor.answer(data, provider) == answer  # named explicitly, the same


JSON_WAYS = [w for w in WAYS if any(way in w[1] for way in ("dump", "to_json", "to_dict"))]


@pytest.mark.parametrize(("provider", "way", "whole", "handed"), JSON_WAYS, ids=[w[1] for w in JSON_WAYS])
def test_the_sdks_dumps_round_trip_through_toolexec_call(
    project: Project, provider: str, way: str, whole: bool, handed: Handed
) -> None:
    project.tool("add.py", ADD)
    done = toolexec("--config", str(project.configure()), "call", input=json.dumps(handed(CALLS)))
    assert (done.returncode, done.stderr) == (0, "")
    answer = json.loads(done.stdout)
    assert answer == (as_message(provider, ANSWERS[provider]) if whole else ANSWERS[provider])
    accepted_by_the_sdk(provider, answer)


@pytest.mark.parametrize(("provider", "way", "whole", "handed"), WAYS, ids=[w[1] for w in WAYS])
def test_a_response_without_calls_answers_nothing(
    executor: Executor, provider: str, way: str, whole: bool, handed: Handed
) -> None:
    data = handed(())
    batch = executor.parse_calls(data)
    assert batch.entries == ()
    assert executor.answer(data) in ([], {"role": "user", "content": []}, {"role": "user", "parts": []})


NO_CALLS = {
    "openai": lambda: chat_completion().model_dump_json(),
    "openai message": lambda: chat_completion().choices[0].message.model_dump_json(),
    "responses": lambda: response().model_dump_json(),
    "anthropic": lambda: message().model_dump_json(),
    "gemini": lambda: generated().model_dump_json(),
    "gemini to_json_dict": lambda: json.dumps(generated().to_json_dict()),
    "gemini function_calls": lambda: json.dumps(generated().function_calls),
}


@pytest.mark.parametrize("shape", NO_CALLS)
def test_toolexec_call_says_when_the_input_holds_no_calls(project: Project, shape: str) -> None:
    project.tool("add.py", ADD)
    done = toolexec("--config", str(project.configure()), "call", input=NO_CALLS[shape]())
    provider = shape.split()[0]
    said = f" (read as {provider}'s shape)" if shape != "gemini function_calls" else ""
    assert (done.returncode, done.stderr) == (0, f"toolexec: note: the input holds no tool calls{said}; nothing ran\n")
    assert json.loads(done.stdout) in ([], {"role": "user", "content": []}, {"role": "user", "parts": []})


def test_a_null_function_call_is_no_call_and_an_empty_one_is_refused_in_its_place(executor: Executor) -> None:
    parts = [
        {"text": "Adding.", "functionCall": None, "function_call": None},
        {"functionCall": {"id": "c1", "name": "add", "args": {"a": 1}}},
        {"function_call": {"id": "c2", "args": {"a": 1}}},
    ]
    assert executor.answer(parts) == [
        {"functionResponse": {"name": "add", "id": "c1", "response": {"output": "2"}}},
        {
            "functionResponse": {
                "name": "",
                "id": "c2",
                "response": {"error": "functionCall part 2: expected {'name': …, 'args': {…}}"},
            }
        },
    ]


def test_function_calls_beside_parts_are_all_answered(executor: Executor) -> None:
    calls = generated(*CALLS[:2]).function_calls or []
    data = [calls[0].to_json_dict(), {"text": "and"}, {"functionCall": calls[1].to_json_dict()}, {"functionCall": {}}]
    assert executor.answer(data) == [
        *ANSWERS["gemini"][:2],
        {
            "functionResponse": {
                "name": "",
                "id": "gemini_3",
                "response": {"error": "functionCall part 3: expected {'name': …, 'args': {…}}"},
            }
        },
    ]


def test_files_of_a_result_in_every_format_the_sdks_accept(update_goldens: bool) -> None:
    """A result with an image, a PDF, a WAV file and a kept file, in every format: images (and PDFs) where the format
    carries them, a line naming each file it does not; every answer is taken by the SDK's own request types."""
    from tests.executor.providers.test_formats import golden
    from tests.executor.test_artifacts import IMAGE, WAV
    from toolexec import Artifact, ToolResult, format_tool_result

    files = (
        Artifact(name="chart.png", mime_type="image/png", size=len(IMAGE), data=IMAGE),
        Artifact(name="report.pdf", mime_type="application/pdf", size=9, data=b"%PDF-1.7\n"),
        Artifact(name="beep.wav", mime_type="audio/wav", size=len(WAV), data=WAV),
        Artifact(
            name="data.bin", mime_type="application/octet-stream", size=10240, path="/srv/state/cache/.artifacts/k/data.bin"
        ),
    )
    result = ToolResult(
        ok=True,
        status="ok",
        output="made",
        error=None,
        exit_code=0,
        stderr="",
        duration_ms=1.0,
        tool_call_id="c1",
        tool_name="make",
        artifacts=files,
    )
    answers = {
        provider: format_tool_result(result, provider) for provider in ("openai", "responses", "anthropic", "gemini", "mcp")
    }
    golden("results-with-files.json", answers, update_goldens)
    accepted_by_the_sdk("openai", [answers["openai"]])
    accepted_by_the_sdk("responses", [answers["responses"]])
    accepted_by_the_sdk("anthropic", [answers["anthropic"]])
    accepted_by_the_sdk("gemini", [answers["gemini"]])
    import mcp_types

    mcp_types.CallToolResult.model_validate(answers["mcp"])
