"""The Python API: sync and async calls, cancellation that ends the tool's tree, the one limiter, close()."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import pytest

from tests.conftest import Project, toolexec
from tests.helpers import ESCAPES, RECORDER, alive, max_overlap, read_pid, wait_until
from toolexec import Executor
from toolexec.records import ToolCall, ToolResult
from toolexec.runtimes.process import CallControl

CLOSED = "the executor is closed; create a new Executor to call tools"


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
@pytest.mark.usefixtures("process_backend")
def test_cancel_a_sync_call_from_another_thread(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    executor = project.executor()
    pid_file = project.root / "functions" / "cache" / "escapes" / "escaped.pid"
    cancel = CallControl()

    def cancel_when_ready() -> None:
        wait_until(pid_file.with_suffix(".pid.ready").exists, "the tool to be ready")
        cancel.cancel()

    canceller = threading.Thread(target=cancel_when_ready)
    canceller.start()
    result = executor.call("escapes", {}, cancel=cancel)
    canceller.join()
    cancel.close()
    assert (result.status, result.exit_code, result.tool_call_error) == ("cancelled", 130, "Tool call 'escapes' was cancelled")
    assert result.output == "partial output\n"
    assert not alive(read_pid(pid_file))


INTERRUPTED = """
import os, signal, sys, threading, time
from toolexec import Executor

ready = sys.argv[2]

def interrupt() -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
with Executor(sys.argv[1]) as ex:
    try:
        ex.call("escapes", {})
    except KeyboardInterrupt:
        try:  # the escaped grandchild: gone, or a zombie at most
            with open(f"/proc/{open(ready[:-6]).read()}/stat") as stat:
                ended = stat.read().rsplit(")", 1)[1].split()[0] in "ZX"
        except FileNotFoundError:
            ended = True
        print("interrupted once the tool had ended:", ended)
"""


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
@pytest.mark.usefixtures("process_backend")
def test_an_interrupted_call_ends_the_tree_then_raises(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    pid_file = project.root / "functions" / "cache" / "escapes" / "escaped.pid"
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, str(project.configure()), str(pid_file.with_suffix(".pid.ready"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, "interrupted once the tool had ended: True\n"), done.stderr
    assert not alive(read_pid(pid_file))


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
@pytest.mark.usefixtures("process_backend")
def test_cancelling_an_async_task_ends_the_tree(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    executor = project.executor()
    pid_file = project.root / "functions" / "cache" / "escapes" / "escaped.pid"

    async def scenario() -> None:
        task = asyncio.ensure_future(executor.acall("escapes", {}))
        await asyncio.to_thread(wait_until, pid_file.with_suffix(".pid.ready").exists, "the tool to be ready")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert not alive(read_pid(pid_file))


def test_async_calls_run_together(project: Project) -> None:
    """Each call waits until all four have started: calls run one after another come back 'alone'."""
    project.tool("recorder.py", RECORDER)
    executor = project.executor(max_parallel=4)

    async def scenario() -> list[str]:
        results = await asyncio.gather(*(executor.acall("recorder", {"n": n, "expect": 4}) for n in range(4)))
        return [r.output for r in results]

    assert asyncio.run(scenario()) == ["0: together", "1: together", "2: together", "3: together"]


def run_through(entry: str, project: Project, calls: int, expect: int) -> list[str]:
    """Outputs of ``calls`` recorder calls made through ``entry``, in input order."""
    arguments = [{"n": n, "expect": expect} for n in range(calls)]
    # Executor(project.config): the config the test wrote (project.executor() would rewrite it with defaults)
    if entry == "call_many":
        results = Executor(project.config).call_many([ToolCall(name="recorder", arguments=a) for a in arguments])
        return [r.output for r in results]
    if entry == "acall":
        executor = Executor(project.config)

        async def scenario() -> list[ToolResult]:
            return await asyncio.gather(*(executor.acall("recorder", a) for a in arguments))

        return [r.output for r in asyncio.run(scenario())]
    batch = [
        {"id": f"c{n}", "type": "function", "function": {"name": "recorder", "arguments": a}} for n, a in enumerate(arguments)
    ]
    done = toolexec("--config", str(project.config), "call", input=json.dumps(batch))
    assert (done.returncode, done.stderr) == (0, "")
    return [message["content"] for message in json.loads(done.stdout)]


@pytest.mark.parametrize("entry", ["call_many", "acall", "toolexec call"])
@pytest.mark.parametrize("max_parallel", [3, 8])
def test_exactly_max_parallel_calls_run_at_once(project: Project, entry: str, max_parallel: int) -> None:
    """From the tools' own start/end records: never more than max_parallel at once, and max_parallel together.

    8 is more than asyncio's default thread pool holds on a 2-core machine (6).
    """
    project.tool("recorder.py", RECORDER)
    project.configure(max_parallel=max_parallel)
    calls = max_parallel + 2
    outputs = run_through(entry, project, calls, expect=max_parallel)
    assert outputs == [f"{n}: together" for n in range(calls)]
    assert max_overlap(project.root / "functions" / "cache" / "recorder") == max_parallel


def test_calls_from_threads_and_a_batch_share_one_limit(project: Project) -> None:
    project.tool("recorder.py", RECORDER)
    executor = project.executor(max_parallel=3)
    results: list[ToolResult] = []
    single = threading.Thread(target=lambda: results.append(executor.call("recorder", {"n": 9, "expect": 3})))
    single.start()
    batch = executor.call_many([ToolCall(name="recorder", arguments={"n": n, "expect": 3}) for n in range(4)])
    single.join()
    assert [r.output for r in [*batch, *results]] == [f"{n}: together" for n in (0, 1, 2, 3, 9)]
    assert max_overlap(project.root / "functions" / "cache" / "recorder") == 3


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
def test_closing_cancels_calls_in_flight_and_refuses_later_calls(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    project.tool("add.py", 'def run(a: int) -> int:\n    """Add one."""\n    return a + 1\n')
    pid_file = project.root / "functions" / "cache" / "escapes" / "escaped.pid"
    results: list[ToolResult] = []
    with project.executor(max_parallel=1) as executor:
        batch = [
            ToolCall(name="escapes", arguments={}, call_id="running"),
            ToolCall(name="add", arguments={"a": 1}, call_id="queued"),
        ]
        caller = threading.Thread(target=lambda: results.extend(executor.call_many(batch)))
        caller.start()
        wait_until(pid_file.with_suffix(".pid.ready").exists, "the tool to be ready")
    caller.join()
    running, queued = results
    assert (running.status, running.exit_code, running.tool_call_error, running.output) == (
        "cancelled",
        130,
        "Tool call 'escapes' was cancelled",
        "partial output\n",
    )
    assert not alive(read_pid(pid_file))
    assert queued.to_dict() == {
        "ok": False,
        "status": "cancelled",
        "output": "",
        "error": "the call was cancelled before it started",
        "exit_code": 130,
        "stderr": "",
        "duration_ms": 0.0,
        "tool_call_id": "queued",
        "tool_name": "add",
        "signal": None,
        "tool_call_error": "Tool call 'add' was cancelled",
        "notes": [],
        "output_file": None,
        "stderr_file": None,
        "reason": "cancelled",
    }
    later = [
        executor.call("add", {"a": 1}, call_id="x"),
        *executor.call_many([ToolCall(name="add", arguments={"a": 1}, call_id="x")]),
        asyncio.run(executor.acall("add", {"a": 1}, call_id="x")),
    ]
    for refused in later:
        assert (refused.status, refused.exit_code, refused.error, refused.tool_call_error, refused.reason) == (
            "refused",
            2,
            CLOSED,
            f"Tool call 'add' failed: {CLOSED}",
            "bad_request",
        )
    executor.close()  # twice is harmless


@pytest.mark.usefixtures("unconfined")  # its tools write their process ids: those of the host
def test_close_cancels_an_async_call(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    executor = project.executor()
    pid_file = project.root / "functions" / "cache" / "escapes" / "escaped.pid"

    async def scenario() -> ToolResult:
        task = asyncio.ensure_future(executor.acall("escapes", {}))
        await asyncio.to_thread(wait_until, pid_file.with_suffix(".pid.ready").exists, "the tool to be ready")
        await asyncio.to_thread(executor.close)
        return await task

    result = asyncio.run(scenario())
    assert (result.status, result.exit_code, result.output) == ("cancelled", 130, "partial output\n")
    assert not alive(read_pid(pid_file))


@pytest.mark.parametrize("timeout", [True, "5", 0, -0.5])
def test_a_per_call_timeout_must_be_a_positive_number(project: Project, timeout: object) -> None:
    project.tool("add.py", 'def run(a: int) -> int:\n    """Add one."""\n    return a + 1\n')
    result = project.executor().call("add", {"a": 1}, timeout=timeout)  # type: ignore[arg-type]
    assert (result.status, result.exit_code, result.error) == (
        "refused",
        2,
        f"timeout must be a positive number of seconds, got {timeout!r}",
    )


def test_a_call_control_dropped_unclosed_leaves_no_descriptor(project: Project) -> None:
    """The usual use of a :class:`CallControl` is one per call, made and dropped (the MCP server's, a caller's event
    callback): its wake-up pipe goes with it, not at the end of the process (nor with the garbage collector)."""
    import gc
    import os

    project.tool("echo.sh", '# @describe Echo.\nmain() { printf ok >>"$LLM_OUTPUT"; }\n')
    # sandbox off: no sandbox is set up ahead of the next call, whose descriptors would come and go meanwhile
    with project.executor(sandbox="off") as executor:
        assert executor.call("echo", {}).output == "ok"
        descriptors = sorted(os.listdir("/proc/self/fd"))
        gc.disable()
        try:
            for _ in range(3):
                events: list[dict] = []
                result = executor.call("echo", {}, cancel=CallControl(on_event=events.append))
                assert (result.output, events[0]["event"]) == ("ok", "started")
            unused = CallControl()
            del unused
            assert sorted(os.listdir("/proc/self/fd")) == descriptors
        finally:
            gc.enable()
