"""Work done after a call, off its path (:class:`toolexec.runtimes.chores.Chores`): in order, on one thread that waits a
little for more before it ends, drained at close; a forked child does its own."""

from __future__ import annotations

import threading

from tests.helpers import in_forked_child
from toolexec.runtimes.chores import Chores


def test_chores_are_done_in_order_on_one_thread_which_drain_ends() -> None:
    chores = Chores("test-chores", linger=30.0)
    done: list[tuple[int, str]] = []
    go = threading.Event()
    chores.add(lambda: go.wait(10))  # the first holds the thread: the others queue behind it
    for number in range(3):
        chores.add(lambda number=number: done.append((number, threading.current_thread().name)))
    assert (done, chores.idle()) == ([], False)  # add returned before any was done
    go.set()
    assert chores.drain(10)
    assert done == [(0, "test-chores"), (1, "test-chores"), (2, "test-chores")]
    assert (chores.idle(), chores._thread, [t.name for t in threading.enumerate() if t.name == "test-chores"]) == (
        True,
        None,
        [],
    )


def test_the_thread_waits_for_more_before_it_ends_and_a_failing_chore_does_not_end_it() -> None:
    chores = Chores("test-lingering", linger=30.0)
    seen: list[int] = []

    def fail() -> None:
        raise OSError("gone")

    chores.add(fail)
    chores.add(lambda: seen.append(threading.get_ident()))
    first = threading.Event()
    chores.add(first.set)
    assert first.wait(10)
    thread = chores._thread
    chores.add(lambda: seen.append(threading.get_ident()))  # within the linger: the same thread does it
    assert chores.drain(10)
    assert thread is not None and seen == [thread.ident, thread.ident]
    assert chores._thread is None


def test_a_thread_that_waited_long_enough_ends_and_the_next_chore_starts_another() -> None:
    chores = Chores("test-short", linger=0.0)
    ended = threading.Event()
    chores.add(ended.set)
    assert ended.wait(10)
    first = chores._thread
    if first is not None:
        first.join(10)
    assert chores._thread is None
    again = threading.Event()
    chores.add(again.set)
    assert again.wait(10) and chores.drain(10)


def test_a_forked_child_does_its_own_chores() -> None:
    chores = Chores("test-forked", linger=30.0)
    held = threading.Event()
    chores.add(lambda: held.wait(10))  # the parent's thread is busy (and its lock may be taken) at the fork

    def child() -> tuple[bool, list[str]]:
        done: list[str] = []
        chores.add(lambda: done.append(threading.current_thread().name))
        return chores.drain(10), done

    said = in_forked_child(child)
    held.set()
    assert chores.drain(10)
    assert said == repr((True, ["test-forked"]))
