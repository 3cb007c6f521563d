"""The lag zones, in seconds of work, from tables of cases; and the drain meter."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import load_settings
from sentinel_platform.streams.backlog.drain import WINDOW_S, DrainMeter, card_rate
from sentinel_platform.streams.backlog.zones import (
    Thresholds,
    ZoneLimits,
    limits_from_settings,
    thresholds,
    work_seconds,
    zone,
)

#: The defaults: 2 s / 10 s of work; one worker published 100 (its read, at a concurrency of 1).
TIME = ZoneLimits(warn_s=2.0, pause_s=10.0, in_flight=100)
#: Sentinel-L7's numbers, set by its operators.
COUNTS = ZoneLimits(lag_warn=50, lag_pause=200, in_flight=100)
#: 4 workers that each published 128 (SENTINEL_WORKER_CONCURRENCY 128: at most 128 each).
WIDE = ZoneLimits(warn_s=2.0, pause_s=10.0, in_flight=128 * 4)


@pytest.mark.parametrize(
    ("lag", "rate", "limits", "expected"),
    [
        # no live worker, whatever the limits
        (None, 18_556.0, TIME, "worker_off"),
        (None, None, COUNTS, "worker_off"),
        # count limits set: the message counts decide, the rate is ignored
        (49, 18_556.0, COUNTS, "nominal"),
        (50, 18_556.0, COUNTS, "elevated"),
        (199, 0.0, COUNTS, "elevated"),
        (200, 1e9, COUNTS, "backpressure"),
        (254, None, COUNTS, "backpressure"),
        # time limits with a known rate: the 254 at 18,556 rows/s is 14 ms of work
        (254, 18_556.0, TIME, "nominal"),
        (100 + 37_111, 18_556.0, TIME, "nominal"),  # just under 2 s past the allowance
        (100 + 37_112, 18_556.0, TIME, "elevated"),
        (100 + 185_559, 18_556.0, TIME, "elevated"),
        (100 + 185_560, 18_556.0, TIME, "backpressure"),
        # a slow pool (0.5 rows/s): 2 s of work is 1 message past the allowance
        (100, 0.5, TIME, "nominal"),
        (101, 0.5, TIME, "elevated"),
        (104, 0.5, TIME, "elevated"),
        (105, 0.5, TIME, "backpressure"),
        # the in-flight allowance never counts as pressure by itself
        (100, 0.0, TIME, "nominal"),
        (512, 0.001, WIDE, "nominal"),
        (513, 0.001, WIDE, "elevated"),
        # a measured rate of 0 with work past the allowance: the consumers stopped
        (101, 0.0, TIME, "backpressure"),
        (0, 0.0, TIME, "nominal"),
        # no rate measured (and the group read lately): the time cannot be told; the
        # pool consumes, so no alarm on the lag alone
        (0, None, TIME, "nominal"),
        (10_000_000, None, TIME, "nominal"),
    ],
)
def test_zone(lag: int | None, rate: float | None, limits: ZoneLimits, expected: str) -> None:
    assert zone(lag, rate, limits) == expected


@pytest.mark.parametrize(
    ("limits", "rate", "expected"),
    [
        (COUNTS, None, Thresholds(50, 200)),
        (COUNTS, 18_556.0, Thresholds(50, 200)),
        (TIME, None, Thresholds(None, None)),
        (TIME, 0.0, Thresholds(101, 101)),
        (TIME, 1000.0, Thresholds(2100, 10_100)),
        (TIME, 0.01, Thresholds(101, 102)),  # at least one message between the zones
        (ZoneLimits(in_flight=0), 0.0, Thresholds(1, 1)),
    ],
)
def test_thresholds(limits: ZoneLimits, rate: float | None, expected: Thresholds) -> None:
    assert thresholds(limits, rate) == expected


@pytest.mark.parametrize(
    ("env", "allowance", "expected"),
    [
        ({}, 100, ZoneLimits(2.0, 10.0, None, None, 100)),
        ({"lag_warn": 50, "lag_pause": 200}, 100, ZoneLimits(2.0, 10.0, 50, 200, 100)),
        ({"lag_pause": 200}, 100, ZoneLimits(2.0, 10.0, 50, 200, 100)),  # the other derived
        ({"lag_warn": 50}, 100, ZoneLimits(2.0, 10.0, 50, 200, 100)),
        ({"lag_warn_s": 1, "lag_pause_s": 3}, 100, ZoneLimits(1.0, 3.0, None, None, 100)),
        # the allowance is what the workers published, never read count x concurrency
        ({"read_count": 10, "worker_concurrency": 128}, 128, ZoneLimits(in_flight=128)),
        ({"read_count": 100, "worker_concurrency": 8}, 3 * 8, ZoneLimits(in_flight=24)),
        ({}, 0, ZoneLimits(in_flight=0)),  # no worker published: everything is pressure
    ],
)
def test_limits_from_settings_take_the_published_allowance(
    env: dict[str, object], allowance: int, expected: ZoneLimits
) -> None:
    assert limits_from_settings(load_settings(**env), allowance) == expected


#: SENTINEL_WORKER_CONCURRENCY=8 on a 200 ms processor: one worker drains 40 rows/s and
#: published that it holds 8. 775 pending are 19.4 s of work against a 10 s pause limit.
C8 = {"worker_concurrency": 8}


@pytest.mark.parametrize(
    ("lag", "allowance", "expected"),
    [
        (775, 8, "backpressure"),  # the case: 20 s of work (nominal by the formula)
        (8 + 400 - 1, 8, "elevated"),  # just under 10 s of work past what the worker holds
        (8 + 80, 8, "elevated"),  # 2 s of work past it
        (8 + 79, 8, "nominal"),
        (8, 8, "nominal"),  # what the worker holds is never pressure
        (775, 16, "backpressure"),  # two such workers: still far past 10 s of work
        (80, 0, "elevated"),  # no worker published: all of it counts, 2 s of work
        (400, 0, "backpressure"),
    ],
)
def test_a_c8_worker_on_a_200ms_processor_is_judged_on_what_it_holds(
    lag: int, allowance: int, expected: str
) -> None:
    limits = limits_from_settings(load_settings(**C8), allowance)
    assert zone(lag, 40.0, limits) == expected


#: Sentinel-L7's count limits as its operators set them (the journey's: 20 / 50).
L7_COUNTS = {"lag_warn": 20, "lag_pause": 50}


@pytest.mark.parametrize(
    ("env", "lag", "rate", "expected"),
    [
        # time limits: a climbing limit holds more soon, so the pause zone waits for it
        ({}, 8 + 400, 40.0, "elevated"),
        ({}, 8 + 79, 40.0, "nominal"),
        # count limits sit above the most the fleet can hold: a climb excuses nothing
        (L7_COUNTS, 200, 40.0, "backpressure"),
        (L7_COUNTS, 50, None, "backpressure"),
        (L7_COUNTS, 49, 40.0, "elevated"),
    ],
)
def test_a_climbing_limit_excuses_a_lag_only_under_the_time_limits(
    env: dict[str, object], lag: int, rate: float | None, expected: str
) -> None:
    limits = limits_from_settings(load_settings(**env), 8, climbing=True)
    assert zone(lag, rate, limits) == expected
    assert limits.climbing is (not env)


@pytest.mark.parametrize(
    ("lag", "rate", "expected"),
    [(0, None, 0.0), (100, None, None), (100, 0.0, None), (254, 18_556.0, 0.014)],
)
def test_work_seconds(lag: int, rate: float | None, expected: float | None) -> None:
    assert work_seconds(lag, rate) == expected


@pytest.mark.parametrize(
    ("readings", "expected"),
    [
        # (time, completed, lag) ...: the last reading's rate
        ([(0.0, 0, 10), (0.2, 10, 10)], None),  # too short a span
        ([(0.0, 0, 10), (1.0, 500, 10)], 500.0),
        # idle in between (lag 0): a lower bound of the capacity
        ([(0.0, 0, 10), (1.0, 500, 0), (1.5, 500, 10), (2.5, 900, 10)], 360.0),
        ([(0.0, 0, 10), (1.0, 0, 10)], None),  # nothing finished yet: too soon to tell
        ([(0.0, 0, 10), (WINDOW_S, 0, 10)], 0.0),  # a whole window without progress
        ([(0.0, 0, 0), (WINDOW_S, 0, 10)], None),  # nothing to do, then work: no verdict
        ([(0.0, 0, 10), (1.0, 100, 10), (2.0, 50, 10), (3.0, 150, 10)], 100.0),  # reset
        ([(0.0, None, 10), (1.0, 100, 10)], None),
    ],
)
def test_drain_meter(readings: list[tuple[float, int | None, int]], expected: float | None) -> None:
    meter = DrainMeter()
    rate = None
    for now, completed, lag in readings:
        rate = meter.observe(now, completed, lag)
    assert rate == expected


def test_drain_meter_keeps_a_sliding_window() -> None:
    meter = DrainMeter(window_s=2.0)
    rate = None
    for second in range(10):  # 100 rows/s, then 1000 rows/s
        rate = meter.observe(float(second), second * 100, 50)
    for second in range(10, 14):
        rate = meter.observe(float(second), 900 + (second - 9) * 1000, 50)
    assert rate == pytest.approx(1000.0)


@pytest.mark.parametrize(
    ("published", "read_lately", "expected"),
    [
        (1500.0, None, 1500.0),
        (1500.0, 0.0, 1500.0),  # the producers' figure wins
        (None, 12.5, None),  # the group reads: the time cannot be told
        (None, None, None),  # no samples yet
        (None, 0.0, 0.0),  # nothing read for a minute: the consumers stopped
    ],
)
def test_card_rate(published: float | None, read_lately: float | None, expected: object) -> None:
    assert card_rate(published, read_lately) == expected
