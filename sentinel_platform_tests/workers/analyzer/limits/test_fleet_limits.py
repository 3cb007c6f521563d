"""The fleet shares the analyzer's limits: one Retry-After holds every worker, and one
rate limit is enforced for all of them, fairly.

The pure parts (the analyzer's shared id, the client's view of the hold, the wait bound)
are table-tested; the rest runs on the suite's real redis-server with real HTTP analyzer
clients, the fleet hold across two processes.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.operators.analyzer_holds import REGISTRY_KEY
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.streams.plumbing.test_security import PLATFORM_COMMANDS, PLATFORM_KEYS
from sentinel_platform_tests.workers.processors.test_transactions import make_txn
from workers.analyzer import HttpAnalyzer, analyzer_from_settings
from workers.analyzer.limits.fleet_limits import (
    HOLD_RECHECK_S,
    RATE_WAIT_BOUND_S,
    FleetLimits,
    analyzer_key_id,
    hold_view,
    wait_bound,
)
from workers.analyzer.limits.token_budget import budget_key
from workers.processors import TransactionProcessor

ROOT = Path(__file__).resolve().parents[4]
SECRET = "s3cr3t-T0ken"


# --- pure parts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("https://api.example.com/v1/assess", "https://API.example.com:443/v1/assess", True),
        ("http://10.0.0.5/assess", "http://10.0.0.5:80/assess", True),
        (f"https://bot:{SECRET}@api.example.com/v1", "https://api.example.com/v1", True),
        (f"https://api.example.com/v1?key={SECRET}", "https://api.example.com/v1", True),
        ("https://api.example.com/v1#frag", "https://api.example.com/v1", True),
        ("https://api.example.com/v1", "http://api.example.com/v1", False),
        ("https://api.example.com/v1", "https://api.example.com:8443/v1", False),
        ("https://api.example.com/v1", "https://api.example.com/v2", False),
        ("https://a.example.com/v1", "https://b.example.com/v1", False),
    ],
)
def test_the_shared_id_is_the_endpoint_never_its_credentials(
    first: str, second: str, same: bool
) -> None:
    assert (analyzer_key_id(first) == analyzer_key_id(second)) is same
    for url in (first, second):
        derived = analyzer_key_id(url)
        assert len(derived) == 16 and int(derived, 16) >= 0
        assert SECRET not in derived and SECRET not in FleetLimits(derived).hold_key


def test_an_explicit_id_wins_and_names_the_keys() -> None:
    limits = FleetLimits(analyzer_key_id("https://x.example.com/a", "gpt-eu"), 5.0)
    assert (limits.hold_key, limits.rate_key) == (
        "sentinel:analyzer:gpt-eu:hold",
        "sentinel:analyzer:gpt-eu:rate",
    )


@pytest.mark.parametrize(
    ("now", "held_until", "next_read", "expected"),
    [
        (10.0, 12.5, 0.0, (2.5, True)),  # a known hold is re-read too: it may be released
        (10.0, 12.5, 99.0, (2.5, False)),  # between reads: answered from memory
        (10.0, 9.0, 10.05, (0.0, False)),  # no hold, read 50 ms ago: no new read
        (10.0, 9.0, 10.0, (0.0, True)),  # the refresh interval is over: read
        (10.0, 0.0, 0.0, (0.0, True)),  # never read
        (10.0, 10.0, 5.0, (0.0, True)),  # a hold ending now is over
    ],
)
def test_the_client_reads_the_hold_at_most_once_per_interval(
    now: float, held_until: float, next_read: float, expected: tuple[float, bool]
) -> None:
    assert hold_view(now, held_until, next_read) == expected


@pytest.mark.parametrize(
    ("rate", "bound"),
    [(100.0, RATE_WAIT_BOUND_S), (2.0, RATE_WAIT_BOUND_S), (1.0, 1.5), (0.1, 15.0)],
)
def test_a_caller_may_always_wait_for_the_next_slot(rate: float, bound: float) -> None:
    assert wait_bound(rate) == pytest.approx(bound)
    assert wait_bound(rate) >= 1 / rate


# --- on a real Redis ----------------------------------------------------------------


def test_a_hold_is_never_shortened_and_reaches_another_client_within_the_refresh(
    clients: Callable[[], RedisClient],
) -> None:
    first, second = FleetLimits("svc", client=clients()), FleetLimits("svc", client=clients())
    assert second.held_for() == 0.0
    first.hold(5.0, "HTTP 429 with Retry-After 5s")
    first.hold(1.0, "HTTP 429 with Retry-After 1s")  # shorter: the 5 s hold stays
    client = clients()
    assert 4_000 < int(client.pttl(first.hold_key)) <= 5_000
    # ``second`` read "no hold" just now; it learns of the hold within the refresh.
    held = wait_until(second.held_for, timeout_s=5, what="the other client sees the hold")
    assert 3.5 < held <= 5.0
    with pytest.raises(Busy) as caught:
        second.check_hold()
    # handed back for a recheck at most, not the whole hold: a release is acted on soon
    assert caught.value.retry_after_s == HOLD_RECHECK_S
    assert caught.value.reason.startswith("analyzer svc held for ")
    stored = json.loads(client.get(first.hold_key) or "{}")
    assert (stored["cause"], stored["reason"]) == ("retry_after", "HTTP 429 with Retry-After 5s")


def test_a_rate_slot_further_than_the_bound_is_busy_and_a_stopped_wait_is_busy(
    clients: Callable[[], RedisClient],
) -> None:
    limits = FleetLimits("slow-svc", rate_limit=1.0, client=clients())  # bound: 1.5 s
    stopped = threading.Event()
    stopped.set()
    started = time.monotonic()
    limits.reserve(stopped)  # the first slot is now: no wait
    with pytest.raises(Busy) as interrupted:  # the next is ~1 s away: reserved, but stopping
        limits.reserve(stopped)
    assert interrupted.value.retry_after_s is None and "stopping" in interrupted.value.reason
    with pytest.raises(Busy) as too_far:  # ~2 s away, beyond the bound: not reserved
        limits.reserve(stopped)
    assert time.monotonic() - started < 1.0, "nothing slept"
    assert too_far.value.retry_after_s is not None and 1.5 < too_far.value.retry_after_s <= 2.0
    with pytest.raises(Busy) as still_too_far:  # the refused call took no slot
        limits.reserve(stopped)
    assert still_too_far.value.retry_after_s == pytest.approx(too_far.value.retry_after_s, abs=0.2)


def test_a_retry_after_seen_by_one_worker_holds_another_worker_process(
    analyzer_server: AnalyzerServer,
    make_settings: Callable[..., Settings],
    redis_client: RedisClient,
    settings_env: dict[str, str],
) -> None:
    settings = make_settings(analyzer_url=analyzer_server.url)
    env = {**settings_env, "SENTINEL_ANALYZER_URL": analyzer_server.url}
    other = subprocess.Popen(
        [sys.executable, "-m", "sentinel_platform_tests.workers.analyzer.analyzer_caller"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdin is not None
        assert other.stdout.readline().strip() == "ready"  # built, bound to Redis, waiting
        analyzer = analyzer_from_settings(settings)
        assert analyzer is not None
        analyzer.bind_redis(connect(settings))
        analyzer_server.mode, analyzer_server.retry_after = "rate_limited", "2"
        with pytest.raises(Busy) as caught:
            analyzer.assess_transaction(make_txn())
        assert caught.value.retry_after_s == 2.0
        analyzer_server.mode = "ok"
        other.stdin.write("go\n")
        other.stdin.flush()
        output, _ = other.communicate(timeout=60)
    finally:
        if other.poll() is None:
            other.kill()
            other.wait(10)
    attempts = [json.loads(line) for line in output.splitlines()]
    assert other.returncode == 0, attempts
    assert attempts[-1] == {"outcome": "ok"}
    busy = attempts[:-1]
    assert busy and all(a["outcome"] == "busy" for a in busy), "the other worker was held"
    assert 0 < busy[0]["retry_after_s"] <= 2.0
    first, second = analyzer_server.requests  # the 429, then the other worker's one call
    assert second["at"] - first["at"] >= 1.95, "the other worker called during the hold"
    analyzer.close()


def test_the_fleet_rate_limit_holds_every_second_and_is_fair_between_workers(
    analyzer_server: AnalyzerServer,
    make_settings: Callable[..., Settings],
    redis_client: RedisClient,
) -> None:
    rate, workers, threads_each, run_s = 100.0, 3, 4, 3.3
    settings = make_settings(analyzer_url=analyzer_server.url, analyzer_rate_limit=rate)
    analyzers: list[HttpAnalyzer] = []
    for _ in range(workers):
        analyzer = analyzer_from_settings(settings.model_copy(update={"worker_concurrency": 4}))
        assert analyzer is not None
        analyzer.bind_redis(connect(settings))
        analyzers.append(analyzer)
    calls = [0] * workers
    lock = threading.Lock()
    stop = threading.Event()

    def run(worker: int) -> None:
        while not stop.is_set():
            try:
                analyzers[worker].assess_transaction(make_txn())
            except Busy as busy:  # not expected at this rate; honoured if it comes
                stop.wait(busy.retry_after_s or 0.05)
                continue
            with lock:
                calls[worker] += 1

    threads = [
        threading.Thread(target=run, args=(w,)) for w in range(workers) for _ in range(threads_each)
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: analyzer_server.requests, timeout_s=10, what="the first call")
        stop.wait(analyzer_server.requests[0]["at"] + run_s - time.monotonic())
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        for analyzer in analyzers:
            analyzer.close()
    arrivals = [request["at"] for request in analyzer_server.requests]
    t0 = arrivals[0]
    windows = [sum(1 for at in arrivals if t0 + k <= at < t0 + k + 1) for k in (1, 2)]
    # The ceiling is the promise and exact to 5%; the floor only shows the limit is not
    # held far below its rate: twelve Python threads on a loaded 2-core machine supplied
    # 81 calls in one second (a full suite run), so the floor is the supply's, not 95%.
    assert all(count <= rate + max(0.05 * rate, 1) for count in windows), windows
    assert all(count >= 0.7 * rate for count in windows), windows
    mean = sum(calls) / workers
    assert all(abs(count - mean) <= 0.15 * mean for count in calls), calls
    assert sum(calls) == len(arrivals)


def test_without_redis_the_hold_still_holds_every_thread_of_the_process(
    analyzer_server: AnalyzerServer,
) -> None:
    analyzer = HttpAnalyzer(analyzer_server.url, 5.0, 2)
    analyzer_server.mode, analyzer_server.retry_after = "rate_limited", "30"
    with pytest.raises(Busy):
        analyzer.assess_transaction(make_txn())
    analyzer_server.mode = "ok"
    results: list[BaseException] = []

    def call() -> None:
        try:
            analyzer.assess_transaction(make_txn())
        except Busy as busy:
            results.append(busy)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(results) == 4 and len(analyzer_server.requests) == 1
    analyzer.close()


def test_the_id_setting_names_the_fleet_keys(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(
        analyzer_url=f"https://bot:{SECRET}@api.example.com/v1", analyzer_id="gpt-eu"
    )
    analyzer = analyzer_from_settings(settings)
    assert analyzer is not None and analyzer.limits.hold_key == "sentinel:analyzer:gpt-eu:hold"


def test_a_call_the_breaker_refuses_takes_no_rate_slot(
    analyzer_server: AnalyzerServer,
    make_settings: Callable[..., Settings],
    redis_client: RedisClient,
) -> None:
    settings = make_settings(
        analyzer_url=analyzer_server.url,
        analyzer_rate_limit=0.5,  # a slot every 2 s: a second slot taken would be a Busy
        analyzer_breaker_failures=1,
        analyzer_breaker_cooldown_s=600,
    )
    analyzer = analyzer_from_settings(settings)
    assert analyzer is not None
    analyzer.bind_redis(connect(settings))
    analyzer_server.mode = "error"
    processor = TransactionProcessor(settings, analyzer)
    assert processor.process(make_txn()).result["driver_used"] == "fallback"  # opens it
    slot = redis_client.get(analyzer.limits.rate_key)
    for _ in range(5):  # refused by the open breaker at once: the rules decide
        assert processor.process(make_txn()).result["driver_used"] == "fallback"
    assert redis_client.get(analyzer.limits.rate_key) == slot
    assert len(analyzer_server.requests) == 1
    analyzer.close()


def test_no_credential_reaches_redis_a_busy_or_a_log_line(
    analyzer_server: AnalyzerServer,
    make_settings: Callable[..., Settings],
    redis_client: RedisClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    url = analyzer_server.url.replace("http://", f"http://bot:{SECRET}@") + f"?api_key={SECRET}"
    settings = make_settings(analyzer_url=url, analyzer_rate_limit=50)
    analyzer = analyzer_from_settings(settings)
    assert analyzer is not None
    analyzer.bind_redis(connect(settings))
    analyzer_server.mode, analyzer_server.retry_after = "rate_limited", "5"
    with pytest.raises(Busy) as answered:
        analyzer.assess_transaction(make_txn())
    with pytest.raises(Busy) as held:
        analyzer.assess_transaction(make_txn())
    stored = {key: redis_client.dump(key) for key in redis_client.keys("*")}
    assert analyzer.limits.hold_key in stored
    answered_silent = budget_key(analyzer.limits.analyzer_id, "silent")  # the first call's
    assert set(stored) <= {
        analyzer.limits.hold_key,
        analyzer.limits.rate_key,
        REGISTRY_KEY,
        answered_silent,
    }
    seen = [
        *stored,
        *map(repr, stored.values()),
        caplog.text,
        str([vars(r) for r in caplog.records]),
    ]
    seen += [repr(answered.value), answered.value.reason, repr(held.value), held.value.reason]
    assert not [text for text in seen if SECRET in text]
    assert analyzer_server.requests[0]["headers"]["authorization"].startswith("Basic ")
    analyzer.close()


def test_the_limits_run_as_the_documented_least_privilege_redis_user(
    settings: Settings, redis_client: RedisClient
) -> None:
    # The ACL of docs/configuration.md, as the security drill applies it: no TIME, for one.
    user, password = "fleet-limits-acl", "Fl33t-Acl-Pw"
    redis_client.execute_command(
        "ACL", "SETUSER", user, "reset", "on", f">{password}", *PLATFORM_KEYS, *PLATFORM_COMMANDS
    )
    restricted = connect(
        settings, url=settings.redis_url_value.replace("://", f"://{user}:{password}@")
    )
    try:
        limits = FleetLimits("acl-svc", rate_limit=1.0, client=restricted)
        limits.hold(3.0, "HTTP 429 with Retry-After 3s")
        assert 2.0 < FleetLimits("acl-svc", client=restricted).held_for() <= 3.0
        stopped = threading.Event()
        stopped.set()
        limits.reserve(stopped)  # the first slot: now
        with pytest.raises(Busy) as next_slot:  # the next, ~1 s away: reserved, then stopped
            limits.reserve(stopped)
        assert "stopping" in next_slot.value.reason, "the script ran (no ACL denial)"
    finally:
        restricted.close()
        redis_client.execute_command("ACL", "DELUSER", user)
