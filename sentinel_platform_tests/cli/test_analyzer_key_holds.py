"""A rejected key's hold as operators meet it, through the real commands against the real
test Redis: ``sentinel exporter`` serves it naming the key's fingerprint, ``sentinel
analyzer release --key`` ends only that key's hold, and a release without ``--key`` ends
every hold of the analyzer, its own and its keys'. No key is ever shown."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.cli.test_exporter import scrape, start_exporter, value
from sentinel_platform_tests.harness.cli import run_sentinel
from workers.analyzer.keys.key_fingerprint import fingerprint, key_digest
from workers.analyzer.keys.key_holds import KeyHolds
from workers.analyzer.limits.fleet_limits import FleetLimits

__all__ = ["start_exporter"]  # the fixture, used here by name

URL = "https://bot:Pw-7777777@api.example.com/v1"
SHOWN_URL = "https://bot:***@api.example.com/v1"
REVOKED = "sk-proj-Rev0kedCli-0123456789abcdefghOLD1"
LOST = "sk-proj-L0stCli-0123456789abcdefghijkLOST"


def reject(redis_client: RedisClient, key: str) -> None:
    why = f"rejected_key: analyzer rejected the credentials (HTTP 401) (key {fingerprint(key)})"
    KeyHolds("gpt-eu", URL, redis_client).hold(key_digest(key), fingerprint(key), why)


def test_the_exporter_and_release_name_a_rejected_key_by_its_fingerprint(
    settings_env: dict[str, str],
    redis_client: RedisClient,
    start_exporter: Callable[..., tuple[int, subprocess.Popen[bytes]]],
) -> None:
    holds.register(redis_client, "gpt-eu", URL)
    reject(redis_client, REVOKED)
    reject(redis_client, LOST)
    FleetLimits("gpt-eu", client=redis_client, analyzer_url=URL).hold(600, "HTTP 429")

    port, _process = start_exporter(settings_env)
    samples = scrape(port)
    shown = {"analyzer_id": "gpt-eu", "analyzer": SHOWN_URL, "cause": "exhausted"}
    metric = "sentinel_analyzer_key_hold_seconds"
    assert value(samples, metric, **shown, key="sk-proj-...OLD1") == float("inf")
    assert value(samples, metric, **shown, key="sk-proj-...LOST") == float("inf")
    left = value(samples, "sentinel_analyzer_hold_seconds", **{**shown, "cause": "retry_after"})
    assert left is not None and 500 < left <= 600, "the analyzer's own hold, apart"
    assert not [k for k in samples if REVOKED in str(k) or LOST in str(k) or "Pw-7" in str(k)]

    one = run_sentinel(settings_env, "analyzer", "release", "--key", "sk-proj-...OLD1", "--json")
    assert one.code == 0, one.err
    assert one.json() == {"released": ["gpt-eu"], "keys": ["sk-proj-...OLD1"]}
    assert [h.key for h in holds.read_holds(redis_client)] == ["", "sk-proj-...LOST"]

    every = run_sentinel(settings_env, "analyzer", "release")
    assert every.code == 0, every.err
    analyzers, key = every.out.splitlines()
    assert analyzers.startswith(f"released: gpt-eu ({SHOWN_URL}): retry_after, ")
    assert key == (
        f"released: gpt-eu ({SHOWN_URL}) key sk-proj-...LOST: exhausted, until released: "
        "rejected_key: analyzer rejected the credentials (HTTP 401) (key sk-proj-...LOST)"
    )
    assert holds.read_holds(redis_client) == []
    for text in (one.out, one.err, every.out, every.err):
        assert REVOKED not in text and LOST not in text
