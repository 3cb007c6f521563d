"""What :class:`Calls` tells the in-flight limit when a call comes back "busy".

A refusal of this worker's own call is a drop (the downstream's capacity is below what it
sends); a call held back because the fleet is held after *another* worker's refusal is a
hold (grow no further); a call held back for a local reason (a rate-limit slot, no free
connection) tells the limit nothing. In every case the message is parked, never failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from sentinel_platform.streams.consumer.calling.concurrency_limit import FixedLimit
from sentinel_platform.streams.consumer.calling.in_flight import Calls
from sentinel_platform.streams.consumer.calling.intake import read_ahead
from sentinel_platform.streams.consumer.outcomes import Commit, Delivery, Failure, Outcome, Prepared
from sentinel_platform.streams.consumer.processor import Busy, Effect, waited_for_turn
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.limits.fleet_limits import FleetBusy, FleetHeld


class RecordingLimit(FixedLimit):
    def __init__(self) -> None:
        super().__init__(4)
        self.told: list[str] = []
        self.samples: list[float] = []

    def on_sample(self, rtt_s: float, in_flight: int) -> None:
        self.samples.append(rtt_s)

    def on_drop(self, in_flight: int, rtt_s: float) -> None:
        self.told.append("drop")

    def on_hold(self) -> None:
        self.told.append("hold")


@pytest.mark.parametrize(
    ("busy", "told"),
    [
        (Busy(0.01, "429 from the analyzer"), ["drop"]),
        (FleetHeld(0.01, "held: another worker was refused"), ["hold"]),
        (FleetBusy(0.01, "rate limit: next slot in 1.5s"), []),
    ],
)
def test_a_busy_call_is_parked_and_tells_the_limit_what_it_means(
    busy: Busy, told: list[str]
) -> None:
    answers = [busy]  # the first call is busy, the next one answers

    def call(prepared: Prepared) -> Outcome:
        if answers:
            raise answers.pop()
        return Failure(prepared.delivery, "answered")

    limit = RecordingLimit()
    parked: list[float] = []
    calls = Calls(
        call,
        lambda p, e: Failure(p.delivery, repr(e)),
        limit,
        4,
        threading.Event(),
        lambda _p, after: parked.append(after),
    )
    calls.submit([Prepared(Delivery("1-0", {}, 1), None, "k1")])
    results: list[Outcome] = []

    def answered() -> bool:
        calls.resubmit_due(time.monotonic())
        results.extend(calls.collect(0.02))
        return bool(results)

    wait_until(answered, 5, what="the call after the busy one")
    assert [r.error for r in results if isinstance(r, Failure)] == ["answered"]
    assert parked == [pytest.approx(0.01)]
    assert limit.told == told
    calls.settle_running(time.monotonic())


def test_a_wait_for_a_rate_limit_slot_is_not_the_calls_latency() -> None:
    """A call that waits 0.3 s for its fleet rate-limit slot, then 0.05 s at the service:
    the limit's sample is the 0.05 s (a wait for a slot is no queue at the service; with
    it counted, the limit cut itself below what the rate needs in flight)."""

    def call(prepared: Prepared) -> Outcome:
        waited_for_turn(0.3)
        time.sleep(0.35)
        return Failure(prepared.delivery, "answered")

    limit = RecordingLimit()
    calls = Calls(
        call,
        lambda p, e: Failure(p.delivery, repr(e)),
        limit,
        4,
        threading.Event(),
        lambda *_: None,
    )
    calls.submit([Prepared(Delivery("1-0", {}, 1), None, "k1")])
    results: list[Outcome] = []

    def answered() -> bool:
        results.extend(calls.collect(0.05))
        return bool(results)

    wait_until(answered, 5, what="the answer")
    assert len(limit.samples) == 1 and 0.04 <= limit.samples[0] < 0.2, limit.samples
    calls.settle_running(time.monotonic())


def answer_with(sample: bool, seconds: float) -> Callable[[Prepared], Outcome]:
    """A call that takes ``seconds`` and commits an effect saying whether it timed the
    downstream (``Effect.sample``)."""

    def call(prepared: Prepared) -> Outcome:
        time.sleep(seconds)
        effect = Effect(prepared.natural_key, {"v": "1"}, sample=sample)
        return Commit(prepared.delivery, prepared.natural_key, effect)

    return call


@pytest.mark.parametrize(("sample", "samples"), [(True, 1), (False, 0)])
def test_only_a_call_that_timed_the_downstream_is_the_limits_sample(
    sample: bool, samples: int
) -> None:
    """A rules fallback (the analyzer down, its breaker open) commits in a millisecond:
    fed to the limit it would read as the service's no-load latency."""
    limit = RecordingLimit()
    calls = Calls(
        answer_with(sample, 0.01),
        lambda p, e: Failure(p.delivery, repr(e)),
        limit,
        4,
        threading.Event(),
        lambda *_: None,
    )
    calls.submit([Prepared(Delivery("1-0", {}, 1), None, "k1")])
    results: list[Outcome] = []
    wait_until(lambda: results.extend(calls.collect(0.05)) or results, 5, what="the answer")
    assert [type(r) for r in results] == [Commit]
    assert len(limit.samples) == samples
    assert calls._mean_latency_s is not None, "every call sizes the runs"
    calls.settle_running(time.monotonic())


SLOW = 0.1


def test_the_holding_a_worker_publishes_counts_its_read_ahead() -> None:
    calls = Calls(
        lambda p: Failure(p.delivery, "x"),
        lambda p, e: Failure(p.delivery, repr(e)),
        FixedLimit(32),
        32,
        threading.Event(),
        lambda *_: None,
    )
    calls._learn([SLOW], [SLOW], 1)  # a slow call measured
    assert calls.capacity(100) == 32 + read_ahead(32, 100, SLOW) == 48


def test_the_holding_never_falls_below_the_messages_in_hand_after_a_cut() -> None:
    """Ten calls refused (429): the limit collapses to 1 while the ten wait parked, pending
    on this worker. Published as 1, nine of them would read as pressure to the zones."""

    def refuse(prepared: Prepared) -> Outcome:
        raise Busy(5.0, "429 from the analyzer")

    limit = RecordingLimit()
    limit._limit = 10
    calls = Calls(
        refuse,
        lambda p, e: Failure(p.delivery, repr(e)),
        limit,
        10,
        threading.Event(),
        lambda *_: None,
    )
    calls._learn([SLOW], [SLOW], 1)  # slow calls: runs of one
    calls.submit([Prepared(Delivery(f"{i}-0", {}, 1), None, f"k{i}") for i in range(10)])
    wait_until(lambda: calls.collect(0.05) or not calls.running, 5, what="every call refused")
    assert limit.told == ["drop"] * 10 and calls.held() == 10
    limit._limit = 1  # what the burst of drops left
    assert calls.capacity(100) == 10, "what it holds, not the 1 of its limit"
    calls.settle_running(time.monotonic())


class Waiting(Busy):
    """The downstream is down and the message waits for it (``AnalyzerWaiting``)."""

    sent = False


def test_an_answer_calls_at_once_the_messages_parked_on_a_backoff_of_our_own() -> None:
    """Through an outage the messages park on a doubling backoff (to 5 s), a guess of our
    own; once a call is answered again they go at once (waiting out the guess, a worker
    made no call for seconds after the analyzer was back). A delay the downstream gave
    (``Retry-After``) is kept."""
    down = threading.Event()
    down.set()

    def call(prepared: Prepared) -> Outcome:
        if prepared.natural_key == "told":
            raise Busy(30.0, "429 with Retry-After: 30")
        if down.is_set():
            raise Waiting(None, "waiting for the analyzer: HTTP 500")
        return Commit(prepared.delivery, prepared.natural_key, Effect(prepared.natural_key, {}))

    calls = Calls(
        call,
        lambda p, e: Failure(p.delivery, repr(e)),
        RecordingLimit(),
        4,
        threading.Event(),
        lambda *_: None,
    )
    keys = ["told", *(f"k{i}" for i in range(8))]
    calls.submit([Prepared(Delivery(f"{i}-0", {}, 1), None, k) for i, k in enumerate(keys)])
    wait_until(lambda: calls.collect(0.05) or not calls.running, 5, what="every call parked")
    assert calls.held() == len(keys) and calls.next_due_in(time.monotonic()) is not None
    wait_until(lambda: calls.next_due_in(time.monotonic()) == 0, 5, what="the first due")
    down.clear()  # the analyzer answers again
    results: list[Outcome] = []

    def first_answer() -> bool:
        calls.resubmit_due(time.monotonic())
        results.extend(calls.collect(0.05))
        return bool(results)

    wait_until(first_answer, 5, what="the first answer")
    calls.resubmit_due(time.monotonic())
    wait_until(lambda: results.extend(calls.collect(0.05)) or not calls.running, 5, what="calls")
    assert len(results) == len(keys) - 1, "every message waiting for the analyzer was called"
    assert calls.held() == 1 and calls.next_due_in(time.monotonic()) > 20  # the Retry-After
    calls.settle_running(time.monotonic())
