"""An agent loop against each provider's request and response shapes, with a scripted fake model (offline).

For every provider it shows the three steps an agent takes with toolexec:

1. declarations out: ``Executor.declarations(format=…)`` goes into the request's ``tools``;
2. calls in: the model's response goes to ``Executor.answer`` as it is (names mapped back,
   ``null`` for an optional parameter treated as absent, calls run concurrently);
3. results back: the answer is appended to the conversation in the provider's own shape.

The "model" is a script: its first turn calls the tool it was offered (by the name it was
declared under), its second turn reads the result and answers. Run it with
``python examples/agent_loop.py``; it writes a small project into a temporary directory.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from toolexec import Executor

TOOL = '''import json


def run(city: str, days: int = 1, units: str | None = None) -> str:
    """Forecast the weather.

    Args:
        city: The city.
        days: How many days ahead.
        units: metric or imperial.
    """
    return json.dumps({"city": city, "days": days, "forecast": "sunny"})
'''
ARGUMENTS = {"city": "Lisbon", "days": None}  # strict-mode models send null for "not given"


def tool_name(declaration: dict[str, Any]) -> str:
    return declaration["function"]["name"] if "function" in declaration else declaration["name"]


def fake_model(provider: str, request: dict[str, Any]) -> dict[str, Any]:
    """The provider's response to ``request``: a tool call on the first turn, text once a result came back."""
    tools = request["tools"]
    name = tool_name(tools[0]["functionDeclarations"][0] if provider == "gemini" else tools[0])
    turns = request["messages"] if "messages" in request else request.get("input") or request.get("contents")
    answered = len(turns) > 1
    text = f"Lisbon: {json.loads(_last_result(provider, turns))['forecast']}" if answered else ""
    if provider == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if not answered:
            call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(ARGUMENTS)}}
            message["tool_calls"] = [call]
        return {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}
    if provider == "responses":
        if answered:
            return {
                "object": "response",
                "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}],
            }
        call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name, "arguments": json.dumps(ARGUMENTS)}
        return {"object": "response", "output": [call]}
    if provider == "anthropic":
        if answered:
            return {"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}]}
        block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": ARGUMENTS}
        return {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "Checking."}, block]}
    if answered:
        return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]}
    return {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": ARGUMENTS}}]}}]}


def _last_result(provider: str, turns: list[Any]) -> str:
    last = turns[-1]
    if provider == "openai":
        return str(last["content"])
    if provider == "responses":
        return str(last["output"])
    if provider == "anthropic":
        return str(last["content"][0]["content"])
    return str(last["parts"][0]["functionResponse"]["response"]["output"])


def agent(executor: Executor, provider: str) -> str:
    """Run one conversation to its final text, printing what goes out and comes back."""
    question = "What's the weather in Lisbon?"
    if provider == "gemini":
        tools = [{"functionDeclarations": executor.declarations(format="gemini")}]
    else:
        tools = executor.declarations(format="openai" if provider == "openai" else provider)
    history: list[Any]
    if provider == "gemini":
        history, key = [{"role": "user", "parts": [{"text": question}]}], "contents"
    elif provider == "responses":
        history, key = [{"role": "user", "content": question}], "input"
    else:
        history, key = [{"role": "user", "content": question}], "messages"
    print(f"== {provider}: declared as {tool_name(tools[0]['functionDeclarations'][0] if provider == 'gemini' else tools[0])!r}")
    while True:
        response = fake_model(provider, {"tools": tools, key: history})
        answer = executor.answer(response)
        if not _has_calls(answer):
            return _text(provider, response)
        print(f"   results back: {json.dumps(answer)}")
        history += _turn(provider, response) + (answer if isinstance(answer, list) else [answer])


def _has_calls(answer: Any) -> bool:
    if isinstance(answer, dict):
        return bool(answer.get("content") or answer.get("parts"))
    return bool(answer)


def _turn(provider: str, response: dict[str, Any]) -> list[Any]:
    """The model's own turn, as the provider wants it repeated in the next request."""
    if provider == "openai":
        return [response["choices"][0]["message"]]
    if provider == "responses":
        return list(response["output"])
    if provider == "anthropic":
        return [{"role": "assistant", "content": response["content"]}]
    return [response["candidates"][0]["content"]]


def _text(provider: str, response: dict[str, Any]) -> str:
    if provider == "openai":
        return str(response["choices"][0]["message"]["content"])
    if provider == "responses":
        return str(response["output"][0]["content"][0]["text"])
    if provider == "anthropic":
        return str(response["content"][0]["text"])
    return str(response["candidates"][0]["content"]["parts"][0]["text"])


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        tools = Path(root, "functions", "tools")
        tools.mkdir(parents=True)
        (tools / "weather:forecast.py").write_text(TOOL, encoding="utf-8")  # ':' is no provider's name character
        config = Path(root, "config.yaml")
        config.write_text("visible_tools:\n  - weather:forecast.py\n", encoding="utf-8")
        with Executor(config) as executor:
            for provider in ("openai", "responses", "anthropic", "gemini"):
                print(f"   final answer: {agent(executor, provider)}")


if __name__ == "__main__":
    main()
