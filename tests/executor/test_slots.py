"""The one limiter (:class:`toolexec.calls.Slots`): slots handed over in arrival order, one waiter woken per slot freed.

Counts, not time: which tickets are granted after each release, and how often each waiter was woken.
"""

from __future__ import annotations

import threading

from tests.helpers import wait_until
from toolexec.calls import Slots, Ticket
from toolexec.runtimes.process import CallControl


class Waker:
    """A ticket's ``wake``: counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1


def queue(slots: Slots, count: int) -> list[tuple[Ticket, Waker]]:
    made = []
    for _ in range(count):
        waker = Waker()
        made.append((slots.enqueue(waker), waker))
    return made


def test_a_freed_slot_goes_to_the_first_waiter_and_wakes_it_alone() -> None:
    slots = Slots(2)
    tickets = queue(slots, 6)
    assert [t.granted for t, _ in tickets] == [True, True, False, False, False, False]
    slots.release()
    assert [t.granted for t, _ in tickets] == [True, True, True, False, False, False]
    assert [w.calls for _, w in tickets] == [0, 0, 1, 0, 0, 0]
    slots.release()
    slots.release()
    assert [t.granted for t, _ in tickets] == [True, True, True, True, True, False]
    assert [w.calls for _, w in tickets] == [0, 0, 1, 1, 1, 0]
    assert slots.running == 2  # a slot handed over is never counted free in between


def test_a_waiter_that_gives_up_leaves_the_queue_and_a_granted_one_passes_its_slot_on() -> None:
    slots = Slots(1)
    _, (second, _), (third, third_waker), (fourth, fourth_waker) = queue(slots, 4)
    slots.give_up(second)  # still waiting: out of the queue
    slots.release()  # first's slot goes to third, not to second
    assert (second.granted, third.granted, third_waker.calls) == (False, True, 1)
    slots.give_up(third)  # granted meanwhile (cancelled as it was handed over): the slot goes on
    assert (fourth.granted, fourth_waker.calls, slots.running) == (True, 1, 1)
    slots.release()
    assert slots.running == 0
    assert slots.enqueue(Waker()).granted  # free again, and nobody waits


def test_a_thread_waiting_for_a_slot_is_cancelled_without_taking_one() -> None:
    slots = Slots(1)
    assert slots.take(CallControl())
    control = CallControl()
    outcome: list[bool] = []
    waiter = threading.Thread(target=lambda: outcome.append(slots.take(control)))
    waiter.start()
    wait_until(lambda: len(slots._waiting) == 1, "the thread to queue")
    control.cancel()
    waiter.join(30)
    assert (outcome, slots.running, len(slots._waiting)) == ([False], 1, 0)
    control.close()


def test_threads_take_the_slots_in_arrival_order() -> None:
    slots = Slots(1)
    assert slots.take(CallControl())
    order: list[int] = []
    controls = [CallControl() for _ in range(5)]

    def take(n: int) -> None:
        assert slots.take(controls[n])
        order.append(n)
        slots.release()

    threads = []
    for n in range(5):  # each queued before the next starts
        threads.append(threading.Thread(target=take, args=(n,)))
        threads[-1].start()
        wait_until(lambda n=n: len(slots._waiting) == n + 1, "the thread to queue")
    slots.release()
    for thread in threads:
        thread.join(30)
    assert (order, slots.running) == ([0, 1, 2, 3, 4], 0)
    for control in controls:
        control.close()
