"""MCP tasks over stdio, in both eras: a task tool's call returns a handle at once, the client polls it to its
result, a cancel ends the tool's whole process tree, a timeout fails the task with the reason, a tool that requires
a task refuses a client without task support, and one client never sees another's task.

The 2026-07-28 client is the SDK's ``Client`` with the tasks extension plugged in (tests/executor/tasks_client.py);
the 2025-11-25 client speaks JSON-RPC over the SDK's stdio transport (the SDK has no client for that era's tasks).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from tests.conftest import Project
from tests.helpers import alive, host_pids

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tests.executor.tasks_client import EXTENSION, LegacySession, TasksExtension, cancel_task, get_task, poll

pytestmark = pytest.mark.slow
WAIT = 60.0

SLOW = '''
import time

def run(seconds: float) -> str:
    """Sleep, then say so.

    Task: optional

    Args:
        seconds: How long to sleep.
    """
    time.sleep(seconds)
    return f"slept {seconds}"
'''
TREE = '''
import os, subprocess, time

def run(pid_file: str) -> str:
    """Run a long while with a grandchild; record both pids.

    Task: required

    Args:
        pid_file: Where to write the pids.
    """
    child = subprocess.Popen(["sleep", "300"])
    with open(pid_file + ".tmp", "w") as out:
        out.write(f"{os.readlink('/proc/self/ns/pid')} {os.getpid()} {child.pid}")
    os.rename(pid_file + ".tmp", pid_file)
    time.sleep(300)
    return "woke"
'''
BRIEF = """#!/usr/bin/env bash
# @describe Outlive its time limit.
# @meta task optional
# @meta timeout 1
main() {
    sleep 30
}
eval "$(argc --argc-eval "$0" "$@")"
"""
STAGES = '''
import json, os, time

def run(go: str) -> str:
    """Report being half way, wait for the go file, finish.

    Task: optional

    Args:
        go: The file that lets it finish.
    """
    with open(os.environ["LLM_PROGRESS"], "a") as out:
        out.write(json.dumps({"progress": 1, "total": 2, "message": "half way"}) + "\\n")
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.02)
    return "done"
'''
PLAIN = '''
def run() -> str:
    """Answer at once (no task)."""
    return "plain"
'''


@pytest.fixture
def tasks(project: Project) -> Project:
    project.tool("slow.py", SLOW)
    project.tool("tree.py", TREE)
    project.tool("brief.sh", BRIEF)
    project.tool("plain.py", PLAIN)
    project.tool("stages.py", STAGES)
    project.configure(["slow.py", "tree.py", "brief.sh", "plain.py", "stages.py"])
    return project


def with_store(project: Project, spec: str, **settings: Any) -> Path:
    """A config beside the project's with ``mcp.task_store: spec`` (and other ``mcp`` settings); its path."""
    config = yaml.safe_load(project.config.read_text())
    config["functions_dir"] = str(project.root / config.get("functions_dir", "functions"))
    config["mcp"] = {"task_store": spec, **settings}
    path = project.root / f"config-{abs(hash(spec))}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def params(config: Path, cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "toolexec", "--config", str(config), "mcp"], env=dict(os.environ), cwd=str(cwd)
    )


@asynccontextmanager
async def modern(
    project: Project, *, tasks: bool = True, config: Path | None = None
) -> AsyncIterator[tuple[Client, TasksExtension]]:
    extension = TasksExtension()
    transport = stdio_client(params(config or project.config, project.root))
    async with Client(transport, mode="2026-07-28", extensions=[extension] if tasks else []) as client:
        yield client, extension


@asynccontextmanager
async def legacy(project: Project, config: Path | None = None) -> AsyncIterator[LegacySession]:
    async with stdio_client(params(config or project.config, project.root)) as (read, write):
        session = LegacySession(read, write)
        await session.initialize()
        yield session


def text(result: dict[str, Any] | types.CallToolResult) -> str:
    content = result.content if isinstance(result, types.CallToolResult) else types.CallToolResult.model_validate(result).content
    return "".join(c.text for c in content if isinstance(c, types.TextContent))


async def read_pids(path: Path) -> list[int]:
    with anyio.fail_after(WAIT):
        while not (path.exists() and path.read_text()):
            await anyio.sleep(0.02)
    namespace, *pids = path.read_text().split()  # the tool's, which may be a PID namespace of its own (the baseline)
    return host_pids(namespace, [int(pid) for pid in pids])


async def gone(pids: list[int]) -> None:
    """Every process is gone (read from /proc), within the bound."""
    with anyio.fail_after(WAIT):
        while any(alive(pid) for pid in pids):
            await anyio.sleep(0.02)


def test_a_2026_client_gets_a_task_and_polls_it_to_the_result(tasks: Project) -> None:
    async def scenario() -> None:
        async with modern(tasks) as (client, extension):
            result = await client.call_tool("slow", {"seconds": 0.2})
            assert (text(result), result.is_error) == ("slept 0.2", False)
            assert len(extension.created) == 1  # it came back as a task handle, resolved by polling
            assert text(await client.call_tool("plain", {})) == "plain"
            assert len(extension.created) == 1  # a tool that declares no task answers at once

    anyio.run(scenario)


def test_a_2026_cancel_ends_the_tools_whole_tree(tasks: Project, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"

    async def scenario() -> None:
        async with modern(tasks) as (client, _):
            created = await client.session.call_tool("tree", {"pid_file": str(pid_file)}, allow_claimed=True)
            assert created.result_type == "task" and created.status == "working"
            assert created.ttl_ms is not None and created.ttl_ms > 0 and created.poll_interval_ms
            pids = await read_pids(pid_file)
            assert all(alive(pid) for pid in pids)
            working = await get_task(client.session, created.task_id)
            assert (working["status"], working["resultType"]) == ("working", "complete")
            assert await cancel_task(client.session, created.task_id) == {"resultType": "complete", "_meta": working["_meta"]}
            ended = await poll(client.session, created.task_id)
            assert ended["status"] == "cancelled" and "result" not in ended
            await gone(pids)
            again = await client.call_tool("slow", {"seconds": 0})  # the server serves on
            assert text(again) == "slept 0"

    anyio.run(scenario)


def test_a_timeout_fails_the_task_with_the_reason(tasks: Project) -> None:
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], MCPError]:
        async with modern(tasks) as (client, _):
            created = await client.session.call_tool("brief", {}, allow_claimed=True)
            failed_2026 = await poll(client.session, created.task_id)
        async with legacy(tasks) as session:
            handle = await session.request("tools/call", {"name": "brief", "arguments": {}, "task": {"ttl": 60000}})
            with pytest.raises(MCPError) as raised:
                await session.request("tasks/result", {"taskId": handle["task"]["taskId"]})
            failed_2025 = await session.request("tasks/get", {"taskId": handle["task"]["taskId"]})
        return failed_2026, failed_2025, raised.value

    failed_2026, failed_2025, error = anyio.run(scenario)
    reason = "Tool call 'brief' timed out after 1s"
    assert (failed_2026["status"], failed_2026["statusMessage"]) == ("failed", reason)
    assert failed_2026["error"] == {"code": types.REQUEST_TIMEOUT, "message": reason}
    assert (failed_2025["status"], failed_2025["statusMessage"]) == ("failed", reason)
    assert (error.code, error.message) == (types.REQUEST_TIMEOUT, reason)


def test_a_required_task_tool_refuses_a_client_without_task_support(tasks: Project, tmp_path: Path) -> None:
    async def scenario() -> tuple[MCPError, MCPError, str, str]:
        async with modern(tasks, tasks=False) as (client, _):
            with pytest.raises(MCPError) as modern_refusal:
                await client.call_tool("tree", {"pid_file": str(tmp_path / "never")})
            optional = text(await client.call_tool("slow", {"seconds": 0}))  # optional: an ordinary call then
        async with legacy(tasks) as session:
            with pytest.raises(MCPError) as legacy_refusal:
                await session.request("tools/call", {"name": "tree", "arguments": {"pid_file": str(tmp_path / "never")}})
            plain = text(await session.request("tools/call", {"name": "slow", "arguments": {"seconds": 0}}))
        return modern_refusal.value, legacy_refusal.value, optional, plain

    refused_2026, refused_2025, optional, plain = anyio.run(scenario)
    assert (refused_2026.code, refused_2026.message) == (
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"tool 'tree' runs only as a task: declare the {EXTENSION} extension in the request's client capabilities",
    )
    assert refused_2026.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    assert (refused_2025.code, refused_2025.message) == (
        types.METHOD_NOT_FOUND,
        "tool 'tree' runs only as a task (its taskSupport is required): send tools/call with a 'task' field",
    )
    assert (optional, plain) == ("slept 0", "slept 0")
    assert not (tmp_path / "never").exists()


def test_a_2025_client_runs_polls_fetches_lists_and_cancels_tasks(tasks: Project, tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"

    async def scenario() -> None:
        async with legacy(tasks) as session:
            listed = {tool["name"]: tool.get("execution") for tool in (await session.request("tools/list"))["tools"]}
            assert listed == {
                "slow": {"taskSupport": "optional"},
                "tree": {"taskSupport": "required"},
                "brief": {"taskSupport": "optional"},
                "plain": None,
                "stages": {"taskSupport": "optional"},
            }
            created = await session.request("tools/call", {"name": "slow", "arguments": {"seconds": 0.2}, "task": {"ttl": 60000}})
            task = created["task"]
            assert set(task) == {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}
            assert task["status"] == "working" and task["ttl"] >= 60000
            result = await session.request("tasks/result", {"taskId": task["taskId"]})
            assert text(result) == "slept 0.2"
            assert result["_meta"] == {"io.modelcontextprotocol/related-task": {"taskId": task["taskId"]}}
            done = await session.request("tasks/get", {"taskId": task["taskId"]})
            assert (done["status"], done["taskId"]) == ("completed", task["taskId"])

            started = (
                await session.request("tools/call", {"name": "tree", "arguments": {"pid_file": str(pid_file)}, "task": {}})
            )["task"]
            pids = await read_pids(pid_file)
            listing = await session.request("tasks/list")
            assert [(t["taskId"], t["status"]) for t in listing["tasks"]] == [
                (task["taskId"], "completed"),
                (started["taskId"], "working"),
            ]
            answered = await session.request("tasks/cancel", {"taskId": started["taskId"]})
            assert answered["taskId"] == started["taskId"]
            await gone(pids)
            with anyio.fail_after(WAIT):
                while (await session.request("tasks/get", {"taskId": started["taskId"]}))["status"] != "cancelled":
                    await anyio.sleep(0.05)
            with pytest.raises(MCPError) as twice:
                await session.request("tasks/cancel", {"taskId": started["taskId"]})
            assert (twice.value.code, twice.value.message) == (
                types.INVALID_PARAMS,
                "Cannot cancel task: already in terminal status 'cancelled'",
            )
            with pytest.raises(MCPError) as forbidden:
                await session.request("tools/call", {"name": "plain", "arguments": {}, "task": {}})
            assert forbidden.value.code == types.METHOD_NOT_FOUND

    anyio.run(scenario)


def test_the_handshake_advertises_tasks_in_each_era(tasks: Project) -> None:
    async def scenario() -> tuple[dict[str, Any], Any]:
        async with legacy(tasks) as session:
            init = await session.request(
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "again", "version": "0"}},
            )
        async with modern(tasks) as (client, _):
            discovered = await client.session.send_discover("2026-07-28")  # the client in a fixed mode skips it
        return init["capabilities"], discovered["capabilities"]

    legacy_caps, modern_caps = anyio.run(scenario)
    assert legacy_caps["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert modern_caps["extensions"] == {EXTENSION: {}}
    assert "tasks" not in modern_caps  # the 2026 wire has tasks as the extension only


def test_a_task_of_another_client_does_not_exist_for_it(tasks: Project, tmp_path: Path) -> None:
    """Two stdio servers (two clients) sharing one store: neither sees, cancels nor fetches the other's task, and ids
    that are not task ids (paths, huge, empty) are simply not found."""
    config = with_store(tasks, f"dir:{tmp_path / 'shared'}")
    pid_file = tmp_path / "pids"

    async def scenario() -> None:
        async with legacy(tasks, config) as owner, legacy(tasks, config) as other:
            started = (await owner.request("tools/call", {"name": "tree", "arguments": {"pid_file": str(pid_file)}, "task": {}}))[
                "task"
            ]
            pids = await read_pids(pid_file)
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                for task_id in (started["taskId"], "../../../../etc/passwd", "x" * 5000, "", "task:" + started["taskId"]):
                    with pytest.raises(MCPError) as refused:
                        await other.request(method, {"taskId": task_id})
                    assert refused.value.code == types.INVALID_PARAMS, (method, task_id)
                    assert "Task not found" in refused.value.message
            assert (await other.request("tasks/list"))["tasks"] == []
            assert all(alive(pid) for pid in pids)  # the other client's cancel did nothing
            assert (await owner.request("tasks/get", {"taskId": started["taskId"]}))["status"] == "working"
            await owner.request("tasks/cancel", {"taskId": started["taskId"]})
            await gone(pids)

    anyio.run(scenario)


def test_stopping_the_server_ends_its_tasks_and_says_so(tasks: Project, tmp_path: Path) -> None:
    """A stdio server whose client goes away ends its running tasks (trees killed), and the task's record, read
    straight from the store, says why it failed."""
    config = with_store(tasks, f"dir:{tmp_path / 'shared'}")
    pid_file = tmp_path / "pids"

    async def scenario() -> list[int]:
        async with legacy(tasks, config) as owner:
            await owner.request("tools/call", {"name": "tree", "arguments": {"pid_file": str(pid_file)}, "task": {}})
            return await read_pids(pid_file)

    pids = anyio.run(scenario)

    async def wait_gone() -> None:
        await gone(pids)

    anyio.run(wait_gone)
    from toolexec.store.dirstore import DirStore

    store = DirStore(tmp_path / "shared")
    (key,) = store.keys("task:")
    record = store.get(key)
    assert record is not None
    assert (record["status"], record["message"]) == (
        "failed",
        "toolexec mcp stopped before the task ended; its processes were ended; start the call again",
    )


def test_an_unreachable_store_is_an_internal_error_that_names_no_server_detail(tasks: Project, tmp_path: Path) -> None:
    from tests.executor.tasks_client import free_port

    pytest.importorskip("redis")
    config = with_store(tasks, f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    log = tmp_path / "server.log"

    async def scenario() -> tuple[MCPError, str]:
        with log.open("w") as errors:
            async with stdio_client(params(config, tasks.root), errlog=errors) as (read, write):
                session = LegacySession(read, write)
                await session.initialize()
                with pytest.raises(MCPError) as refused:
                    await session.request("tools/call", {"name": "slow", "arguments": {"seconds": 0}, "task": {}})
                plain = text(await session.request("tools/call", {"name": "slow", "arguments": {"seconds": 0}}))
        return refused.value, plain

    refused, plain = anyio.run(scenario)
    assert (refused.code, refused.message, refused.data) == (
        types.INTERNAL_ERROR,
        "the task store is unavailable; try again later",
        None,
    )
    assert plain == "slept 0"  # calls that are not tasks are served as ever
    assert "the task store redis://127.0.0.1:" in log.read_text() and "ConnectionError" in log.read_text()


def test_describe_and_the_mcp_declarations_show_task_support(tasks: Project) -> None:
    from tests.conftest import toolexec

    described = toolexec("--config", str(tasks.config), "describe", "tree")
    assert described.returncode == 0, described.stderr
    assert "Task: required (MCP clients run it as a task)" in described.stdout.splitlines()
    optional = toolexec("--config", str(tasks.config), "describe", "slow").stdout.splitlines()
    assert "Task: optional (an MCP client may run it as a task)" in optional
    assert not [
        line
        for line in toolexec("--config", str(tasks.config), "describe", "plain").stdout.splitlines()
        if line.startswith("Task")
    ]
    declared = toolexec("--config", str(tasks.config), "declarations", "--format", "mcp")
    execution = {tool["name"]: tool.get("execution") for tool in json.loads(declared.stdout)}
    assert execution == {
        "slow": {"taskSupport": "optional"},
        "tree": {"taskSupport": "required"},
        "brief": {"taskSupport": "optional"},
        "plain": None,
        "stages": {"taskSupport": "optional"},
    }


def test_malformed_task_requests_are_refused_as_invalid_params(tasks: Project) -> None:
    async def scenario() -> list[tuple[int, str]]:
        refusals = []
        async with legacy(tasks) as session:
            for task in ("soon", 3, ["ttl"], True):
                with pytest.raises(MCPError) as refused:
                    await session.request("tools/call", {"name": "slow", "arguments": {"seconds": 0}, "task": task})
                refusals.append((refused.value.code, refused.value.message))
            for ttl in (-5, 0, "60000", 10**30, True, None):  # a ttl it cannot use: the default applies
                created = await session.request("tools/call", {"name": "slow", "arguments": {"seconds": 0}, "task": {"ttl": ttl}})
                assert 3600 * 1000 <= created["task"]["ttl"] <= (3600 + 60) * 1000
            with pytest.raises(MCPError) as bad_arguments:
                await session.request("tools/call", {"name": "slow", "arguments": [1], "task": {}})
            refusals.append((bad_arguments.value.code, bad_arguments.value.message))
            invalid = await session.request("tools/call", {"name": "slow", "arguments": {"seconds": "x"}, "task": {}})
            assert invalid["isError"] is True and "task" not in invalid  # refused at once, never a task
            with pytest.raises(MCPError) as unknown:
                await session.request("tools/call", {"name": "slwo", "arguments": {}, "task": {}})
            refusals.append((unknown.value.code, unknown.value.message))
        return refusals

    refusals = anyio.run(scenario)
    assert [code for code, _ in refusals] == [types.INVALID_PARAMS] * 6
    assert refusals[-1][1] == "unknown tool 'slwo'; did you mean 'slow'?"


def test_a_task_is_kept_for_its_time_limit_and_task_ttl_then_gone(tasks: Project, tmp_path: Path) -> None:
    config = with_store(tasks, f"dir:{tmp_path / 'kept'}", task_ttl=1)

    async def scenario() -> None:
        async with legacy(tasks, config) as session:
            created = (await session.request("tools/call", {"name": "brief", "arguments": {}, "task": {}}))["task"]
            assert created["ttl"] == 2000  # the tool's timeout (1 s) and mcp.task_ttl (1 s)
            with anyio.fail_after(WAIT):
                while True:
                    try:
                        await session.request("tasks/get", {"taskId": created["taskId"]})
                    except MCPError as gone:
                        assert (gone.code, gone.message) == (
                            types.INVALID_PARAMS,
                            "Failed to retrieve task: Task not found (it never existed, has expired, or belongs to another client)",
                        )
                        break
                    await anyio.sleep(0.1)

    anyio.run(scenario)


def test_a_working_tasks_status_message_is_the_tools_progress(tasks: Project, tmp_path: Path) -> None:
    go = tmp_path / "go"

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with modern(tasks) as (client, _):
            created = await client.session.call_tool("stages", {"go": str(go)}, allow_claimed=True)
            with anyio.fail_after(WAIT):
                while (working := await get_task(client.session, created.task_id)).get("statusMessage") is None:
                    await anyio.sleep(0.05)
            go.touch()
            return working, await poll(client.session, created.task_id)

    working, done = anyio.run(scenario)
    assert (working["status"], working["statusMessage"]) == ("working", "1/2 half way")
    assert (done["status"], done.get("statusMessage"), text(done["result"])) == ("completed", None, "done")
