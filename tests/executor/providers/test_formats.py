"""Every provider's declaration format and call/result shape, against goldens and the providers' published rules.

The goldens live in tests/executor/providers/goldens/ (``pytest --update-goldens`` rewrites them); the rules
each provider publishes for declarations are written down in tests/executor/providers/goldens/rules.json.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from toolexec.errors import BadRequest
from toolexec.providers import (
    DECLARATION_FORMATS,
    Names,
    declarations,
    format_tool_result,
    format_tool_result_as_text,
    parse_batch,
    render,
)
from toolexec.providers.names import GEMINI_NAMES, MCP_NAMES, OPENAI_NAMES, NameMap
from toolexec.providers.schema import drop_optional_nulls
from toolexec.records import Annotations, Kwargs, Metadata, ToolCall, ToolDeclaration, ToolResult

HERE = Path(__file__).parent / "goldens"
RULES = json.loads((HERE / "rules.json").read_text(encoding="utf-8"))
LONG = "report_" + "x" * 63  # 70 characters


def tool(name: str, parameters: dict[str, Any], description: str = "", **metadata: Any) -> ToolDeclaration:
    return ToolDeclaration(
        name=name,
        description=description or f"The {name} tool.",
        parameters=parameters,
        source=f"/tools/{name}.py",
        language="python",
        invocation=Kwargs(),
        metadata=Metadata(**metadata),
    )


# The set every format is checked on: no parameters, optional and nullable parameters, nested
# objects, arrays of objects, non-string enums, defaults, and names with '.', ':' and 70 characters.
TOOLS = [
    tool("get_time", {"type": "object", "properties": {}}, "Tell the time.", annotations=Annotations(read_only=True)),
    tool(
        "notes.search",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "description": "At most this many.", "default": 10},
                "since": {"type": ["string", "null"], "description": "ISO date, or null for any time."},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["query"],
        },
        title="Search notes",
        examples=({"query": "groceries"}, {"query": "trip", "limit": 3}),
        annotations=Annotations(read_only=True, open_world=False),
        output_schema={"type": "object", "properties": {"hits": {"type": "array", "items": {"type": "string"}}}},
    ),
    tool(
        "shop:order",
        {
            "type": "object",
            "properties": {
                "customer": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
                    "required": ["name"],
                },
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "default": 1}},
                        "required": ["sku"],
                    },
                },
                "priority": {"type": "integer", "enum": [1, 2, 3], "description": "1 is urgent."},
                "gift": {"type": "boolean", "default": False},
            },
            "required": ["customer", "items"],
        },
        annotations=Annotations(destructive=True, idempotent=False),
    ),
    tool(
        LONG,
        {
            "type": "object",
            "properties": {
                "level": {"type": "string", "enum": ["low", "high"], "default": "low"},
                "extra": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Free-form labels."},
            },
        },
    ),
]


def golden(name: str, actual: Any, update: bool) -> None:
    path = HERE / name
    text = json.dumps(actual, indent=2, ensure_ascii=False) + "\n"
    if update:
        path.write_text(text, encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8")) == actual, f"{path} differs (pytest --update-goldens)"


@pytest.mark.parametrize("format", DECLARATION_FORMATS)
def test_declarations_golden(format: str, update_goldens: bool) -> None:
    declared = declarations(TOOLS, format)
    golden(f"declarations-{format}.json", {"declarations": list(declared), "notes": declared.notes}, update_goldens)


def test_gemini_parameters_json_schema_when_asked(update_goldens: bool) -> None:
    declared = declarations(TOOLS, "gemini", json_schema=True)
    assert declared[1] == {
        "name": "notes_search",
        "description": "The notes.search tool.",
        "parametersJsonSchema": TOOLS[1].parameters,
    }
    assert declared.notes == [
        f"{t.name}: declared as {n!r} (gemini does not accept the name as it is)"
        for t, n in [(TOOLS[1], "notes_search"), (TOOLS[2], "shop_order"), (TOOLS[3], LONG[:55] + "_" + _digest(LONG))]
    ]
    with pytest.raises(BadRequest, match="json_schema applies to the gemini format only"):
        declarations(TOOLS, "openai", json_schema=True)
    with pytest.raises(BadRequest, match="unknown declaration format 'claude'; known formats: openai, openai-strict"):
        declarations(TOOLS, "claude")


def _digest(name: str) -> str:
    import hashlib

    return hashlib.sha256(name.encode()).hexdigest()[:8]


@pytest.mark.parametrize(
    ("format", "json_schema"),
    [*((f, False) for f in DECLARATION_FORMATS), ("gemini", True)],
    ids=[*DECLARATION_FORMATS, "gemini-json"],
)
def test_declarations_follow_the_published_rules(format: str, json_schema: bool) -> None:
    rules = RULES[format]
    declared = declarations(TOOLS, format, json_schema=json_schema)
    names = []
    for item in declared:
        if rules["wrapper"]:
            assert set(item) == {"type", rules["wrapper"]["key"]} and item["type"] == rules["wrapper"]["type"]
            item = item[rules["wrapper"]["key"]]
        assert set(item) <= set(rules["keys"]), item
        assert set(rules["required_keys"]) <= set(item), item
        assert re.fullmatch(rules["name"], item["name"]), item["name"]
        names.append(item["name"])
        if "one_of_keys" in rules:
            assert len(set(item) & set(rules["one_of_keys"])) <= 1
        schema = item.get(rules["schema_key"])
        if schema is not None:
            assert schema["type"] == rules["root_type"]
        if "when_strict" in rules:
            assert isinstance(item["strict"], bool)  # always explicit
            if item["strict"]:
                _check_strict(item["parameters"], rules["when_strict"], 0)
        if "openapi_subset" in rules and schema is not None:
            subset = rules["openapi_subset"]
            assert schema.get("properties"), "no empty parameter object"
            _check_openapi(schema, subset)
        if "annotation_keys" in rules and "annotations" in item:
            assert set(item["annotations"]) <= set(rules["annotation_keys"])
    assert len(set(names)) == len(names), "names are collision-free"


def _check_strict(node: dict[str, Any], rules: dict[str, Any], depth: int) -> None:
    assert depth <= rules["max_depth"]
    assert set(node) <= set(rules["keywords"]), sorted(set(node) - set(rules["keywords"]))
    if "properties" in node:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
        for prop in node["properties"].values():
            _check_strict(prop, rules, depth + 1)
    for sub in [node.get("items"), *node.get("anyOf", ())]:
        if isinstance(sub, dict):
            _check_strict(sub, rules, depth + 1)


def _check_openapi(node: dict[str, Any], subset: dict[str, Any]) -> None:
    assert set(node) <= set(subset["keywords"]), sorted(set(node) - set(subset["keywords"]))
    if "type" in node:
        assert node["type"] in subset["types"]
    if "enum" in node:
        assert node["type"] == subset["enum_only_for"] and all(isinstance(v, str) for v in node["enum"])
    for prop in node.get("properties", {}).values():
        _check_openapi(prop, subset)
    for sub in [node.get("items"), *node.get("anyOf", ())]:
        if isinstance(sub, dict):
            _check_openapi(sub, subset)


def test_strict_falls_back_rather_than_rewrite() -> None:
    declared = declarations(TOOLS, "openai-strict")
    assert [d["function"]["strict"] for d in declared] == [True, True, True, False]
    assert declared[3]["function"]["parameters"] == TOOLS[3].parameters  # sent as it is
    assert declared.notes[-1] == (
        f"{LONG}: strict: false (parameters.extra: an object with additionalProperties (free-form keys) cannot be strict)"
    )
    plain = declarations(TOOLS, "openai")
    assert [d["function"]["strict"] for d in plain] == [False] * 4


# --- names ---------------------------------------------------------------------------


def test_safe_names_are_collision_free_and_map_back() -> None:
    tools = ["a.b", "a_b", "a:b", "9lives", LONG, LONG + "y"]
    openai = NameMap(tools, OPENAI_NAMES)
    assert {t: openai.safe(t) for t in tools} == {
        "a.b": "a_b_2",
        "a_b": "a_b",
        "a:b": "a_b_3",
        "9lives": "9lives",
        LONG: LONG[:55] + "_" + _digest(LONG),
        LONG + "y": LONG[:55] + "_" + _digest(LONG + "y"),
    }
    assert all(openai.original(openai.safe(t)) == t for t in tools)
    gemini = NameMap(tools, GEMINI_NAMES)
    assert gemini.safe("9lives") == "_9lives" and gemini.original("_9lives") == "9lives"
    mcp = NameMap(tools, MCP_NAMES)
    assert (mcp.safe("a.b"), mcp.safe("a:b"), mcp.safe(LONG)) == ("a.b", "a_b_2", LONG)
    assert openai.original("unknown") == "unknown"
    # The same names whatever the order the tools are listed in.
    assert NameMap(reversed(tools), OPENAI_NAMES).renamed() == openai.renamed()


# --- calls in, results back ----------------------------------------------------------

ARGS = {"query": "milk", "limit": None}


def ok(call_id: str, name: str, output: str) -> ToolResult:
    return ToolResult(
        ok=True,
        status="ok",
        output=output,
        error=None,
        exit_code=0,
        stderr="",
        duration_ms=1.0,
        tool_call_id=call_id,
        tool_name=name,
    )


def failed(call_id: str, name: str) -> ToolResult:
    return ToolResult(
        ok=False,
        status="error",
        output="partial",
        error=f"Tool call '{name}' exited with code 1: ValueError: no",
        exit_code=1,
        stderr="",
        duration_ms=1.0,
        tool_call_id=call_id,
        tool_name=name,
        reason="tool_failed",
    )


OPENAI_CALLS = [
    {"id": "call_1", "type": "function", "function": {"name": "notes_search", "arguments": json.dumps(ARGS)}},
    {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
]
RESPONSES_ITEMS = [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "notes_search", "arguments": json.dumps(ARGS)},
    {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
]
ANTHROPIC_BLOCKS = [
    {"type": "text", "text": "Let me look."},
    {"type": "tool_use", "id": "toolu_1", "name": "notes_search", "input": ARGS},
    {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
]
GEMINI_PARTS = [
    {"text": "Looking."},
    {"functionCall": {"id": "fc-1", "name": "notes_search", "args": ARGS}},
    {"functionCall": {"name": "get_time", "args": {}}},
]
SHAPES: dict[str, dict[str, Any]] = {
    "openai": {
        "list": OPENAI_CALLS,
        "message": {"role": "assistant", "content": None, "tool_calls": OPENAI_CALLS},
        "response": {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "tool_calls": OPENAI_CALLS}, "finish_reason": "tool_calls"}
            ],
        },
    },
    "responses": {
        "list": RESPONSES_ITEMS,
        "response": {"id": "resp_1", "object": "response", "output": RESPONSES_ITEMS},
    },
    "anthropic": {
        "list": ANTHROPIC_BLOCKS,
        "message": {"role": "assistant", "content": ANTHROPIC_BLOCKS},
        "response": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": ANTHROPIC_BLOCKS,
            "stop_reason": "tool_use",
        },
    },
    "gemini": {
        "list": GEMINI_PARTS,
        "content": {"role": "model", "parts": GEMINI_PARTS},
        "response": {"candidates": [{"content": {"role": "model", "parts": GEMINI_PARTS}, "finishReason": "STOP"}]},
    },
}


@pytest.mark.parametrize("provider", list(SHAPES))
def test_call_and_result_shapes_golden(provider: str, update_goldens: bool) -> None:
    names = Names(t.name for t in TOOLS)
    seen = {}
    for shape, data in SHAPES[provider].items():
        batch = parse_batch(data, names=names)
        assert batch.provider == provider
        assert parse_batch(data, provider, names=names) == batch
        answers = [
            ok(c.call_id or "gen-1", c.name, "3 notes") if c.name == "notes.search" else failed(c.call_id or "gen-2", c.name)
            for c in batch.calls
        ]
        seen[shape] = {
            "calls": [{"name": c.name, "arguments": c.arguments, "call_id": c.call_id} for c in batch.calls],
            "answer": render(batch, batch.complete(answers)),
        }
    golden(f"calls-{provider}.json", seen, update_goldens)


def test_what_is_no_shape_lists_the_accepted_ones() -> None:
    with pytest.raises(BadRequest) as refused:
        parse_batch({"calls": []})
    assert str(refused.value) == (
        "expected tool calls in one of these shapes: "
        "anthropic: a list of content blocks holding tool_use blocks, or a message (or response) whose content holds them; "
        "responses: a list of output items holding function_call items, or a response whose 'output' holds them; "
        "gemini: a list of parts holding functionCall parts, a content with 'parts', a response with 'candidates', "
        "or the SDK's function_calls list; "
        "openai: a list of tool_calls, {'tool_calls': [...]}, an assistant message carrying them, or a response with 'choices'"
    )


def test_a_malformed_call_fails_alone_in_every_shape() -> None:
    cases = {
        "responses": [{"type": "function_call", "call_id": "c1"}, RESPONSES_ITEMS[2]],
        "gemini": [{"functionCall": {"args": {}}}, GEMINI_PARTS[2]],
    }
    for provider, data in cases.items():
        batch = parse_batch(data)
        assert (batch.provider, [type(e).__name__ for e in batch.entries]) == (provider, ["ToolResult", "ToolCall"])
    assert parse_batch(cases["responses"]).entries[0].error == "function_call item 0: expected a 'name'"  # type: ignore[union-attr]
    assert parse_batch(cases["gemini"]).entries[0].error == "functionCall part 0: expected {'name': …, 'args': {…}}"  # type: ignore[union-attr]


def test_format_tool_result_in_every_shape() -> None:
    names = Names(t.name for t in TOOLS)
    good, bad = ok("c1", "notes.search", "3 notes"), failed("c2", "shop:order")
    assert [
        format_tool_result(r, f, names=names) for f in ("openai", "responses", "anthropic", "gemini", "mcp") for r in (good, bad)
    ] == [
        {"role": "tool", "tool_call_id": "c1", "content": "3 notes"},
        {"role": "tool", "tool_call_id": "c2", "content": "Tool call 'shop:order' exited with code 1: ValueError: no\npartial"},
        {"type": "function_call_output", "call_id": "c1", "output": "3 notes"},
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": "Tool call 'shop:order' exited with code 1: ValueError: no\npartial",
        },
        {"type": "tool_result", "tool_use_id": "c1", "content": "3 notes", "is_error": False},
        {
            "type": "tool_result",
            "tool_use_id": "c2",
            "content": "Tool call 'shop:order' exited with code 1: ValueError: no\npartial",
            "is_error": True,
        },
        {"functionResponse": {"name": "notes_search", "id": "c1", "response": {"output": "3 notes"}}},
        {
            "functionResponse": {
                "name": "shop_order",
                "id": "c2",
                "response": {"error": "Tool call 'shop:order' exited with code 1: ValueError: no\npartial"},
            }
        },
        {"content": [{"type": "text", "text": "3 notes"}], "isError": False},
        {
            "content": [{"type": "text", "text": "Tool call 'shop:order' exited with code 1: ValueError: no\npartial"}],
            "isError": True,
        },
    ]
    assert format_tool_result(good, "gemini")["functionResponse"]["name"] == "notes_search"  # coerced on its own
    assert format_tool_result_as_text(good) == "3 notes"
    assert format_tool_result_as_text(bad) == "[Tool Error] Tool call 'shop:order' exited with code 1: ValueError: no\npartial"
    with pytest.raises(BadRequest, match="unknown provider 'bard'"):
        format_tool_result(good, "bard")


def test_null_for_an_optional_parameter_is_absent() -> None:
    schema = TOOLS[2].parameters
    sent = {
        "customer": {"name": "Ada", "email": None},
        "items": [{"sku": "a1", "quantity": None}, {"sku": "b2", "quantity": 2}],
        "priority": None,
        "gift": None,
    }
    assert drop_optional_nulls(schema, sent) == {
        "customer": {"name": "Ada"},
        "items": [{"sku": "a1"}, {"sku": "b2", "quantity": 2}],
    }
    # A parameter that accepts null keeps it; a required one is left for validation to refuse.
    assert drop_optional_nulls(TOOLS[1].parameters, {"query": None, "since": None, "limit": None}) == {
        "query": None,
        "since": None,
    }


def test_toolcall_names_from_a_batch_are_the_tools_own() -> None:
    names = Names(t.name for t in TOOLS)
    batch = parse_batch([{"type": "tool_use", "id": "t", "name": LONG[:55] + "_" + _digest(LONG), "input": {}}], names=names)
    assert batch.calls == [ToolCall(name=LONG, arguments={}, call_id="t")]
