"""Which messages the shadow is asked about, and what its verdict records."""

from __future__ import annotations

import threading
import time

import pytest

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, shadow_results_key
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer import Assessment, Usage
from workers.analyzer.lanes.shadow import (
    GATE_TURN_S,
    TURN_MAX_S,
    Job,
    ShadowAnalyzer,
    chosen,
    turn_wait,
)
from workers.analyzer.lanes.shadow_record import shadow_entry
from workers.analyzer.limits.fleet_limits import FleetBusy

KEYS = [f"txn-{i}" for i in range(10_000)]


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.1, 0.5, 0.9, 1.0])
def test_the_fraction_chosen_is_the_setting(fraction: float) -> None:
    share = sum(chosen(key, fraction) for key in KEYS) / len(KEYS)
    assert share == pytest.approx(fraction, abs=0.015)


@pytest.mark.parametrize(("key", "fraction"), [("t-1", 0.5), ("t-2", 0.5), ("s|2026", 0.3)])
def test_a_message_is_chosen_alike_every_time(key: str, fraction: float) -> None:
    assert len({chosen(key, fraction) for _ in range(5)}) == 1


def test_a_smaller_fraction_chooses_a_subset_of_a_larger_one() -> None:
    small = {k for k in KEYS if chosen(k, 0.1)}
    assert small <= {k for k in KEYS if chosen(k, 0.3)}


@pytest.mark.parametrize(
    ("results", "shadow"),
    [
        ("sentinel:verdicts", "sentinel:verdicts:shadow"),
        ("{sentinel:transactions}:verdicts", "{sentinel:transactions}:verdicts:shadow"),
    ],
)
def test_the_shadow_stream_is_named_after_the_results(results: str, shadow: str) -> None:
    keys = StreamKeys("s", "g", "d", results, "l", "p", "lease:", "done:", "c")
    assert shadow_results_key(keys) == shadow


def test_a_shadow_entry_names_the_message_its_truth_and_what_the_model_said() -> None:
    txn = Transaction.model_validate({**BASE, "id": "t-7", "is_threat": True})
    verdict = Assessment(False, "low", "fine", "m2", "v2", Usage(10, 5))
    entry = shadow_entry(txn, verdict)
    assert {k: entry[k] for k in ("shadow_of", "txn_id", "label", "analyzer_role")} == {
        "shadow_of": "t-7",
        "txn_id": "t-7",
        "label": "true",
        "analyzer_role": "shadow",
    }
    assert (entry["model"], entry["prompt_version"], entry["input_tokens"]) == ("m2", "v2", "10")
    assert (entry["is_threat"], entry["risk_level"]) == ("false", "low")


@pytest.mark.parametrize(
    ("stamp", "day"),
    [("2026-11-21T23:59:59Z", "2026-11-21"), ("2026-11-22T01:00:00+03:00", "2026-11-21")],
)
def test_a_shadow_entry_carries_the_data_day_as_the_live_verdict_does(stamp: str, day: str) -> None:
    """The quality asset reads a shadow verdict into its message's daily partition."""
    verdict = Assessment(False, "low", "fine", "m2", "v2", Usage(10, 5))
    txn = Transaction.model_validate({**BASE, "id": "t-8", "timestamp": stamp})
    axiom = Axiom.model_validate(
        {
            "status": "nominal",
            "metric_value": 1,
            "anomaly_score": 0.1,
            "source_id": "s",
            "emitted_at": stamp,
        }
    )
    assert shadow_entry(txn, verdict)["day"] == day
    assert shadow_entry(axiom, verdict)["day"] == day


class Fixed:
    def __init__(self) -> None:
        self.calls = 0

    def assess_transaction(self, txn: Transaction) -> Assessment:
        self.calls += 1
        return Assessment(True, "high", "live", "m1")

    def assess_axiom(self, axiom: object) -> Assessment:
        raise NotImplementedError


class Blocked:
    """A shadow whose calls run until :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def assess_transaction(self, txn: Transaction) -> Assessment:
        self.calls += 1
        self.release.wait(10)
        return Assessment(False, "low", "shadow", "s1")

    def assess_axiom(self, axiom: object) -> Assessment:
        raise NotImplementedError


def bound_lane(lane: ShadowAnalyzer, client: RedisClient) -> Metrics:
    """``lane`` bound as a worker binds it (its pool open), and its metrics."""
    metrics = Metrics(labels={"stream": "s", "group": "g", "consumer": "c"})
    lane.bind_keys(StreamKeys("s", "g", "d", "sentinel:verdicts", "l", "p", "lease:", "done:", "c"))
    lane.bind_metrics(metrics)
    lane.bind_redis(client)
    return metrics


def test_a_full_pool_drops_and_counts_and_the_live_verdict_is_unchanged(
    redis_client: RedisClient,
) -> None:
    live, trial = Fixed(), Blocked()
    lane = ShadowAnalyzer(live, trial, 1.0, deadline_s=5.0, threads=1, queue_size=0)
    metrics = bound_lane(lane, redis_client)
    try:
        txn = Transaction.model_validate(BASE)
        verdicts = [lane.assess_transaction(txn) for _ in range(3)]
        assert all(v.narrative == "live" for v in verdicts) and live.calls == 3
        assert lane.dropped["queue_full"] == 2
        snapshot = metrics.snapshot()
        assert (snapshot["shadow_dropped_queue_full"], snapshot["shadow_dropped_late"]) == (2, 0)
        trial.release.set()
        wait_until(lambda: lane.written == 1, what="the one job taken written")
    finally:
        trial.release.set()
        lane.close()
    assert trial.calls == 1


def test_a_stale_job_is_dropped_without_asking_the_shadow() -> None:
    trial = Fixed()
    lane = ShadowAnalyzer(Fixed(), trial, 1.0, deadline_s=0.5)
    metrics = Metrics(labels={"stream": "transactions"})
    lane.bind_metrics(metrics)
    lane._handle(Job(Transaction.model_validate(BASE), time.monotonic() - 1.0))
    assert lane.dropped["late"] == 1 and trial.calls == 0
    assert metrics.snapshot()["shadow_dropped_late"] == 1


class Scripted:
    """An analyzer answering each call with the next of ``answers`` (an exception is
    raised), then a verdict."""

    def __init__(self, *answers: BaseException) -> None:
        self.answers = list(answers)
        self.calls = 0

    def assess_transaction(self, txn: Transaction) -> Assessment:
        self.calls += 1
        if self.answers:
            raise self.answers.pop(0)
        return Assessment(True, "high", "live", "m1")

    def assess_axiom(self, axiom: object) -> Assessment:
        raise NotImplementedError


@pytest.mark.parametrize(
    ("live_answers", "offered"),
    [
        ((), 1),  # answered: offered once
        ((Busy(1.0, "429"),), 1),  # busy, then answered on its next call: once
        ((Busy(None, "held"), Busy(0.1, "429")), 1),
        ((RuntimeError("down"),), 1),  # failed (the rules decide): offered all the same
    ],
)
def test_the_shadow_is_offered_a_message_once_when_its_live_call_is_done(
    redis_client: RedisClient, live_answers: tuple[BaseException, ...], offered: int
) -> None:
    live, trial = Scripted(*live_answers), Fixed()
    lane = ShadowAnalyzer(live, trial, 1.0, deadline_s=5.0)
    bound_lane(lane, redis_client)
    txn = Transaction.model_validate(BASE)
    try:
        for answer in live_answers:
            with pytest.raises(type(answer)):
                lane.assess_transaction(txn)  # the live path calls again after busy
            assert trial.calls == 0 or not isinstance(answer, Busy)
        if not live_answers or isinstance(live_answers[-1], Busy):
            assert lane.assess_transaction(txn).narrative == "live"
        wait_until(lambda: lane.written == offered, what="the shadow's verdict written")
    finally:
        lane.close()
    assert trial.calls == offered and not lane.dropped


@pytest.mark.parametrize(
    ("sent", "retry_after_s", "left_s", "wait_s"),
    [
        (False, None, 5.0, GATE_TURN_S),  # the first call is out: take a turn
        (False, 0.3, 5.0, 0.3),  # no rate slot yet
        (False, TURN_MAX_S + 0.1, 60.0, None),  # a long hold: dropped, no thread waits
        (False, 0.5, 0.4, None),  # the job would be stale by then
        (True, 0.1, 5.0, None),  # the shadow itself refused: its verdict is dropped
    ],
)
def test_only_a_short_turn_is_waited_for(
    sent: bool, retry_after_s: float | None, left_s: float, wait_s: float | None
) -> None:
    assert turn_wait(sent, retry_after_s, left_s) == wait_s


def test_a_shadow_call_handed_back_as_a_turn_is_made_again(redis_client: RedisClient) -> None:
    turn = FleetBusy(0.05, "the fleet's first call is out")
    trial = Scripted(turn, turn)
    lane = ShadowAnalyzer(Fixed(), trial, 1.0, deadline_s=5.0)
    bound_lane(lane, redis_client)
    try:
        lane.assess_transaction(Transaction.model_validate(BASE))
        wait_until(lambda: lane.written == 1, what="the verdict after two turns")
    finally:
        lane.close()
    assert trial.calls == 3 and not lane.dropped


class Labelled:
    """A shadow that says threat about every message, as model s1 with prompt p9."""

    def assess_transaction(self, txn: Transaction) -> Assessment:
        return Assessment(True, "high", "shadow", "s1", "p9", role="shadow")

    def assess_axiom(self, axiom: object) -> Assessment:
        raise NotImplementedError


def test_a_shadow_verdict_written_is_counted_with_role_shadow(redis_client: RedisClient) -> None:
    """Through a real Redis: the lane writes the verdict and counts it in the worker's
    outcome counter, apart from the live model's."""
    keys = StreamKeys("s", "g", "d", "sentinel:verdicts", "l", "p", "lease:", "done:", "c")
    metrics = Metrics(labels={"stream": "s", "group": "g", "consumer": "c"})
    lane = ShadowAnalyzer(Fixed(), Labelled(), 1.0, deadline_s=5.0)
    lane.bind_keys(keys)
    lane.bind_metrics(metrics)
    lane.bind_redis(redis_client)
    try:
        for i, threat in enumerate((True, False)):
            txn = Transaction.model_validate({**BASE, "id": f"t-{i}", "is_threat": threat})
            lane.assess_transaction(txn)
        wait_until(lambda: lane.written == 2, what="both shadow verdicts written")
    finally:
        lane.close()
    assert redis_client.xlen(shadow_results_key(keys)) == 2
    counted = {
        (sample.labels["role"], sample.labels["model"], sample.labels["outcome"]): sample.value
        for metric in metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "sentinel_worker_verdict_outcomes_total"
    }
    assert counted == {("shadow", "s1", "tp"): 1.0, ("shadow", "s1", "fp"): 1.0}
