"""A tool's question over MCP (toolexec.mcp_asking), driven by the SDK's own ``Client`` in both protocol eras:
Loki's ``guard_operation`` in Bash and a schema'd question from Python, JavaScript and TypeScript, answered by the
client's elicitation callback; declines and cancels; a client without elicitation; forged and replayed state."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.conftest import Project
from tests.executor.test_mcp import ERAS, HttpServer, stdio, text

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

GUARDED = """#!/usr/bin/env bash
set -e
# @describe Deploy, once the user agrees.
# @option --target! Where to.
source "$LLM_PROMPT_UTILS_FILE"

main() {
  guard_operation "Deploy to $argc_target?"
  echo "deployed to $argc_target" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
"""

UNITS_SCHEMA = {
    "type": "object",
    "properties": {
        "unit": {"type": "string", "enum": ["C", "F"], "title": "Unit"},
        "decimals": {"type": "integer", "minimum": 0, "maximum": 3},
    },
    "required": ["unit"],
}

ASKERS = {
    "units_py.py": f'''import json
import os

SCHEMA = {UNITS_SCHEMA!r}


def run(city: str) -> str:
    """Tell the weather in the user's units."""
    answers = json.loads(os.environ.get("LLM_INPUT_RESPONSES", "{{}}"))
    if "units" not in answers:
        if "LLM_INPUT_REQUEST" not in os.environ:
            return f"{{city}}: 20 C (nobody to ask)"
        with open(os.environ["LLM_INPUT_REQUEST"], "w") as request:
            json.dump({{"key": "units", "message": f"Units for {{city}}?", "schema": SCHEMA}}, request)
        raise SystemExit(0)
    answer = answers["units"]
    if answer["action"] != "accept":
        return f"{{city}}: not told ({{answer['action']}})"
    return f"{{city}}: 20 {{answer['content']['unit']}} {{os.environ['LLM_TOOL_CALL_ID']}}"
''',
    "units_js.js": f"""const fs = require("node:fs");

/**
 * Tell the weather in the user's units.
 * @typedef {{Object}} Args
 * @property {{string}} city
 * @param {{Args}} args
 */
exports.run = function ({{ city }}) {{
  const answers = JSON.parse(process.env.LLM_INPUT_RESPONSES || "{{}}");
  if (!answers.units) {{
    if (!process.env.LLM_INPUT_REQUEST) return `${{city}}: 20 C (nobody to ask)`;
    const schema = {json.dumps(UNITS_SCHEMA)};
    fs.writeFileSync(process.env.LLM_INPUT_REQUEST, JSON.stringify({{ key: "units", message: `Units for ${{city}}?`, schema }}));
    process.exit(0);
  }}
  if (answers.units.action !== "accept") return `${{city}}: not told (${{answers.units.action}})`;
  return `${{city}}: 20 ${{answers.units.content.unit}} ${{process.env.LLM_TOOL_CALL_ID}}`;
}};
""",
    "units_ts.ts": f"""import {{ writeFileSync }} from "node:fs";

type Answer = {{ action: string; content?: {{ unit: string }} }};

/**
 * Tell the weather in the user's units.
 * @param city The city.
 */
export function run(city: string): string {{
  const answers: Record<string, Answer> = JSON.parse(process.env.LLM_INPUT_RESPONSES ?? "{{}}");
  if (!answers.units) {{
    if (!process.env.LLM_INPUT_REQUEST) return `${{city}}: 20 C (nobody to ask)`;
    const schema = {json.dumps(UNITS_SCHEMA)};
    writeFileSync(process.env.LLM_INPUT_REQUEST, JSON.stringify({{ key: "units", message: `Units for ${{city}}?`, schema }}));
    process.exit(0);
  }}
  if (answers.units.action !== "accept") return `${{city}}: not told (${{answers.units.action}})`;
  return `${{city}}: 20 ${{answers.units.content?.unit}} ${{process.env.LLM_TOOL_CALL_ID}}`;
}}
""",
}
UNITS = ["units_py", "units_js", "units_ts"]


@pytest.fixture
def asking(project: Project) -> Project:
    project.tool("deploy.sh", GUARDED)
    for file, source in ASKERS.items():
        project.tool(file, source)
    project.configure(["deploy.sh", *ASKERS])
    return project


class Person:
    """The client's elicitation callback: answers by a script, and remembers what it was asked."""

    def __init__(self, *answers: types.ElicitResult) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append((params.message, params.requested_schema))
        return self.answers.pop(0)


def accept(**content: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=content)


@pytest.mark.parametrize("era", ERAS)
def test_guard_operation_asks_and_the_rerun_sees_the_answer(asking: Project, era: str) -> None:
    yes, no = Person(accept(value=True)), Person(types.ElicitResult(action="decline"))

    async def scenario() -> None:
        async with stdio(asking, era, elicitation_callback=yes) as client:
            done = await client.call_tool("deploy", {"target": "prod"})
            assert (done.is_error, text(done)) == (False, "deployed to prod\n")
        async with stdio(asking, era, elicitation_callback=no) as client:
            refused = await client.call_tool("deploy", {"target": "prod"})
            assert (refused.is_error, text(refused)) == (True, "Tool call 'deploy' exited with code 1")

    anyio.run(scenario)
    schema = {"type": "object", "properties": {"value": {"type": "boolean", "title": "Deploy to prod?"}}, "required": ["value"]}
    assert yes.asked == no.asked == [("Deploy to prod?", schema)]


@pytest.mark.parametrize("era", ERAS)
def test_a_schemad_question_from_every_language(asking: Project, era: str) -> None:
    person = Person(*[accept(unit="F", decimals=1)] * 3, *[types.ElicitResult(action="cancel")] * 3)

    async def scenario() -> list[str]:
        said = []
        async with stdio(asking, era, elicitation_callback=person) as client:
            for name in [*UNITS, *UNITS]:
                result = await client.call_tool(name, {"city": "Oslo"})
                assert not result.is_error, text(result)
                said.append(text(result))
        return said

    said = anyio.run(scenario)
    assert [line.rsplit(" ", 1)[0] if "20 F" in line else line for line in said] == [
        *["Oslo: 20 F"] * 3,
        *["Oslo: not told (cancel)"] * 3,
    ]
    assert all(line.rsplit(" ", 1)[1].startswith("call_") for line in said[:3])  # the re-run kept the call's id
    assert person.asked == [("Units for Oslo?", UNITS_SCHEMA)] * 6


@pytest.mark.parametrize("era", ERAS)
def test_a_client_without_elicitation_gets_todays_behaviour(asking: Project, era: str) -> None:
    async def scenario() -> None:
        async with stdio(asking, era) as client:
            for name in UNITS:
                assert text(await client.call_tool(name, {"city": "Oslo"})) == "Oslo: 20 C (nobody to ask)"
            done = await client.call_tool("deploy", {"target": "prod"})  # no terminal: confirmations proceed
            assert (done.is_error, text(done)) == (False, "deployed to prod\n")

    anyio.run(scenario)


def test_an_answer_that_breaks_the_schema_is_refused(asking: Project) -> None:
    person = Person(accept(unit="K"))

    async def scenario() -> None:
        async with stdio(asking, "2026-07-28", elicitation_callback=person) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("units_py", {"city": "Oslo"})
            assert caught.value.error.code == types.INVALID_PARAMS
            assert caught.value.error.message == "the answer to 'units' at unit: 'K' is not one of ['C', 'F']"

    anyio.run(scenario)


def test_the_request_state_is_bound_to_its_call(asking: Project) -> None:
    async def scenario() -> None:
        async with stdio(asking, "2026-07-28", elicitation_callback=Person()) as client:  # declares elicitation
            session = client.session
            first = await session.call_tool("units_py", {"city": "Oslo"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert list(first.input_requests or {}) == ["units"]
            state = first.request_state
            assert state is not None and "Oslo" not in state and "units" not in state  # sealed, not readable
            answer = {"units": accept(unit="C")}
            resumed = await session.call_tool(
                "units_py", {"city": "Oslo"}, input_responses=answer, request_state=state, allow_input_required=True
            )
            assert isinstance(resumed, types.CallToolResult) and text(resumed).startswith("Oslo: 20 C call_")
            tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            for name, arguments, sent_state, responses in [
                ("units_py", {"city": "Bergen"}, state, answer),  # another call's arguments
                ("units_js", {"city": "Oslo"}, state, answer),  # another tool
                ("units_py", {"city": "Oslo"}, tampered, answer),  # forged
                ("units_py", {"city": "Oslo"}, "v1.bm90IGEgc3RhdGU", answer),  # made up
            ]:
                with pytest.raises(MCPError) as caught:
                    await session.call_tool(name, arguments, input_responses=responses, request_state=sent_state)
                assert (caught.value.error.code, caught.value.error.message) == (
                    types.INVALID_PARAMS,
                    "Invalid or expired requestState",
                )
            for responses, says in [
                (None, "inputResponses must answer the question asked, 'units', and nothing else; got []"),
                (
                    {"other": accept(unit="C")},
                    "inputResponses must answer the question asked, 'units', and nothing else; got ['other']",
                ),
                (
                    {"units": accept(unit="C"), "more": accept()},
                    "inputResponses must answer the question asked, 'units', and nothing else; got ['more', 'units']",
                ),
            ]:
                with pytest.raises(MCPError) as caught:
                    await session.call_tool("units_py", {"city": "Oslo"}, input_responses=responses, request_state=state)
                assert caught.value.error.message == says
            with pytest.raises(MCPError) as caught:  # answers forged without any state
                await session.call_tool("units_py", {"city": "Oslo"}, input_responses=answer)
            assert caught.value.error.message.startswith("inputResponses without the requestState")

    anyio.run(scenario)


@pytest.mark.slow
def test_over_http_a_second_replica_resumes_with_the_shared_key(asking: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    asking.configure(["deploy.sh", *ASKERS], mcp={"state_key_env": "STATE_KEY"})
    monkeypatch.setenv("STATE_KEY", "k" * 40)
    first, second = HttpServer(asking), HttpServer(asking)
    monkeypatch.setenv("STATE_KEY", "z" * 40)
    other = HttpServer(asking)  # a server of another key: not a replica

    async def scenario() -> None:
        person = Person()
        async with (
            first.client() as a,
            Client(streamable_http_client(first.url, http_client=a), mode="2026-07-28", elicitation_callback=person) as one,
        ):
            asked = await one.session.call_tool("units_py", {"city": "Oslo"}, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        answer = {"units": accept(unit="F")}
        async with (
            second.client() as b,
            Client(streamable_http_client(second.url, http_client=b), mode="2026-07-28", elicitation_callback=person) as two,
        ):
            done = await two.session.call_tool(
                "units_py", {"city": "Oslo"}, input_responses=answer, request_state=asked.request_state
            )
            assert text(done).startswith("Oslo: 20 F call_")
        async with (
            other.client() as c,
            Client(streamable_http_client(other.url, http_client=c), mode="2026-07-28", elicitation_callback=person) as three,
        ):
            with pytest.raises(MCPError) as caught:
                await three.session.call_tool(
                    "units_py", {"city": "Oslo"}, input_responses=answer, request_state=asked.request_state
                )
            assert caught.value.error.message == "Invalid or expired requestState"

    try:
        anyio.run(scenario)
    finally:
        assert [server.stop() for server in (first, second, other)] == [0, 0, 0]


HELLO = '''def run() -> str:
    """Say hello."""
    return "hello"
'''


def test_waiting_for_an_answer_holds_no_slot_and_a_cancel_ends_the_wait(asking: Project) -> None:
    asking.tool("hello.py", HELLO)
    asking.configure(["deploy.sh", *ASKERS, "hello.py"], max_parallel=1)
    asked = anyio.Event()

    async def never_answers(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def scenario() -> None:
        async with stdio(asking, "legacy", elicitation_callback=never_answers) as client:
            async with anyio.create_task_group() as group:

                async def waits() -> None:
                    with anyio.CancelScope() as scope:
                        group_scope.append(scope)
                        await client.call_tool("units_py", {"city": "Oslo"})

                group_scope: list[anyio.CancelScope] = []
                group.start_soon(waits)
                with anyio.fail_after(30):
                    await asked.wait()
                    assert text(await client.call_tool("hello", {})) == "hello"  # the one slot is free meanwhile
                group_scope[0].cancel()
            with anyio.fail_after(30):
                assert text(await client.call_tool("hello", {})) == "hello"

    anyio.run(scenario)


@pytest.mark.slow
def test_a_handshake_era_client_over_stateless_http_is_not_asked(asking: Project) -> None:
    server = HttpServer(asking)
    person = Person()

    async def scenario() -> None:
        async with (
            server.client() as session,
            Client(streamable_http_client(server.url, http_client=session), mode="legacy", elicitation_callback=person) as client,
        ):
            assert text(await client.call_tool("units_py", {"city": "Oslo"})) == "Oslo: 20 C (nobody to ask)"

    try:
        anyio.run(scenario)
    finally:
        assert server.stop() == 0
    assert person.asked == []  # no channel back to it: the tool runs as it did before
