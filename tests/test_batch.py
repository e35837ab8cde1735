"""toolexec call: provider-shaped batches in, matching tool results out, in order, concurrently."""

from __future__ import annotations

import json

from tests.conftest import Project, toolexec

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
        "toolexec: the batch on stdin is empty: expected OpenAI tool_calls or Anthropic tool_use blocks as JSON\n",
    )
    wrong_shape = toolexec("--config", config, "call", input='{"calls": 1}')
    assert (wrong_shape.returncode, wrong_shape.stderr) == (
        2,
        "toolexec: expected a list of OpenAI tool_calls or Anthropic tool_use blocks, or a message holding them\n",
    )
    no_function = toolexec("--config", config, "call", input='[{"id": "x"}]')
    assert no_function.returncode == 2 and "tool call 0: expected" in no_function.stderr
