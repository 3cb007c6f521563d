"""The hang watchdog's view of the messages in hand: time a call spends waiting for its
turn (a fleet rate-limit slot, reported with ``waited_for_turn``) is not time in hand."""

from __future__ import annotations

import threading
import time

import pytest

from sentinel_platform.streams.consumer.healing.watchdog import HangWatchdog, InHand
from sentinel_platform.streams.consumer.processor import take_turn_wait, waited_for_turn


def in_hand_on_a_thread(in_hand: InHand, message_id: str, turn_wait_s: float) -> threading.Event:
    """Take ``message_id`` on a thread of its own that reports ``turn_wait_s`` and keeps
    it until the returned event is set."""
    taken, done = threading.Event(), threading.Event()

    def call() -> None:
        in_hand.take(message_id)
        waited_for_turn(turn_wait_s)
        taken.set()
        done.wait(10)
        in_hand.drop()
        take_turn_wait()

    threading.Thread(target=call, daemon=True).start()
    assert taken.wait(10)
    return done


@pytest.mark.parametrize(
    ("turn_wait_s", "hung"),
    [(0.0, True), (30.0, False)],  # held 0.3 s with a 0.2 s limit; a 30 s turn is not a call
)
def test_a_wait_for_a_turn_is_not_time_in_hand(turn_wait_s: float, hung: bool) -> None:
    in_hand = InHand()
    exits: list[int] = []
    watchdog = HangWatchdog(in_hand, 1_000, lambda: None, {}, exits.append)
    watchdog.hang_timeout_s = 0.2
    done = in_hand_on_a_thread(in_hand, "1-0", turn_wait_s)
    try:
        time.sleep(0.3)  # the message's time in hand: the clock must move past the limit
        watchdog.check()
    finally:
        done.set()
    assert bool(exits) is hung


def test_the_turn_wait_is_taken_once_per_call_and_is_per_thread() -> None:
    take_turn_wait()  # a wait an earlier test of this process left on this thread
    waited_for_turn(1.5)
    waited_for_turn(0.5)
    assert take_turn_wait() == 2.0
    assert take_turn_wait() == 0.0
