"""Fault-drill machinery shared by the drill tests and the soak scenario of ``bench``.

Two ideas live here because every drill needs both:

* a **ledger producer**: publishes numbered bench messages through the platform's publish
  path (:func:`~sentinel_platform.streams.producer.publish.publish_rows`) in small batches and
  records a message as *acknowledged* only when Redis has answered the batch. When Redis
  goes away it backs off and resends the whole batch (which may duplicate entries in the
  stream: the workers' idempotency markers must absorb that);
* an **audit**: counts, per natural key, the result entries (effects), the dead letters
  and the pending entries, so a drill can state "nothing acknowledged was lost, nothing
  was applied twice, every bad message was dead-lettered once, the PEL is empty".

:func:`run_drill` is the Redis restart drill built from them: the server SIGKILLed and
restarted on its port and data while a producer publishes and workers consume.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from sentinel_platform.redis_server import RedisServer, find_redis_server
from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import TRANSIENT_ERRORS, RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.processes import TEST_PROCESSOR, Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import group_drained
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until

CHUNK = 10_000


def bench_message(index: int, prefix: str = "m", kind: str = "valid") -> dict[str, str]:
    """A bench message; ``kind`` 'poison' raises in the processor, 'invalid' fails parsing."""
    fields = {"key": f"{prefix}{index}", "data": "x" * 64}
    if kind != "valid":
        fields[kind] = "1"
    return fields


@dataclass(eq=False)  # threads must stay hashable
class LedgerProducer(threading.Thread):
    """Publishes ``messages`` in batches, retrying through outages; records what Redis acked."""

    settings: Settings
    keys: StreamKeys
    messages: list[dict[str, str]]
    batch: int = 50
    pause_s: float = 0.0
    deadline_s: float = 120.0
    acknowledged: list[str] = field(default_factory=list)
    batches_retried: int = 0
    error: BaseException | None = None

    def __post_init__(self) -> None:
        super().__init__(name="ledger-producer", daemon=True)
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        from sentinel_platform.streams.producer.publish import publish_rows

        deadline = time.monotonic() + self.deadline_s
        client: RedisClient | None = None
        try:
            for start in range(0, len(self.messages), self.batch):
                chunk = self.messages[start : start + self.batch]
                backoff = 0.05
                while not self._stop_event.is_set():
                    if time.monotonic() > deadline:
                        raise TimeoutError("producer could not publish before its deadline")
                    try:
                        client = client or connect(self.settings, check=False)
                        publish_rows(client, self.keys, chunk, batch_size=len(chunk))
                        break
                    except (*TRANSIENT_ERRORS, redis.ResponseError) as exc:
                        # LOADING (AOF replay) and READONLY (a failover in progress) arrive
                        # as ResponseError subclasses: the write did not happen, resend it.
                        passing = ("LOADING", "READONLY", "can't write against a read only")
                        if isinstance(exc, redis.ResponseError) and not any(
                            text in str(exc) for text in passing
                        ):
                            raise
                        self.batches_retried += 1
                        time.sleep(backoff)
                        backoff = min(1.0, backoff * 2)
                if self._stop_event.is_set():
                    return
                self.acknowledged.extend(fields["key"] for fields in chunk)
                if self.pause_s:
                    time.sleep(self.pause_s)
        except BaseException as exc:  # reported by the drill, never swallowed
            self.error = exc
        finally:
            if client is not None:
                client.close()


@dataclass
class Audit:
    """Per-key accounting of one drill's stream."""

    effects: Counter[str]
    dead_letters: Counter[str]
    reasons: dict[str, str]
    pending: int
    processings: Counter[str]

    def lost(self, keys: Iterable[str]) -> list[str]:
        return [k for k in keys if self.effects[k] == 0 and self.dead_letters[k] == 0]

    def applied_twice(self) -> list[str]:
        return sorted(k for k, n in self.effects.items() if n > 1)

    def summary(
        self, valid: Iterable[str], poison: Iterable[str] = (), invalid: Iterable[str] = ()
    ) -> dict[str, Any]:
        valid, poison, invalid = list(valid), list(poison), list(invalid)
        bad = set(poison) | set(invalid)
        return {
            "valid": len(valid),
            "lost": len(self.lost(valid)),
            "duplicated": len(self.applied_twice()),
            "dead_lettered": sum(self.dead_letters.values()),
            "dead_lettered_valid": sum(1 for k in valid if self.dead_letters[k]),
            "bad_not_dead_lettered_once": sum(1 for k in bad if self.dead_letters[k] != 1),
            "bad_with_effect": sum(1 for k in bad if self.effects[k]),
            "wrong_reason": sum(
                1 for k in poison if self.reasons.get(k) != "max_deliveries_exceeded"
            )
            + sum(1 for k in invalid if self.reasons.get(k) != "invalid_message"),
            "pending": self.pending,
            "duplicate_processings": sum(max(0, n - 1) for n in self.processings.values()),
        }


def _scan(client: RedisClient, stream: str) -> Iterable[tuple[str, Mapping[str, str]]]:
    start = "-"
    while True:
        entries = client.xrange(stream, min=start, max="+", count=CHUNK)
        yield from entries
        if len(entries) < CHUNK:
            return
        start = "(" + entries[-1][0]


def audit(client: RedisClient, keys: StreamKeys, calls_key: str | None = None) -> Audit:
    effects: Counter[str] = Counter(
        fields.get("key", "") for _, fields in _scan(client, keys.results)
    )
    dead_letters: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    for _, fields in _scan(client, keys.dlq):
        letter = DeadLetter.from_fields(fields)
        key = letter.original_fields.get("key", f"<no key {letter.message_id}>")
        dead_letters[key] += 1
        reasons[key] = letter.reason
    try:
        pending = int(client.xpending(keys.stream, keys.group)["pending"])
    except redis.ResponseError:
        pending = 0
    calls = client.hgetall(calls_key) if calls_key else {}
    processings = Counter({k: int(v) for k, v in calls.items()})
    return Audit(effects, dead_letters, reasons, pending, processings)


#: Every acknowledged write is on disk: a SIGKILL loses nothing Redis acknowledged.
AOF_ALWAYS = {"appendfsync": "always"}
DRILL_SETTINGS = {"lease_ttl_ms": 1000, "retry_backoff_ms": 100}


def run_drill(
    tmp: Path,
    messages: int = 3000,
    restarts: int = 1,
    workers: int = 2,
    down_s: float = 2.0,
    binary: str | None = None,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """SIGKILL the server ``restarts`` times mid-run (spread over the publish) and restart
    it on the same port and data; the audit (``lost``/``duplicated``/``pending`` must be 0).

    Workers (the ``counting`` processor) and the :class:`LedgerProducer` must reconnect
    with backoff on their own; the workers must be the same processes at the end.
    """
    binary = binary or find_redis_server(load_settings())
    data_dir = tmp / "redis"
    server = RedisServer(binary, data_dir, config=AOF_ALWAYS).start()
    home = tmp / "home"
    settings = load_settings(redis_url=server.url, home=home, **DRILL_SETTINGS)
    keys = transaction_keys(settings)
    env = child_env(server.url, home, **DRILL_SETTINGS)
    ledger = [bench_message(i) for i in range(messages)]
    producer = LedgerProducer(settings, keys, ledger, pause_s=0.01, deadline_s=timeout_s)
    started = time.monotonic()
    try:
        with Fleet(tmp) as fleet:
            pool = [
                fleet.worker("transactions", f"drill-{n}", env, TEST_PROCESSOR)
                for n in range(workers)
            ]
            wait_leases(redis.Redis.from_url(server.url, decode_responses=True), keys, pool)
            producer.start()
            acked_at_kills: list[int] = []
            for restart in range(restarts):
                # Spread the kills over the publish: after 1/(restarts+1), 2/(restarts+1), ...
                mark = messages * (restart + 1) // (restarts + 1)
                wait_until(
                    lambda mark=mark: len(producer.acknowledged) >= mark or not producer.is_alive(),
                    timeout_s,
                    0.005,
                    "producer progress",
                )
                acked_at_kills.append(len(producer.acknowledged))
                server.kill()
                time.sleep(down_s)
                server = RedisServer(binary, data_dir, port=server.port, config=AOF_ALWAYS)
                server.start()
            producer.join(timeout_s)
            if producer.is_alive() or producer.error:
                raise WaitTimeout(f"producer did not finish: {producer.error!r}")
            client = redis.Redis.from_url(server.url, decode_responses=True, socket_timeout=30)
            wait_until(
                lambda: group_drained(client, keys.stream, keys.group),
                timeout_s,
                0.05,
                "pending list drained after the restarts",
            )
            crashed = [child.name for child in pool if not child.alive()]
            saw_outage = [child.name for child in pool if "redis_unavailable" in child.log_text()]
            exits = [child.stop() for child in pool]
            wall = time.monotonic() - started
            result = audit(client, keys, CALLS_KEY)
            stream_entries = int(client.xlen(keys.stream))
    finally:
        producer.stop()
        server.stop()
    acked = producer.acknowledged
    return {
        "messages": messages,
        "acknowledged": len(acked),
        "stream_entries": stream_entries,
        "batches_resent": producer.batches_retried,
        "restarts": restarts,
        "acknowledged_at_kills": acked_at_kills,
        "workers_saw_outage": saw_outage,
        "lost": len(result.lost(acked)),
        "duplicated": len(result.applied_twice()),
        "dead_lettered": sum(result.dead_letters.values()),
        "pending": result.pending,
        "duplicate_processings": sum(max(0, n - 1) for n in result.processings.values()),
        "workers_crashed": crashed,
        "worker_exit_codes": exits,
        "wall_s": round(wall, 2),
    }
