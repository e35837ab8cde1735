"""Pieces of the HTTP front of ``toolexec mcp --http`` (:mod:`toolexec.mcp_http`) tested on their own; the front as
a whole is tested against the real server in test_hostile_mcp.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("uvicorn")

from toolexec.mcp_http import Coalescing


class Transport:
    """What the coalescing transport hands its writes to."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.paused = 0

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.paused += 1


def test_the_writes_of_one_turn_of_the_loop_leave_in_one_send() -> None:
    async def scenario() -> tuple[list[bytes], list[bytes]]:
        inner = Transport()
        outer = Coalescing(inner, asyncio.get_running_loop())
        outer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        outer.write(bytearray(b"5\r\nhello\r\n"))
        outer.write(b"0\r\n\r\n")
        before = list(inner.writes)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        outer.write(b"next")
        await asyncio.sleep(0)
        return before, inner.writes

    before, after = asyncio.run(scenario())
    assert before == []
    assert after == [b"HTTP/1.1 200 OK\r\n\r\n5\r\nhello\r\n0\r\n\r\n", b"next"]


def test_closing_sends_what_is_pending_first_and_nothing_is_written_after() -> None:
    async def scenario() -> Transport:
        inner = Transport()
        outer = Coalescing(inner, asyncio.get_running_loop())
        outer.write(b"last words")
        outer.close()
        outer.write(b"too late")
        await asyncio.sleep(0)
        return inner

    inner = asyncio.run(scenario())
    assert (inner.writes, inner.closed) == ([b"last words"], True)


def test_everything_else_is_the_transports_own() -> None:
    inner: Any = Transport()
    outer: Any = Coalescing(inner, asyncio.new_event_loop())
    try:
        outer.pause_reading()
        assert inner.paused == 1 and outer.is_closing() is False
    finally:
        outer._loop.close()
