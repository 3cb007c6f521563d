"""The analyzer's holds in the AI-health sensor: since when each hold is held and which to
warn about are table-tested; real ticks on the real Redis warn once per episode for a hold
past a minute, and never for a short one."""

from __future__ import annotations

import json
import time

import pytest

from sentinel_platform.domains.operations.ai_health_sensor import (
    SENSOR_NAME,
    build_ai_health_sensor,
)
from sentinel_platform.domains.operations.analyzer_holds import (
    ALERT_AFTER_S,
    due,
    held_since,
    hold_alert,
)
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.operations import read_alerts, tick

NOW = 1_000_000.0


def hold(analyzer_id: str, set_at: float | None = None) -> holds.Hold:
    return holds.Hold(analyzer_id, "https://x.example.com", "retry_after", "HTTP 429", 30.0, set_at)


@pytest.mark.parametrize(
    ("found", "seen", "expected"),
    [
        ([hold("a")], {}, {"a": NOW}),  # new, no record time: from now
        ([hold("a", NOW - 90)], {}, {"a": NOW - 90}),  # new: since its record says
        ([hold("a", NOW + 5)], {}, {"a": NOW}),  # a clock ahead: never in the future
        ([hold("a", NOW - 5)], {"a": NOW - 300}, {"a": NOW - 300}),  # re-set: same episode
        ([], {"a": NOW - 300}, {}),  # gone: the episode is over
    ],
)
def test_a_hold_is_held_since_first_seen_or_set(
    found: list[holds.Hold], seen: dict[str, float], expected: dict[str, float]
) -> None:
    assert held_since(found, seen, NOW) == expected


@pytest.mark.parametrize(
    ("since", "alerted", "expected"),
    [
        (NOW - ALERT_AFTER_S + 1, set(), []),  # not a minute yet
        (NOW - ALERT_AFTER_S, set(), [("a", ALERT_AFTER_S)]),
        (NOW - 600, set(), [("a", 600.0)]),
        (NOW - 600, {"a"}, []),  # warned once per episode
    ],
)
def test_a_hold_is_warned_about_once_past_a_minute(
    since: float, alerted: set[str], expected: list[tuple[str, float]]
) -> None:
    found = [hold("a")]
    assert [(h.analyzer_id, s) for h, s in due(found, {"a": since}, alerted, NOW)] == expected


def test_an_exhaustion_is_alerted_at_once() -> None:
    """Only an operator or the provider's reset ends an exhaustion: no minute to wait."""
    spent = holds.Hold("a", "https://x.example.com", "exhausted", "quota", None, None)
    assert [(h.analyzer_id, s) for h, s in due([spent], {"a": NOW}, set(), NOW)] == [("a", 0.0)]


def test_the_fleet_pacing_to_an_announced_budget_is_never_warned_about() -> None:
    """An ``announced_limit`` hold is the fleet waiting for the provider's bucket to refill:
    it ends by itself within one window, and under a budget that is always nearly spent
    one follows another while calls go out between them, so a sensor tick that finds one
    each time must not read that as a fleet that has called nobody for a minute."""
    paced = holds.Hold("a", "https://x.example.com", holds.ANNOUNCED_LIMIT, "refill", 2.0, None)
    assert due([paced], {"a": NOW - 600}, set(), NOW) == []


def test_a_keys_hold_is_its_own_episode_beside_its_analyzers_hold() -> None:
    """A rejected key's hold and its analyzer's own are two episodes: each is warned about
    once, the key's naming its fingerprint."""
    own = hold("a", NOW - 600)
    key = holds.Hold(
        "a",
        "https://x.example.com",
        "exhausted",
        "rejected_key",
        None,
        NOW - 600,
        key="sk-...OLD1",
        key_digest="0123abcd",
    )
    since = held_since([own, key], {}, NOW)
    assert since == {"a": NOW - 600, "a:key:0123abcd": NOW - 600}
    warned = due([own, key], since, {"a"}, NOW)
    assert [(h.key, s) for h, s in warned] == [("sk-...OLD1", 600.0)]
    alert = hold_alert(key, 600.0, NOW - 600, SENSOR_NAME)
    assert "on the key sk-...OLD1" in alert.summary and alert.details["key"] == "sk-...OLD1"
    assert alert.condition != hold_alert(own, 600.0, NOW - 600, SENSOR_NAME).condition


def test_the_sensor_warns_once_for_a_hold_past_a_minute_and_not_for_a_short_one(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    resources = make_resources()
    analyzer_hold_sensor = build_ai_health_sensor([])
    quiet = tick(analyzer_hold_sensor, dagster_instance, resources, None)
    assert quiet.skip_message == "no analyzer hold"
    holds.register(redis_client, "gpt-eu", "https://api.example.com/v1")
    holds.register(redis_client, "short", "https://s.example.com/v1")
    long_ago = holds.encode_hold("gpt-eu", "", "exhausted", "quota used up", None)
    record = {**json.loads(long_ago), "set_at": time.time() - 120}  # held two minutes now
    redis_client.set(holds.hold_key("gpt-eu"), json.dumps(record))
    brief = holds.encode_hold("short", "", "retry_after", "HTTP 429", 2)
    redis_client.set(holds.hold_key("short"), brief, px=2_000)
    first = tick(analyzer_hold_sensor, dagster_instance, resources, quiet.cursor)
    second = tick(analyzer_hold_sensor, dagster_instance, resources, first.cursor)
    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.severity == "error" and alert.details["analyzer_id"] == "gpt-eu"
    assert "decided by the rules and marked provisional" in alert.summary  # the default
    assert alert.details["cause"] == "exhausted" and alert.details["seconds_left"] is None
    assert "sentinel analyzer release --analyzer gpt-eu" in alert.summary
    assert "gpt-eu" in second.skip_message
    holds.release(redis_client, ["gpt-eu"])
    third = tick(analyzer_hold_sensor, dagster_instance, resources, second.cursor)
    assert json.loads(third.cursor)["since"].get("gpt-eu") is None, "the episode is over"
