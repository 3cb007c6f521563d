"""Fault-drill machinery shared by the drill tests and their long ``bench/`` versions.

Two ideas live here because every drill needs both:

* a **ledger producer**: publishes numbered bench messages through the platform's publish
  path (:func:`~sentinel_platform.streams.producer.publish.publish_rows`) in small batches and
  records a message as *acknowledged* only when Redis has answered the batch. When Redis
  goes away it backs off and resends the whole batch (which may duplicate entries in the
  stream: the workers' idempotency markers must absorb that);
* an **audit**: counts, per natural key, the result entries (effects), the dead letters
  and the pending entries, so a drill can state "nothing acknowledged was lost, nothing
  was applied twice, every bad message was dead-lettered once, the PEL is empty".
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import TRANSIENT_ERRORS, RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys

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
