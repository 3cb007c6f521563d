"""A rejected key's hold, as the fleet shares it on the suite's real redis-server: it
holds every worker on that key and no other, it lasts until released, operators find it
naming the key's fingerprint (never the key), and a release of one key leaves the rest."""

from __future__ import annotations

import json
from collections.abc import Callable

from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.keys.key_fingerprint import fingerprint, key_digest
from workers.analyzer.keys.key_holds import KeyHolds
from workers.analyzer.limits.fleet_limits import FleetLimits

REVOKED = "sk-proj-Rev0ked-0123456789abcdefghijOLD1"
VALID = "sk-proj-Val1d-0123456789abcdefghijklNEW2"
URL = "https://bot:Pw-42@api.example.com/v1"


def reject(key_holds: KeyHolds, key: str) -> None:
    why = f"rejected_key: analyzer rejected the credentials (HTTP 401) (key {fingerprint(key)})"
    key_holds.hold(key_digest(key), fingerprint(key), why)


def test_a_rejected_key_holds_every_worker_on_it_and_none_on_another_key(
    clients: Callable[[], RedisClient],
) -> None:
    first, second = KeyHolds("svc", URL, clients()), KeyHolds("svc", URL, clients())
    limits = FleetLimits("svc", client=clients(), analyzer_url=URL)
    reject(first, REVOKED)
    assert first.remembered(key_digest(REVOKED)).startswith("rejected_key: ")
    wait_until(lambda: second.held(key_digest(REVOKED)) != "", timeout_s=5, what="shared")
    assert "(key sk-proj-...OLD1)" in second.held(key_digest(REVOKED))
    assert first.held(key_digest(VALID)) == second.held(key_digest(VALID)) == ""
    assert limits.held_for() == 0, "the analyzer itself is not held"
    other = KeyHolds("other-svc", URL, clients())
    assert other.held(key_digest(REVOKED)) == "", "a key's hold is on one analyzer"
    stored = clients().get(holds.key_hold_key("svc", key_digest(REVOKED)))
    assert int(clients().pttl(holds.key_hold_key("svc", key_digest(REVOKED)))) == -1
    assert stored is not None and REVOKED not in stored and "Pw-42" not in stored
    assert json.loads(stored)["key"] == "sk-proj-...OLD1"


def test_operators_find_a_keys_hold_by_its_fingerprint_and_release_only_it(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    worker = KeyHolds("svc", URL, clients())
    holds.register(redis_client, "svc", URL)
    reject(worker, REVOKED)
    FleetLimits("svc", client=clients(), analyzer_url=URL).hold(
        600, "HTTP 429", cause="retry_after"
    )
    found = holds.read_holds(redis_client)
    assert [(h.analyzer_id, h.key, h.cause) for h in found] == [
        ("svc", "", "retry_after"),
        ("svc", "sk-proj-...OLD1", "exhausted"),
    ]
    (held_key,) = [h for h in found if h.key_digest]
    assert held_key.seconds_left is None and held_key.key_digest == key_digest(REVOKED)
    assert held_key.analyzer == "https://bot:***@api.example.com/v1"
    text = holds.hold_text(held_key)
    assert text.startswith("svc (https://bot:***@api.example.com/v1) key sk-proj-...OLD1: ")
    assert REVOKED not in str(found)
    assert held_key.ident != found[0].ident, "the alert sensor tells the two apart"

    chosen = [h for h in found if holds.matches_key(h, "sk-proj-...OLD1")]
    assert holds.release_holds(redis_client, chosen) == [held_key]
    assert [h.key for h in holds.read_holds(redis_client)] == [""], "the analyzer's stays"
    wait_until(lambda: worker.held(key_digest(REVOKED)) == "", timeout_s=5, what="released")

    reject(worker, REVOKED)
    assert holds.release(redis_client, ["svc"]) == ["svc"], "every hold of the analyzer"
    assert holds.read_holds(redis_client) == []
    assert redis_client.hgetall(holds.keys_key("svc")) == {}


def test_a_worker_without_redis_remembers_its_keys_hold_and_shares_it_once_bound(
    clients: Callable[[], RedisClient],
) -> None:
    alone = KeyHolds("svc", URL)
    reject(alone, REVOKED)
    assert alone.held(key_digest(REVOKED)) != "", "held in this worker without Redis"
    alone.bind(clients())
    reject(alone, REVOKED)
    assert alone.held(key_digest(REVOKED)) != ""
    assert KeyHolds("svc", URL, clients()).held(key_digest(REVOKED)) != ""
