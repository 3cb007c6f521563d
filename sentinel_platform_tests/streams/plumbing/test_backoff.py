"""Backoff of every retry loop: bounded after any number of attempts, and jittered."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.outages import BACKOFF_CAP_S, BACKOFF_START_S
from sentinel_platform.streams.plumbing.backoff import Backoff, backoff_delay


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [
        (1, 0.05, 0.1),
        (2, 0.1, 0.2),
        (3, 0.2, 0.4),
        (6, 1.6, 3.2),
        (7, 2.5, 5.0),
        (50, 2.5, 5.0),
        (1024, 2.5, 5.0),
        (1025, 2.5, 5.0),  # about 85 minutes into an outage
        (5000, 2.5, 5.0),
        (10**9, 2.5, 5.0),
    ],
)
def test_delay_is_between_half_and_all_of_the_capped_exponential(
    attempt: int, low: float, high: float
) -> None:
    delays = [backoff_delay(attempt, BACKOFF_START_S, BACKOFF_CAP_S) for _ in range(200)]
    assert all(low <= delay <= high for delay in delays)


@pytest.mark.parametrize("attempt", [1, 7, 5000])
def test_delays_are_jittered_so_workers_do_not_retry_in_lockstep(attempt: int) -> None:
    delays = {backoff_delay(attempt, BACKOFF_START_S, BACKOFF_CAP_S) for _ in range(50)}
    assert len(delays) > 40


def test_a_backoff_counts_attempts_through_a_long_outage_and_resets() -> None:
    backoff = Backoff(BACKOFF_START_S, BACKOFF_CAP_S)
    delays = [backoff.next_delay() for _ in range(5000)]
    assert backoff.attempt == 5000
    assert max(delays) <= BACKOFF_CAP_S
    assert min(delays[10:]) >= BACKOFF_CAP_S / 2
    backoff.reset()
    assert backoff.next_delay() <= BACKOFF_START_S
