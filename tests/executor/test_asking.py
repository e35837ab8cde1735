"""Asking the user mid-call (toolexec.asking) off MCP: the Python API's ``on_input`` (sync and async), answers handed
back and given again, the shipped prompt helpers (over a user's own Loki file too), the tool's bad requests, and
``toolexec run --ask`` on a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import REPO, Project
from tests.executor.test_confirm_tty import ask
from tests.executor.test_loki_compat import LOKI_PROMPT_UTILS
from toolexec.api import Executor
from toolexec.records import InputRequest, InputResponse

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

HELPERS = """#!/usr/bin/env bash
set -e
# @describe Ask with every helper.
source "$LLM_PROMPT_UTILS_FILE"

main() {
  guard_operation "Go on?"
  guard_path /elsewhere/file "Touch /elsewhere/file?"
  name=$(input "Name?")
  colour=$(list "Colour?" red green blue)
  picked=$(checkbox "Toppings?" ham egg "a \\"quoted\\" one")
  size=$(range "Size?" 1 3 5)
  printf 'name=%s colour=%s picked=%s size=%s\\n' "$name" "$colour" "$picked" "$size" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
"""

ASKS = '''import json
import os


def run(rounds: int = 1) -> str:
    """Ask ``rounds`` questions, one per run."""
    answers = json.loads(os.environ["LLM_INPUT_RESPONSES"]) if "LLM_INPUT_REQUEST" in os.environ else None
    if answers is None:
        return "nobody to ask"
    if len(answers) < rounds:
        key = f"q{len(answers) + 1}"
        schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}
        with open(os.environ["LLM_INPUT_REQUEST"], "w") as request:
            json.dump({"key": key, "message": f"Number {key}?", "schema": schema}, request)
        print("this output is discarded")
        raise SystemExit(3)
    flat = sorted((k, v) for k, v in os.environ.items() if k.startswith("LLM_ANSWER_"))
    return json.dumps({"answers": answers, "flat": flat})
'''

BAD_REQUESTS = {
    "not JSON": "{nope",
    "a list": "[1]",
    "a bad key": '{"key": "two__parts", "message": "m"}',
    "no message": '{"key": "k", "message": " "}',
    "a nested schema": '{"key": "k", "message": "m", "schema": {"type": "object", "properties": {"o": {"type": "object"}}}}',
    "an unknown field": '{"key": "k", "message": "m", "url": "x"}',
}
BAD_SAYS = {
    "not JSON": "is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
    "a list": 'must be a JSON object {"key", "message", "schema"}, got list',
    "a bad key": "key must be letters and digits with single underscores between them, at most 64 characters, got 'two__parts'",
    "no message": "message must be the question's text, got ' '",
    "a nested schema": "schema.properties.o must have type string, number, integer, boolean or array, got 'object' (no nesting)",
    "an unknown field": "has unknown field 'url': expected key, message and schema",
}


@pytest.fixture
def asks(project: Project) -> Project:
    project.tool("asks.py", ASKS)
    project.tool("helpers.sh", HELPERS)
    for n, text in enumerate(BAD_REQUESTS.values()):
        project.tool(f"bad{n}.sh", f"# @describe Bad.\nmain() {{ printf '%s' {json.dumps(text)} >\"$LLM_INPUT_REQUEST\"; }}\n")
    return project


def numbers(request: InputRequest) -> dict[str, Any]:
    return {"action": "accept", "content": {"n": int(request.key[1:]) * 10}}


def test_on_input_answers_every_round_and_the_tool_sees_all_answers(asks: Project) -> None:
    seen: list[InputRequest] = []

    def on_input(request: InputRequest) -> dict[str, Any]:
        seen.append(request)
        return numbers(request)

    assert asks.executor().call("asks", {"rounds": 2}).output == "nobody to ask"  # no on_input: the tool is told
    executor = Executor(asks.configure(), on_input=on_input)  # the executor's own, for every call
    result = executor.call("asks", {"rounds": 2})
    assert (result.ok, result.status, result.stderr) == (True, "ok", "")
    assert json.loads(result.output) == {
        "answers": {"q1": {"action": "accept", "content": {"n": 10}}, "q2": {"action": "accept", "content": {"n": 20}}},
        "flat": [
            ["LLM_ANSWER_q1", "accept"],
            ["LLM_ANSWER_q1__n", "10"],
            ["LLM_ANSWER_q2", "accept"],
            ["LLM_ANSWER_q2__n", "20"],
        ],
    }
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}
    assert seen == [InputRequest(key=f"q{n}", message=f"Number q{n}?", schema=schema) for n in (1, 2)]


def test_an_async_on_input_is_awaited_on_the_callers_loop(asks: Project) -> None:
    async def scenario() -> tuple[Any, Any]:
        loop = asyncio.get_running_loop()
        loops = []

        async def on_input(request: InputRequest) -> InputResponse:
            loops.append(asyncio.get_running_loop())
            await asyncio.sleep(0)
            return InputResponse(action="accept", content={"n": 7})

        with asks.executor() as executor:
            result = await executor.acall("asks", {"rounds": 1}, on_input=on_input)
        assert loops == [loop]
        return result.ok, json.loads(result.output)["answers"]

    assert asyncio.run(scenario()) == (True, {"q1": {"action": "accept", "content": {"n": 7}}})
    # an async callback given to the sync call is run to completion on the calling thread
    result = asks.executor().call("asks", {"rounds": 1}, on_input=lambda r: _async_answer())
    assert json.loads(result.output)["answers"] == {"q1": {"action": "cancel"}}


async def _async_answer() -> dict[str, Any]:
    return {"action": "cancel"}


def test_a_question_handed_back_is_answered_by_calling_again(asks: Project) -> None:
    executor = asks.executor()
    first = executor.call("asks", {"rounds": 1}, on_input=lambda request: None)
    assert (first.ok, first.status, first.reason, first.output) == (False, "input_required", "input_required", "")
    assert first.error == "Tool call 'asks' asks for input (q1): Number q1?"
    assert first.input_request is not None and first.input_request.key == "q1"
    assert first.to_dict()["input_request"]["key"] == "q1"
    answered = executor.call("asks", {"rounds": 1}, on_input=lambda request: None, input_responses={"q1": {"action": "decline"}})
    assert json.loads(answered.output)["answers"] == {"q1": {"action": "decline"}}


def test_wrong_or_failing_answers_end_the_call_with_a_clear_error(asks: Project) -> None:
    executor = asks.executor()
    wrong = executor.call("asks", {}, on_input=lambda r: {"action": "accept", "content": {"n": -1}})
    assert (wrong.ok, wrong.reason, wrong.error) == (
        False,
        "bad_request",
        "the answer to 'q1' at n: -1 is less than the minimum of 0",
    )
    extra = executor.call("asks", {}, on_input=lambda r: {"action": "accept", "content": {"n": 1, "m": 2}})
    assert extra.error == "the answer to 'q1': Additional properties are not allowed ('m' was unexpected)"
    shapeless = executor.call("asks", {}, on_input=lambda r: "yes")
    assert (
        shapeless.error
        == 'the answer to \'q1\' must be {"action": "accept" | "decline" | "cancel", "content": {...}}, got \'yes\''
    )

    def fails(request: InputRequest) -> None:
        raise RuntimeError("no person here")

    failed = executor.call("asks", {}, on_input=fails)
    assert (failed.reason, failed.error) == (
        "denied",
        "the call of tool 'asks' was denied: its question 'q1' was not answered: RuntimeError: no person here",
    )
    endless = executor.call("asks", {"rounds": 99}, on_input=numbers)
    assert (endless.reason, endless.error) == ("bad_request", "tool 'asks' asked more than 16 questions in one call")
    earlier = {f"q{n}": {"action": "accept", "content": {"n": n}} for n in range(1, 17)}  # rounds of a protocol
    handed = executor.call("asks", {"rounds": 99}, on_input=lambda r: None, input_responses=earlier)
    assert handed.error == "tool 'asks' asked more than 16 questions in one call"
    given = executor.call("asks", {}, input_responses={"q1": {"action": "maybe"}})
    assert given.error.startswith("input_responses['q1'] must be {\"action\"")


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_a_malformed_request_is_the_tools_failure(asks: Project, case: str) -> None:
    n = list(BAD_REQUESTS).index(case)
    result = asks.executor().call(f"bad{n}", {}, on_input=numbers)
    where = f"tool 'bad{n}' asked for input, but its request in $LLM_INPUT_REQUEST"
    says = BAD_SAYS[case]
    expected = f"{where} {says}" if says.startswith(("is ", "must ", "has ")) else f"{where}: {says}"
    assert (result.ok, result.status, result.reason, result.error) == (False, "error", "tool_failed", expected)


ANSWERS = {
    "confirm": {"action": "accept", "content": {"value": True}},
    "input": {"action": "accept", "content": {"value": 'Ann "the" \\ Lee'}},
    "list": {"action": "accept", "content": {"value": "blue"}},
    "checkbox": {"action": "accept", "content": {"value": ["ham", 'a "quoted" one']}},
    "range": {"action": "accept", "content": {"value": 4}},
}


@pytest.mark.parametrize("own", [False, True], ids=["shipped", "users-loki-file"])
def test_the_prompt_helpers_ask_through_toolexec(asks: Project, own: bool) -> None:
    if own:  # Loki's own file asks only on a terminal: its questions become real ones all the same
        (asks.root / "functions" / "utils").mkdir()
        (asks.root / "functions" / "utils" / "prompt-utils.sh").write_text(LOKI_PROMPT_UTILS)
    asked: list[InputRequest] = []

    def on_input(request: InputRequest) -> dict[str, Any]:
        asked.append(request)
        return ANSWERS[request.key.split("_")[0]]

    result = asks.executor().call("helpers", {}, on_input=on_input)
    assert (result.ok, result.output, result.stderr) == (True, 'name=Ann "the" \\ Lee colour=2 picked=0 2 size=4\n', "")
    assert [(r.key.split("_")[0], r.message) for r in asked] == [
        ("confirm", "Go on?"),
        ("confirm", "Touch /elsewhere/file?"),
        ("input", "Name?"),
        ("list", "Colour?"),
        ("checkbox", "Toppings?"),
        ("range", "Size?"),
    ]
    assert asked[3].schema["properties"]["value"] == {"type": "string", "title": "Colour?", "enum": ["red", "green", "blue"]}
    assert asked[4].schema["properties"]["value"]["items"] == {"type": "string", "enum": ["ham", "egg", 'a "quoted" one']}
    assert asked[5].schema["properties"]["value"] == {
        "type": "integer",
        "title": "Size?",
        "minimum": 1,
        "maximum": 5,
        "default": 3,
    }


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_no_to_guard_operation_ends_the_tool_and_auto_confirm_asks_nothing(
    asks: Project, action: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = asks.executor().call("helpers", {}, on_input=lambda r: {"action": action})
    assert (result.ok, result.exit_code, result.output) == (False, 1, "ERROR: Operation aborted!\n")
    asked: list[str] = []
    monkeypatch.setenv("AUTO_CONFIRM", "1")
    auto = asks.executor().call("helpers", {}, on_input=lambda r: asked.append(r.key) or {"action": "decline"})
    assert auto.exit_code == 1  # the first question that is not a confirmation was declined: input fails
    assert [key.split("_")[0] for key in asked] == ["input"]


def test_stale_asking_variables_never_reach_a_tool(asks: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    (asks.root / "functions" / ".env").write_text('LLM_ANSWER_q1=accept\nLLM_INPUT_RESPONSES={"q1": {}}\n')
    monkeypatch.setenv("LLM_INPUT_REQUEST", "/tmp/forged")
    monkeypatch.setenv("LLM_ANSWER_q2__n", "5")
    assert asks.executor().call("asks", {}).output == "nobody to ask"
    result = asks.executor().call("asks", {}, on_input=numbers)
    assert json.loads(result.output)["flat"] == [["LLM_ANSWER_q1", "accept"], ["LLM_ANSWER_q1__n", "10"]]


# --- the CLI on a terminal -----------------------------------------------------------------------


def test_run_ask_answers_on_the_terminal(asks: Project) -> None:
    config = asks.configure()
    done = ask(
        config, [(b"[a whole number, 0..]: ", b"x\n"), (b"[a whole number, 0..]: ", b"12\n")], "run", "asks", "{}", "--ask"
    )
    assert (done.code, done.stderr) == (0, "")
    assert json.loads(done.stdout)["answers"] == {"q1": {"action": "accept", "content": {"n": 12}}}
    assert done.terminal == (
        b"toolexec: the tool asks: Number q1?\n  n [a whole number, 0..]: x\n  (that does not fit; try again)\n"
        b"  n [a whole number, 0..]: 12\n"
    )
    done = ask(config, [(b"[y/n]: ", b"y\n"), (b"[y/n]: ", b"y\n"), (b"[text]: ", b"\x04")], "run", "helpers", "{}", "--ask")
    assert (done.code, done.stdout) == (1, "")  # the name's question was cancelled (Ctrl-D): `input` fails, set -e ends the tool
    assert done.terminal == (
        b"toolexec: the tool asks: Go on?\n  Go on? [y/n]: y\n"
        b"toolexec: the tool asks: Touch /elsewhere/file?\n  Touch /elsewhere/file? [y/n]: y\n"
        b"toolexec: the tool asks: Name?\n  Name? [text]: \n"
    )


def test_run_ask_without_a_terminal_is_refused(asks: Project) -> None:
    config = asks.configure()
    done = subprocess.run(
        [sys.executable, "-m", "toolexec", "--config", str(config), "run", "asks", "{}", "--ask"],
        capture_output=True,
        text=True,
        start_new_session=True,
        timeout=60,
        cwd=REPO,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "toolexec: --ask needs a terminal to ask the tools' questions on, and there is none (no /dev/tty)\n",
    )


CONFINED = """#!/usr/bin/env bash
set -e
# @describe Ask from inside the sandbox.
# @meta network none
# @meta writes cache
source "$LLM_PROMPT_UTILS_FILE"
main() {
  guard_operation "Go on?"
  echo "went on as $(input "Name?")" >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/ns/user"), reason="Linux namespaces only")
def test_a_confined_tool_asks_as_any_other(project: Project) -> None:
    project.tool("confined.sh", CONFINED)
    answers = {
        "confirm": {"action": "accept", "content": {"value": True}},
        "input": {"action": "accept", "content": {"value": "Ann"}},
    }
    with project.executor(["confined.sh"], sandbox="declared") as executor:
        result = executor.call("confined", {}, on_input=lambda request: answers[request.key.split("_")[0]])
    assert (result.ok, result.output, result.stderr) == (True, "went on as Ann\n", "")
