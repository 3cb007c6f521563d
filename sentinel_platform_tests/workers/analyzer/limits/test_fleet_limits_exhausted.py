"""An exhausted analyzer's hold, as the fleet shares it: its cause recorded with the hold so
that every worker reading it raises :class:`FleetExhausted` (the messages then follow
``SENTINEL_ANALYZER_WHEN_DOWN``) instead of :class:`FleetHeld` (the messages wait), on the
suite's real redis-server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.limits.fleet_limits import (
    FleetExhausted,
    FleetHeld,
    FleetLimits,
)


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
        assert caught.value.left_s is not None and caught.value.left_s > 3600
        assert caught.value.retry_after_s is not None, "tried again soon: it may be released"
    third = FleetLimits("other", client=clients())
    third.hold(5.0, "HTTP 429 with Retry-After 5s")
    with pytest.raises(FleetHeld) as held:
        third.check_hold()
    assert not isinstance(held.value, FleetExhausted)


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
    first.hold(None, "insufficient_quota: the quota is spent", cause="exhausted")
    assert int(clients().pttl(first.hold_key)) == -1, "no reset known: until released"
