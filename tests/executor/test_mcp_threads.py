"""The MCP server's own call threads (toolexec.mcp_threads): results, errors, context, the bound, cancellation, and
no thread left behind."""

from __future__ import annotations

import contextvars
import threading

import anyio
import pytest

from toolexec import mcp_threads
from toolexec.mcp_threads import CallThreads

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def calls_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "toolexec-call"}


def test_a_result_an_error_and_the_callers_context_come_back_and_the_thread_is_reused() -> None:
    before = calls_threads()

    async def main() -> tuple[object, ...]:
        pool, limiter = CallThreads(), anyio.CapacityLimiter(4)
        WHO.set("the caller")
        seen = await pool.run(lambda: (WHO.get(), threading.current_thread().name), limiter)
        first = calls_threads() - before
        with pytest.raises(ZeroDivisionError):
            await pool.run(lambda: 1 // 0, limiter)
        again = await pool.run(threading.current_thread, limiter)
        idle = len(pool)
        pool.close()
        return seen, first, again, idle, limiter.borrowed_tokens

    seen, first, again, idle, borrowed = anyio.run(main)
    assert seen == ("the caller", "toolexec-call")
    assert len(first) == 1 and {again} == first  # one thread, reused by every call
    assert (idle, borrowed) == (1, 0)
    for thread in first:
        thread.join(10)
    assert calls_threads() - before == set()


def test_with_no_thread_free_under_the_bound_a_call_waits_for_one() -> None:
    before = calls_threads()

    async def main() -> list[str]:
        pool, limiter = CallThreads(), anyio.CapacityLimiter(1)
        order: list[str] = []
        release = threading.Event()

        def first() -> None:
            release.wait(10)
            order.append("first")

        async with anyio.create_task_group() as group:
            group.start_soon(pool.run, first, limiter)
            await anyio.wait_all_tasks_blocked()
            assert limiter.borrowed_tokens == 1
            group.start_soon(pool.run, lambda: order.append("second"), limiter)
            await anyio.wait_all_tasks_blocked()
            assert order == []  # the second waits for the first's thread
            release.set()
        pool.close()
        return order

    assert anyio.run(main) == ["first", "second"]
    for thread in calls_threads() - before:
        thread.join(10)
    assert calls_threads() - before == set()


def test_a_cancelled_caller_stops_waiting_and_its_thread_ends_after_the_call() -> None:
    before = calls_threads()
    started, release, ended = threading.Event(), threading.Event(), threading.Event()

    def call() -> str:
        started.set()
        release.wait(10)
        ended.set()
        return "late"

    async def main() -> bool:
        pool, limiter = CallThreads(), anyio.CapacityLimiter(2)
        with anyio.move_on_after(30) as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(pool.run, call, limiter)
                await anyio.to_thread.run_sync(started.wait, 10)
                group.cancel_scope.cancel()
        pool.close()  # the busy thread ends once its call is over
        return scope.cancelled_caught or limiter.borrowed_tokens != 0

    assert anyio.run(main) is False  # not the 30 s bound: cancelled at once, the limiter let go
    assert not ended.is_set()
    release.set()
    for thread in calls_threads() - before:
        thread.join(10)
    assert ended.is_set() and calls_threads() - before == set()


def test_an_idle_thread_ends_by_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_threads, "IDLE_SECONDS", 0.05)
    before = calls_threads()

    async def main() -> set[threading.Thread]:
        pool = CallThreads()
        await pool.run(lambda: None, anyio.CapacityLimiter(1))
        return calls_threads() - before

    made = anyio.run(main)
    assert len(made) == 1
    for thread in made:
        thread.join(10)
    assert calls_threads() - before == set()


def test_once_closed_calls_still_run() -> None:
    async def main() -> str:
        pool = CallThreads()
        pool.close()
        return await pool.run(lambda: "ran", anyio.CapacityLimiter(1))

    before = calls_threads()
    assert anyio.run(main) == "ran"
    assert calls_threads() - before == set()  # (anyio's worker ran it)
