"""The agent-facing Python API with real tools: round trips per provider, registry verbs, toolkits, approval."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.conftest import Project, toolexec
from toolexec import Executor
from toolexec.approval import ApprovalRequest, Deny, Rewrite
from toolexec.errors import BadRequest, CompileError, NotEnabled, UnknownTool

SEARCH = '''import json


def run(query: str, limit: int = 5, tags: list[str] | None = None) -> str:
    """Search the notes.

    Args:
        query: What to look for.
        limit: At most this many.
        tags: Only notes with these tags.
    """
    return json.dumps({"query": query, "limit": limit, "tags": tags})
'''
REMOVE = '''def run(path: str) -> str:
    """Remove a note."""
    return f"removed {path}"
'''
CLOCK = 'def run() -> str:\n    """Tell the time."""\n    return "noon"\n'
ECHO = '{"query": "milk", "limit": 5, "tags": null}'


def fake_model(provider: str, name: str, arguments: dict[str, Any]) -> Any:
    """What each provider's API returns when its model calls one tool: a whole response."""
    text = json.dumps(arguments)
    if provider in ("openai", "openai-strict"):
        call = {"id": "call_9", "type": "function", "function": {"name": name, "arguments": text}}
        return {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}}]}
    if provider == "responses":
        item = {"type": "function_call", "id": "fc_9", "call_id": "call_9", "name": name, "arguments": text}
        return {"object": "response", "output": [item]}
    if provider == "anthropic":
        block = {"type": "tool_use", "id": "toolu_9", "name": name, "input": arguments}
        return {"id": "msg_9", "type": "message", "role": "assistant", "content": [block]}
    part = {"functionCall": {"id": "fc-9", "name": name, "args": arguments}}
    return {"candidates": [{"content": {"role": "model", "parts": [part]}}]}


def declared_names(declarations: list[dict[str, Any]]) -> list[str]:
    return [d["function"]["name"] if "function" in d else d["name"] for d in declarations]


EXPECTED = {
    "openai": [{"role": "tool", "tool_call_id": "call_9", "content": ECHO}],
    "openai-strict": [{"role": "tool", "tool_call_id": "call_9", "content": ECHO}],
    "responses": [{"type": "function_call_output", "call_id": "call_9", "output": ECHO}],
    "anthropic": {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": ECHO, "is_error": False}],
    },
    "gemini": {
        "role": "user",
        "parts": [{"functionResponse": {"name": "notes_search", "id": "fc-9", "response": {"output": ECHO}}}],
    },
}


@pytest.mark.parametrize("provider", list(EXPECTED))
def test_round_trip(project: Project, provider: str) -> None:
    project.tool("notes:search.py", SEARCH)
    with project.executor() as ex:
        declarations = ex.declarations(format=provider)
        assert declared_names(declarations) == ["notes_search"]  # 'notes:search' had to be mapped
        reply = fake_model(provider, "notes_search", {"query": "milk", "limit": None})  # null: "not given"
        batch = ex.parse_calls(reply)
        results = batch.complete(ex.call_many(batch.calls))
        assert [r.tool_name for r in results] == ["notes:search"]
        from toolexec.providers import render

        assert render(batch, results) == EXPECTED[provider]
        assert ex.answer(reply) == EXPECTED[provider]


def test_toolexec_call_maps_names_back_and_treats_null_as_absent(project: Project) -> None:
    project.tool("notes:search.py", SEARCH)
    config = str(project.configure())
    reply = fake_model("gemini", "notes_search", {"query": "milk", "limit": None})
    done = toolexec("--config", config, "call", input=json.dumps(reply))
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == EXPECTED["gemini"]
    forced = toolexec("--config", config, "call", "--format", "openai", input=json.dumps(reply))
    assert (forced.returncode, forced.stderr) == (
        2,
        "toolexec: expected tool calls in openai's shape: a list of tool_calls, {'tool_calls': [...]}, "
        "an assistant message carrying them, or a response with 'choices'\n",
    )


def test_executor_call_accepts_a_provider_safe_name(project: Project) -> None:
    project.tool("notes:search.py", SEARCH)
    with project.executor() as ex:
        result = ex.call("notes_search", {"query": "milk"})
        assert (result.ok, result.tool_name, result.output) == (True, "notes:search", ECHO)
        assert ex.format_tool_result(result, "gemini")["functionResponse"]["name"] == "notes_search"


def test_declarations_command(project: Project) -> None:
    project.tool("notes:search.py", SEARCH)
    project.tool("clock.py", CLOCK)
    config = str(project.configure())
    done = toolexec("--config", config, "declarations", "--format", "gemini", "--verbose")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {"name": "clock", "description": "Tell the time."},
        {
            "name": "notes_search",
            "description": "Search the notes.",
            "parameters": {
                "type": "OBJECT",
                "properties": {
                    "query": {"type": "STRING", "description": "What to look for."},
                    "limit": {"type": "INTEGER", "description": "At most this many.", "default": 5},
                    "tags": {"type": "ARRAY", "description": "Only notes with these tags.", "items": {"type": "STRING"}},
                },
                "required": ["query"],
            },
        },
    ]
    assert (
        done.stderr.splitlines()[-1]
        == "toolexec: notes:search: declared as 'notes_search' (gemini does not accept the name as it is)"
    )
    bad = toolexec("--config", config, "declarations", "--format", "claude")
    assert bad.returncode == 2 and "invalid choice: 'claude'" in bad.stderr
    strict = json.loads(toolexec("--config", config, "declarations", "--format", "openai-strict").stdout)
    assert [d["function"]["strict"] for d in strict] == [True, True]


def test_registry_verbs(project: Project) -> None:
    project.tool("notes:search.py", SEARCH)
    project.tool("clock.py", CLOCK)
    project.tool("remove.py", REMOVE)
    with project.executor(enabled_tools=["clock", "notes:search"]) as ex:
        assert ex.names() == ["clock", "notes:search"]
        assert ex.has("clock") and ex.has("notes_search") and not ex.has("remove") and not ex.has("nope")
        assert ex.get("notes_search").name == "notes:search"
        with pytest.raises(NotEnabled):
            ex.get("remove")
        with pytest.raises(UnknownTool, match=r"unknown tool 'clok'; did you mean 'clock'\?"):
            ex.get("clok")
        assert ex.manifest() == [
            {"name": "clock", "description": "Tell the time.", "input_schema": {"type": "object", "properties": {}}},
            {"name": "notes:search", "description": "Search the notes.", "input_schema": ex.get("notes:search").parameters},
        ]


def test_register_and_unregister(project: Project) -> None:
    project.tool("clock.py", CLOCK)
    outside = project.root / "extra"
    outside.mkdir()
    (outside / "remove.py").write_text(REMOVE, encoding="utf-8")
    (outside / "clock.py").write_text(CLOCK, encoding="utf-8")
    (outside / "broken.py").write_text("def run(x):\n    pass\n", encoding="utf-8")
    with project.executor(enabled_tools=["clock"]) as ex:
        assert ex.register(outside / "remove.py").name == "remove"
        assert ex.names() == ["clock", "remove"]
        assert ex.call("remove", {"path": "a"}).output == "removed a"
        with pytest.raises(BadRequest) as taken:
            ex.register(outside / "clock.py")
        assert str(taken.value) == (
            f"cannot register {outside / 'clock.py'}: tool name 'clock' is already used by {project.tools / 'clock.py'}"
        )
        with pytest.raises(CompileError):
            ex.register(outside / "broken.py")
        report = ex.discovery()
        assert (report.searched, report.loaded, report.errors) == (
            [str(project.tools / "clock.py"), str(outside / "remove.py")],
            ["clock", "remove"],
            [],
        )
        ex.unregister("remove")
        assert ex.call("remove", {"path": "a"}).reason == "unknown_tool"
        with pytest.raises(BadRequest, match=r"tool 'remove' was not registered with register\(\) \(registered: none\)"):
            ex.unregister("remove")


def test_discovery_report_names_file_line_and_message(project: Project) -> None:
    project.tool("clock.py", CLOCK)
    project.tool("broken.py", "def run(x):\n    pass\n")
    with project.executor() as ex:
        report = ex.discovery()
    assert report.loaded == ["clock"] and report.searched == [str(project.tools / "broken.py"), str(project.tools / "clock.py")]
    assert [(e.file, e.line) for e in report.errors] == [(str(project.tools / "broken.py"), 1)]
    assert report.errors[0].message == (
        "function 'run' has no docstring\n"
        '  hint: start the body with a docstring that says what the tool does: """Get the weather for a city."""'
    )


def test_toolkits(project: Project) -> None:
    project.tool("notes:search.py", SEARCH)
    project.tool("clock.py", CLOCK)
    project.tool("remove.py", REMOVE)
    with project.executor(mapping_tools={"notes": "notes:search,remove"}) as ex:
        notes = ex.toolkit("notes")
        assert notes.names() == ["notes:search", "remove"]
        assert declared_names(notes.declarations(format="anthropic")) == ["notes_search", "remove"]
        assert notes.call("notes_search", {"query": "milk"}).output == ECHO
        outside = notes.call("clock", {}, call_id="c1")
        assert (outside.status, outside.reason, outside.error) == (
            "refused",
            "unknown_tool",
            "unknown tool 'clock': it is not in toolkit 'notes', which holds: notes:search, remove",
        )
        assert asyncio.run(notes.acall("clock")).error == outside.error
        adhoc = ex.toolkit(["clock"])
        assert (adhoc.names(), adhoc.has("clock"), adhoc.has("remove")) == (["clock"], True, False)
        with pytest.raises(BadRequest, match=r"no toolkit 'web': it is not a mapping_tools alias in .* \(aliases: notes\)"):
            ex.toolkit("web")


def test_before_call_allows_denies_and_rewrites(project: Project) -> None:
    project.tool("notes:search.py", SEARCH)
    project.tool("remove.py", REMOVE)
    seen: list[tuple[str, dict[str, Any], bool | None]] = []

    def before_call(request: ApprovalRequest) -> Any:
        seen.append((request.tool.name, request.arguments, request.annotations.destructive))
        if request.tool.name == "remove":
            return Deny("removing needs a person's yes")
        if request.arguments["query"] == "rewrite":
            return Rewrite({"query": "milk"})
        if request.arguments["query"] == "bad":
            return Rewrite({"query": ["not", "a", "string"]})
        return None

    with Executor(project.configure(), before_call=before_call) as ex:
        denied = ex.call("remove", {"path": "a"})
        assert (denied.status, denied.reason, denied.error, denied.tool_call_error) == (
            "refused",
            "denied",
            "the call of tool 'remove' was denied: removing needs a person's yes",
            "Tool call 'remove' failed: the call of tool 'remove' was denied: removing needs a person's yes",
        )
        assert ex.call("notes_search", {"query": "rewrite"}).output == ECHO
        bad = ex.call("notes:search", {"query": "bad"})
        assert (bad.reason, bad.error) == (
            "invalid_arguments",
            'invalid arguments for tool \'notes:search\':\n- parameter \'query\': expected a string, got an array ["not", "a", "string"]',
        )
        invalid = ex.call("notes:search", {"query": {"an": "object"}})  # refused before the hook sees it
        assert invalid.reason == "invalid_arguments"
        assert ex.answer([{"type": "tool_use", "id": "t1", "name": "remove", "input": {"path": "b"}}]) == [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": "the call of tool 'remove' was denied: removing needs a person's yes",
                "is_error": True,
            }
        ]
    assert seen == [
        ("remove", {"path": "a"}, None),
        ("notes:search", {"query": "rewrite"}, None),
        ("notes:search", {"query": "bad"}, None),
        ("remove", {"path": "b"}, None),
    ]


def test_before_call_sees_the_arguments_the_tool_runs_with(project: Project) -> None:
    project.tool("search.py", SEARCH)
    seen: list[dict[str, Any]] = []

    def before_call(request: ApprovalRequest) -> Any:
        seen.append(request.arguments)
        return Rewrite({"query": 7, "limit": 2, "tags": None}) if request.arguments["query"] == "again" else None

    with Executor(project.configure(), before_call=before_call) as ex:
        assert ex.call("search", {"query": 42, "tags": None}).output == '{"query": "42", "limit": 5, "tags": null}'
        assert ex.call("search", {"query": "again"}).output == '{"query": "7", "limit": 2, "tags": null}'
    assert seen == [{"query": "42"}, {"query": "again"}]


def test_async_before_call_and_a_failing_hook(project: Project) -> None:
    project.tool("clock.py", CLOCK)

    async def no(request: ApprovalRequest) -> Any:
        await asyncio.sleep(0)
        return False

    def boom(request: ApprovalRequest) -> Any:
        raise RuntimeError("hook bug")

    with Executor(project.configure(), before_call=no) as ex:
        assert ex.call("clock").error == "the call of tool 'clock' was denied: the before_call hook did not allow it"
        assert asyncio.run(ex.acall("clock")).reason == "denied"
    with Executor(project.configure(), before_call=boom) as ex:
        assert (
            ex.call("clock").error == "the call of tool 'clock' was denied: the before_call hook failed: RuntimeError: hook bug"
        )
        assert asyncio.run(ex.acall("clock")).reason == "denied"


def test_confirm_without_a_terminal_denies(project: Project) -> None:
    project.tool("remove.py", REMOVE)
    project.tool("clock.py", CLOCK)
    config = str(project.configure())
    import subprocess
    import sys

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "toolexec", "--config", config, *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # no controlling terminal: nobody to ask
            check=False,
        )

    done = run("run", "remove", '{"path": "a"}', "--confirm", "destructive")
    assert (done.returncode, done.stdout) == (2, "")
    assert (
        done.stderr
        == "toolexec: the call of tool 'remove' was denied: --confirm destructive needs a terminal to ask on, and there is none\n"
    )
    assert run("run", "remove", '{"path": "a"}').stdout == "removed a"  # without --confirm nothing is asked


def test_which_tools_confirm_asks_about() -> None:
    from toolexec.approval import needs_confirmation
    from toolexec.records import Annotations, Kwargs, Metadata, ToolDeclaration

    def tool(**hints: bool) -> ToolDeclaration:
        metadata = Metadata(annotations=Annotations(**hints))
        return ToolDeclaration(
            name="t", description="", parameters={}, source="t.py", language="python", invocation=Kwargs(), metadata=metadata
        )

    cases = [tool(), tool(read_only=True), tool(destructive=False), tool(destructive=True), tool(read_only=False)]
    assert [needs_confirmation(t, "destructive") for t in cases] == [True, False, False, True, True]
    assert [needs_confirmation(t, "all") for t in cases] == [True] * 5


def test_the_example_agent_loop_runs_offline_and_prints_what_the_docs_show() -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(repo / "examples" / "agent_loop.py")], capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    page = (repo / "docs" / "providers.md").read_text(encoding="utf-8")
    shown = re.search(r"```text\n(== openai.*?)```", page, re.DOTALL)
    assert shown is not None and done.stdout == shown.group(1)
