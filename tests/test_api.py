"""The Python API: sync and async calls, cancellation that ends the tool's tree, concurrent use."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.test_process_tree import ESCAPES, alive, read_pid
from toolexec.runtimes.process import Cancellation


def wait_for(path: Path) -> None:
    while not path.exists():
        threading.Event().wait(0.005)


@pytest.mark.usefixtures("process_backend")
def test_cancel_a_sync_call_from_another_thread(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    executor = project.executor()
    pid_file = project.root / "functions" / "cache" / "escapes" / "escaped.pid"
    cancel = Cancellation()
    canceller = threading.Thread(target=lambda: (wait_for(pid_file.with_suffix(".pid.ready")), cancel.cancel()))
    canceller.start()
    result = executor.call("escapes", {}, cancel=cancel)
    canceller.join()
    cancel.close()
    assert (result.status, result.exit_code, result.tool_call_error) == ("cancelled", 130, "Tool call 'escapes' was cancelled")
    assert result.output == "partial output\n"
    assert not alive(read_pid(pid_file))


@pytest.mark.usefixtures("process_backend")
def test_cancelling_an_async_task_ends_the_tree(project: Project) -> None:
    project.tool("escapes.py", ESCAPES)
    executor = project.executor()
    pid_file = project.root / "functions" / "cache" / "escapes" / "escaped.pid"

    async def scenario() -> None:
        task = asyncio.ensure_future(executor.acall("escapes", {}))
        while not pid_file.with_suffix(".pid.ready").exists():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert not alive(read_pid(pid_file))


def test_async_calls_run_together(project: Project) -> None:
    project.tool("add.py", 'def run(a: int) -> int:\n    """Add one."""\n    return a + 1\n')
    executor = project.executor()

    async def scenario() -> list[str]:
        results = await asyncio.gather(*(executor.acall("add", {"a": n}) for n in range(6)))
        return [r.output for r in results]

    assert asyncio.run(scenario()) == ["1", "2", "3", "4", "5", "6"]


@pytest.mark.parametrize("timeout", [True, "5", 0, -0.5])
def test_a_per_call_timeout_must_be_a_positive_number(project: Project, timeout: object) -> None:
    project.tool("add.py", 'def run(a: int) -> int:\n    """Add one."""\n    return a + 1\n')
    result = project.executor().call("add", {"a": 1}, timeout=timeout)  # type: ignore[arg-type]
    assert (result.status, result.exit_code, result.error) == (
        "refused",
        2,
        f"timeout must be a positive number of seconds, got {timeout!r}",
    )
