"""``sentinel analyzer release`` as an operator runs it, against the real test Redis: one
analyzer's hold by id, then every known one (registered by workers, or named by the
settings), idempotent, no credential shown."""

from __future__ import annotations

from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.cli import run_sentinel

SECRET = "Rel3ase-Pw"
CONFIGURED = f"https://bot:{SECRET}@configured.example.com/v1"


def hold(client: RedisClient, analyzer_id: str, url: str, seconds: float | None) -> None:
    record = holds.encode_hold(analyzer_id, url, "retry_after", "HTTP 429", seconds)
    client.set(holds.hold_key(analyzer_id), record, px=None if seconds is None else 600_000)


def test_release_ends_one_hold_by_id_then_every_known_one(
    settings_env: dict[str, str], redis_client: RedisClient
) -> None:
    holds.register(redis_client, "svc-a", "https://a.example.com/v1")
    holds.register(redis_client, "svc-b", f"https://bot:{SECRET}@b.example.com/v1")
    hold(redis_client, "svc-a", "https://a.example.com/v1", 600)
    hold(redis_client, "svc-b", f"https://bot:{SECRET}@b.example.com/v1", None)
    configured = holds.analyzer_key_id(CONFIGURED)  # no worker registered it yet
    hold(redis_client, configured, CONFIGURED, 600)

    one = run_sentinel(settings_env, "analyzer", "release", "--analyzer", "svc-a", "--json")
    assert one.code == 0, one.err
    assert one.json() == {"released": ["svc-a"]}
    assert redis_client.exists(holds.hold_key("svc-a")) == 0
    assert redis_client.exists(holds.hold_key("svc-b")) == 1

    env = {**settings_env, "SENTINEL_ANALYZER_URL": CONFIGURED}
    every = run_sentinel(env, "analyzer", "release")
    assert every.code == 0, every.err
    released = every.out.splitlines()
    assert len(released) == 2 and all(line.startswith("released: ") for line in released)
    assert "svc-b (https://bot:***@b.example.com/v1): retry_after, until released" in every.out
    assert configured in every.out
    assert holds.read_holds(redis_client, [configured]) == []

    again = run_sentinel(env, "analyzer", "release")
    assert (again.code, again.out.strip()) == (0, "no analyzer hold to release")
    for output in (one.out, every.out, every.err, again.out):
        assert SECRET not in output
