"""The producer's limits from the zone thresholds, from tables of cases."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import load_settings
from sentinel_platform.streams.backlog.zones import (
    BOOTSTRAP_FACTOR,
    ZoneLimits,
    limits_from_settings,
    thresholds,
)
from sentinel_platform.streams.producer.pacing_limits import (
    BOOTSTRAP_PAUSE_FACTOR,
    BackpressureConfig,
)

#: The defaults: 2 s / 10 s of work; one worker published 100 (its read, at a concurrency of 1).
TIME = ZoneLimits(warn_s=2.0, pause_s=10.0, in_flight=100)
#: SENTINEL_WORKER_CONCURRENCY=8 on a 200 ms processor: one worker drains 40 rows/s and
#: published that it holds 8.
C8 = {"worker_concurrency": 8}


def test_the_producers_set_point_for_that_worker_is_about_a_second_of_work() -> None:
    """The issue's 840 messages (21 s of work) become 8 held + 1 s of work = 48."""
    config = BackpressureConfig.from_settings(load_settings(**C8))
    limits = config.limits(40.0, allowance=8)
    assert limits.set_point == 8 + 40
    assert limits.lag_pause == thresholds(limits_from_settings(load_settings(**C8), 8), 40.0).pause


@pytest.mark.parametrize(
    ("rate", "soft", "set_point", "pause"),
    [
        # bootstrap: twice the in-flight allowance until a drain rate is measured
        (None, 100, BOOTSTRAP_FACTOR * 100, BOOTSTRAP_PAUSE_FACTOR * BOOTSTRAP_FACTOR * 100),
        # the set point is 1 s of work past the allowance: nominal (warn is at 2 s)
        (18_556.0, 100 + 9_278, 100 + 18_556, 100 + 185_560),
        # drained nothing: only what is in flight
        (0.0, 50, 100, 101),
    ],
)
def test_producer_limits_follow_the_zone_thresholds(
    rate: float | None, soft: int, set_point: int, pause: int
) -> None:
    limits = BackpressureConfig(bootstrap_rows=100).limits(rate, allowance=100)
    assert (limits.lag_warn, limits.set_point, limits.lag_pause) == (soft, set_point, pause)
    bounds = thresholds(TIME, rate)
    if bounds.warn is not None and bounds.pause is not None:
        assert limits.set_point < bounds.warn, "paced publishing must stay nominal"
        assert limits.lag_pause == bounds.pause


@pytest.mark.parametrize(
    ("allowance", "rows", "soft", "set_point"),
    [
        (0, 100, 100, 200),  # nobody published yet: at least two reads' worth
        (8, 100, 100, 200),
        (640, 100, 640, 1_280),  # 20 workers at 32 published: twice what they hold
    ],
)
def test_bootstrap_fills_what_the_pool_holds_and_at_least_a_read(
    allowance: int, rows: int, soft: int, set_point: int
) -> None:
    limits = BackpressureConfig(bootstrap_rows=rows).limits(None, allowance)
    assert (limits.lag_warn, limits.set_point) == (soft, set_point)
    assert limits.lag_pause == BOOTSTRAP_PAUSE_FACTOR * set_point


def test_count_limits_keep_the_old_controller() -> None:
    limits = BackpressureConfig(lag_warn=50, lag_pause=200).limits(18_556.0)
    assert (limits.lag_warn, limits.set_point, limits.lag_pause) == (50, 125, 200)


def test_config_rejects_warn_not_below_pause() -> None:
    with pytest.raises(ValueError, match="lag_warn"):
        BackpressureConfig(lag_warn=200, lag_pause=200)
