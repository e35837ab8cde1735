"""Clients of MCP tasks for the tests, one per era, and a Redis server on loopback.

* :class:`TasksExtension`: the 2026-07-28 ``io.modelcontextprotocol/tasks`` extension as an SDK ``ClientExtension``
  (what a real client plugs in): it declares the extension, claims ``resultType: "task"`` and resolves a task by
  polling ``tasks/get`` until it ends, so ``Client.call_tool`` returns the final ``CallToolResult``.
* :class:`LegacySession`: a 2025-11-25 client speaking JSON-RPC over one of the SDK's transports (the SDK's own
  client has no 2025-11-25 task support): ``initialize``, then any request.
* :func:`redis_server`: Debian's ``redis-server`` started on a free loopback port, stopped afterwards.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from pydantic import ConfigDict, TypeAdapter

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = {"completed", "failed", "cancelled"}
ANY = TypeAdapter(dict[str, Any])


class CreatedTask(types.Result):
    """``CreateTaskResult`` (2026-07-28): a task handle in lieu of the call's result."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None


class TaskIdParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


async def get_task(session: Any, task_id: str) -> dict[str, Any]:
    """``tasks/get`` of the 2026 wire."""
    return await session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), ANY)  # type: ignore[no-any-return]


async def cancel_task(session: Any, task_id: str) -> dict[str, Any]:
    """``tasks/cancel`` of the 2026 wire."""
    return await session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), ANY)  # type: ignore[no-any-return]


async def poll(session: Any, task_id: str, timeout: float = 60) -> dict[str, Any]:
    """``tasks/get`` until the task ends, at the interval it suggests."""
    with anyio.fail_after(timeout):
        while True:
            task = await get_task(session, task_id)
            if task["status"] in TERMINAL:
                return task
            await anyio.sleep(task.get("pollIntervalMs", 500) / 1000)


class TasksExtension(ClientExtension):
    """The client side of the 2026-07-28 tasks extension; ``created`` lists the task ids it resolved."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.created: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created.task_id)
        task = await poll(ctx.session, created.task_id)
        if task["status"] != "completed":
            error = task.get("error") or {}
            raise MCPError(error.get("code", -32603), task.get("statusMessage") or task["status"], data=task)
        return types.CallToolResult.model_validate(task["result"])


class LegacySession:
    """A 2025-11-25 client over SDK transport streams: ``await request(method, params)`` → result (or MCPError)."""

    def __init__(self, read: Any, write: Any) -> None:
        self.read, self.write = read, write
        self.ids = itertools.count(1)
        self.notifications: list[dict[str, Any]] = []

    async def initialize(self) -> dict[str, Any]:
        result = await self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {}}, "clientInfo": {"name": "tests", "version": "0"}},
        )
        await self.write.send(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")))
        return result

    async def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> dict[str, Any]:
        ident = next(self.ids)
        await self.write.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=ident, method=method, params=params)))
        with anyio.fail_after(timeout):
            async for message in self.read:
                if isinstance(message, Exception):
                    raise message
                answer = message.message
                if isinstance(answer, JSONRPCNotification):
                    self.notifications.append(answer.model_dump())
                elif isinstance(answer, JSONRPCResponse) and answer.id == ident:
                    return answer.result
                elif isinstance(answer, JSONRPCError) and answer.id == ident:
                    raise MCPError(answer.error.code, answer.error.message, answer.error.data)
        raise AssertionError(f"the server closed before answering {method}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    """``redis-server`` on a free loopback port, with no persistence; its URL. Stopped (and waited for) afterwards."""
    program = shutil.which("redis-server")
    if program is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing: `make test` installs Debian's redis-server")
        pytest.skip("redis-server is not installed (`make .venv/.redis` installs it)")
    pytest.importorskip("redis")
    port = free_port()
    args = [program, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(directory)]
    log = directory / "redis.log"
    with log.open("wb") as out:
        server = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if server.poll() is not None:
                raise AssertionError(f"redis-server exited with {server.returncode}: {log.read_text()[-2000:]}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise AssertionError("redis-server does not listen after 30 s")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=30)
