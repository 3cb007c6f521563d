"""An exhausted analyzer's hold, as the fleet shares it: marked in the hold key's value so
that every worker reading it raises :class:`FleetExhausted` (the messages then follow
``SENTINEL_ANALYZER_WHEN_DOWN``) instead of :class:`FleetHeld` (the messages wait), on the
suite's real redis-server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.fleet_limits import (
    FleetExhausted,
    FleetHeld,
    FleetLimits,
    hold_view,
    read_stored_hold,
    stored_hold,
)


@pytest.fixture
def clients(settings: Settings, redis_client: RedisClient) -> Iterator[Callable[[], RedisClient]]:
    """``clients()``: one more Redis client of its own, as each worker has."""
    made: list[RedisClient] = []

    def make() -> RedisClient:
        made.append(connect(settings))
        return made[-1]

    yield make
    for client in made:
        client.close()


def test_an_exhausted_hold_reaches_another_client_as_exhausted_with_its_cause(
    clients: Callable[[], RedisClient],
) -> None:
    first, second = FleetLimits("svc", client=clients()), FleetLimits("svc", client=clients())
    first.hold(2.0, "HTTP 429 with Retry-After 2s")
    first.hold(7200.0, "rejected_key: analyzer rejected the key", cause="exhausted")
    for limits in (first, second):  # this worker from memory, the other through Redis
        with pytest.raises(FleetExhausted) as caught:
            wait_until(lambda held=limits.held_for: held() > 3600, timeout_s=5, what="a hold")
            limits.check_hold()
        assert caught.value.reason == "rejected_key: analyzer rejected the key"
        assert caught.value.retry_after_s is not None and caught.value.retry_after_s > 3600
    third = FleetLimits("other", client=clients())
    third.hold(5.0, "HTTP 429 with Retry-After 5s")
    with pytest.raises(FleetHeld) as held:
        third.check_hold()
    assert not isinstance(held.value, FleetExhausted)


@pytest.mark.parametrize(
    ("cause", "reason", "stored"),
    [
        ("retry_after", "HTTP 429", "HTTP 429"),  # as before: the bare reason
        ("exhausted", "rejected_key: x", "exhausted|rejected_key: x"),
        ("retry_after", "a|b", "a|b"),  # a bar in a plain reason is no cause
    ],
)
def test_the_hold_value_keeps_its_cause(cause: str, reason: str, stored: str) -> None:
    assert stored_hold(cause, reason) == stored
    assert read_stored_hold(stored) == (cause, reason)
    assert read_stored_hold(stored.encode()) == (cause, reason)
    assert read_stored_hold(None) == ("retry_after", "")


@pytest.mark.parametrize(
    ("now", "held_until", "next_read", "recheck", "expected"),
    [
        (10.0, 100.0, 9.9, True, (90.0, True)),  # an exhaustion is re-read while it holds
        (10.0, 100.0, 10.05, True, (90.0, False)),  # at most once per interval
        (10.0, 100.0, 9.9, False, (90.0, False)),  # a Retry-After is answered from memory
        (10.0, 0.0, 9.9, False, (0.0, True)),
    ],
)
def test_an_exhausted_hold_is_rechecked_once_per_interval(
    now: float, held_until: float, next_read: float, recheck: bool, expected: tuple[float, bool]
) -> None:
    assert hold_view(now, held_until, next_read, recheck=recheck) == expected


def test_a_released_exhaustion_ends_on_every_worker_within_the_refresh(
    clients: Callable[[], RedisClient],
) -> None:
    first, second = FleetLimits("svc", client=clients()), FleetLimits("svc", client=clients())
    first.hold(86400.0, "rejected_key: analyzer rejected the key", cause="exhausted")
    wait_until(lambda: second.held_for() > 3600, timeout_s=5, what="the other sees it")
    clients().delete(first.hold_key)  # an operator's release
    for limits in (first, second):
        wait_until(lambda held=limits.held_for: held() == 0, timeout_s=5, what="the release")
        limits.check_hold()  # nothing raised: calls go again
    third = FleetLimits("retry", client=clients())
    third.hold(30.0, "HTTP 429 with Retry-After 30s")
    clients().delete(third.hold_key)
    assert third.held_for() > 25, "a Retry-After is not re-read: it ends by itself"
