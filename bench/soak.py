"""Soak drill: 3 workers for 10 minutes through Redis restarts, a promotion and a long outage.

A primary and a replica (both AOF ``appendfsync always``) behind a relay, the stable
address every process uses (as a virtual IP or a service name would be). Three worker
processes (the harness's ``counting`` processor) consume while a ledger producer publishes
through the platform's publish path for most of the run; a few poison messages are
planted among the valid ones. Retention trims the stream as the run goes. On a schedule:

* the current primary is SIGKILLed and restarted on its port and data, several times;
* the replica is promoted (``FAILOVER``: the primary hands over and becomes its replica)
  and the relay sends new connections to it: kept connections now answer READONLY;
* the current primary is SIGKILLed and stays down for ``--outage`` seconds (90);
* another client writes entries whose bytes are not UTF-8, three times (each must be
  dead-lettered exactly once, its neighbours processed, no worker harmed);
* the consumer group is deleted (``XGROUP DESTROY``): the workers re-create it at 0 and
  read the retained entries again, which must neither apply an effect twice nor
  dead-letter anything twice.

The workers are never restarted by the drill. At the end it reports, for every message
Redis acknowledged to the producer: lost, applied twice, dead-lettered (only the planted
poison may be, each exactly once), still pending, and how many workers died (must be 0).
``--quick`` runs the same schedule in about two minutes with a shorter outage.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from bench.timing import (
    base_parser,
    bench_settings,
    emit_json,
    machine_info,
    print_table,
    raw_client,
    scratch_dir,
)
from sentinel_platform.redis_server import RedisServer, find_redis_server
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.drills import AOF_ALWAYS, LedgerProducer, audit, bench_message
from sentinel_platform_tests.harness.processes import TEST_PROCESSOR, Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.relay import Relay
from sentinel_platform_tests.harness.streams import group_drained
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until

NAME = "soak"
PROCESSOR = TEST_PROCESSOR
#: ``--busy-fraction``: the counting processor behind a downstream that is busy at times.
BUSY_PROCESSOR = "sentinel_platform_tests.harness.processors:busy_counting"
WORKER_SETTINGS = {"lease_ttl_ms": 2000, "retry_backoff_ms": 200}
WORKER_SETTINGS |= {"stream_retention_s": 0, "stream_retention_interval_s": 5}
WORKERS, POISON_EVERY = 3, 5000


@dataclass(frozen=True)
class Schedule:
    """When (seconds into the run) each incident happens, and how long the outage lasts."""

    duration_s: float
    publish_s: float
    restarts_at: tuple[float, ...]
    promote_at: float
    outage_at: float
    outage_s: float
    undecodable_at: tuple[float, ...] = ()
    destroy_group_at: float | None = None

    @classmethod
    def scaled(cls, duration_s: float, outage_s: float) -> Schedule:
        at = lambda fraction: round(duration_s * fraction, 1)  # noqa: E731
        return cls(
            duration_s=duration_s,
            publish_s=duration_s * 0.8,
            restarts_at=(at(0.1), at(0.25), at(0.8)),
            promote_at=at(0.4),
            outage_at=at(0.55),
            outage_s=outage_s,
            undecodable_at=(at(0.15), at(0.45), at(0.7)),
            destroy_group_at=at(0.65),
        )


class Pair:
    """The primary/replica pair; knows which one is the primary now."""

    def __init__(self, binary: str, data_dir: Path) -> None:
        self.primary = RedisServer(binary, data_dir / "a", config=dict(AOF_ALWAYS)).start()
        replica_of = {"replicaof": f"127.0.0.1 {self.primary.port}"}
        self.replica = RedisServer(
            binary, data_dir / "b", config={**AOF_ALWAYS, **replica_of}
        ).start()
        self.incidents: list[str] = []

    def wait_synced(self, timeout_s: float = 60.0) -> None:
        client = raw_client(self.replica.url)
        synced = lambda: client.info("replication")["master_link_status"] == "up"  # noqa: E731
        wait_until(lambda: _safe(synced), timeout_s, 0.1, "replica in sync")

    def restart_primary(self, down_s: float = 1.0) -> None:
        self.primary.kill()
        time.sleep(down_s)  # the incident itself
        self.primary.start(timeout_s=60)
        self.incidents.append(f"restart (down {down_s:.0f}s)")

    def promote(self, relay: Relay) -> None:
        """Coordinated hand-over: the replica becomes primary, the primary its replica."""
        self.wait_synced()
        old = raw_client(self.primary.url)
        old.execute_command("FAILOVER", "TO", "127.0.0.1", self.replica.port, "TIMEOUT", 10000)
        new = raw_client(self.replica.url)
        wait_until(lambda: new.info("replication")["role"] == "master", 30, 0.05, "promotion")
        relay.switch(self.replica.port)
        self.primary.config["replicaof"] = f"127.0.0.1 {self.replica.port}"
        self.replica.config.pop("replicaof", None)
        self.primary, self.replica = self.replica, self.primary
        self.incidents.append("replica promoted")

    def stop(self) -> None:
        self.replica.stop()
        self.primary.stop()


def _safe(check: Callable[[], bool]) -> bool:
    try:
        return check()
    except redis.RedisError:
        return False


def _messages(count: int) -> tuple[list[dict[str, str]], list[str]]:
    """``count`` messages, one in :data:`POISON_EVERY` a poison pill; and the poison keys."""
    poison = {index for index in range(count) if index % POISON_EVERY == POISON_EVERY // 2}
    messages = [bench_message(i, kind="poison" if i in poison else "valid") for i in range(count)]
    return messages, [messages[index]["key"] for index in sorted(poison)]


class ForeignWriter:
    """Another client of the stream: writes entries whose bytes are not UTF-8, deletes the
    group. Keys it got an id for are the undecodable entries Redis acknowledged."""

    def __init__(self, pair: Pair, relay: Relay, keys: StreamKeys) -> None:
        self.pair, self.relay, self.keys = pair, relay, keys
        self.undecodable: list[str] = []  # as the DLQ shows them (``\\xNN`` escapes)
        self._count = 0

    def write_undecodable(self, entries: int = 3) -> None:
        client = redis.Redis.from_url(self.relay.url, socket_timeout=10)  # bytes as they are
        written = 0
        for _ in range(entries):
            raw_key = f"undecodable{self._count}".encode() + b"\xff\xfe"
            self._count += 1
            try:
                client.xadd(self.keys.stream, {b"key": raw_key, b"data": b"\xc3(" * 8})
            except redis.RedisError:
                continue  # not acknowledged: not expected anywhere
            self.undecodable.append(raw_key.decode("utf-8", "backslashreplace"))
            written += 1
        client.close()
        self.pair.incidents.append(f"{written} undecodable entries")

    def destroy_group(self) -> None:
        with raw_client(self.relay.url) as client:
            client.xgroup_destroy(self.keys.stream, self.keys.group)
        self.pair.incidents.append("consumer group deleted")


def _run_schedule(
    schedule: Schedule, pair: Pair, relay: Relay, writer: ForeignWriter, started: float
) -> None:
    events: list[tuple[float, Callable[[], None]]] = [
        *[(at, pair.restart_primary) for at in schedule.restarts_at],
        (schedule.promote_at, lambda: pair.promote(relay)),
        (schedule.outage_at, lambda: pair.restart_primary(schedule.outage_s)),
        *[(at, writer.write_undecodable) for at in schedule.undecodable_at],
    ]
    if schedule.destroy_group_at is not None:
        events.append((schedule.destroy_group_at, writer.destroy_group))
    for at, action in sorted(events, key=lambda event: event[0]):
        time.sleep(max(0.0, started + at - time.monotonic()))
        action()


def run_soak(
    tmp: Path,
    schedule: Schedule,
    rate_per_s: int = 200,
    binary: str | None = None,
    busy_fraction: float = 0.0,
) -> dict[str, Any]:
    """Run the drill; the figures (``lost``/``duplicated``/``worker_deaths`` must be 0)."""
    binary = binary or find_redis_server(load_settings())
    pair = Pair(binary, tmp / "redis")
    pair.wait_synced()
    relay = Relay(pair.primary.port).start()
    home = tmp / "home"
    settings = bench_settings(relay.url, home, **WORKER_SETTINGS)
    keys = transaction_keys(settings)
    batch = 50
    messages, poison = _messages(int(rate_per_s * schedule.publish_s))
    producer = LedgerProducer(
        settings,
        keys,
        messages,
        batch=batch,
        pause_s=batch / rate_per_s,
        deadline_s=schedule.duration_s + 300,
    )
    env = child_env(relay.url, home, **WORKER_SETTINGS)
    processor = PROCESSOR
    if busy_fraction > 0:  # a downstream that answers "busy" part of the time (429s)
        processor, env["TEST_BUSY_FRACTION"] = BUSY_PROCESSOR, str(busy_fraction)
    writer = ForeignWriter(pair, relay, keys)
    started = time.monotonic()
    try:
        with Fleet(tmp) as fleet:
            pool = [
                fleet.worker("transactions", f"soak-{n}", env, processor) for n in range(WORKERS)
            ]
            wait_leases(raw_client(relay.url), keys, pool)
            producer.start()
            _run_schedule(schedule, pair, relay, writer, started)
            producer.join(schedule.duration_s + 300)
            if producer.is_alive() or producer.error:
                raise WaitTimeout(f"producer did not finish: {producer.error!r}")
            client = raw_client(pair.primary.url)
            drained = lambda: group_drained(client, keys.stream, keys.group)  # noqa: E731
            wait_until(lambda: _safe(drained), 300, 0.2, "pending list drained")
            deaths = [child.name for child in pool if not child.alive()]
            saw_outage = sum(1 for child in pool if "redis_unavailable" in child.log_text())
            trims = sum(child.log_text().count('"stream_trimmed"') for child in pool)
            exits = [child.stop() for child in pool]
            wall = time.monotonic() - started
            result = audit(client, keys, CALLS_KEY)
            retained = int(client.xlen(keys.stream))
    finally:
        producer.stop()
        relay.stop()
        pair.stop()
    acked = producer.acknowledged
    valid = [k for k in acked if k not in set(poison)]
    summary = result.summary(
        valid, poison=[k for k in poison if k in set(acked)], invalid=writer.undecodable
    )
    return {
        **summary,
        "acknowledged": len(acked),
        "poison_planted": len(poison),
        "undecodable_planted": len(writer.undecodable),
        "batches_resent": producer.batches_retried,
        "incidents": pair.incidents,
        "workers_saw_outage": saw_outage,
        "worker_deaths": len(deaths),
        "worker_exit_codes": exits,
        "stream_trims": trims,
        "entries_retained_at_end": retained,
        "wall_s": round(wall, 1),
        "busy_fraction": busy_fraction,
    }


#: The figures of a sound run: each 0.
MUST_BE_ZERO: tuple[str, ...] = (
    "lost",
    "duplicated",
    "dead_lettered_valid",
    "bad_not_dead_lettered_once",
)
MUST_BE_ZERO += ("wrong_reason", "pending", "worker_deaths")
#: The columns of the printed table.
SHOWN: tuple[str, ...] = ("acknowledged", "lost", "duplicated", "dead_lettered", "poison_planted")
SHOWN += ("undecodable_planted", "pending", "worker_deaths")


def verdict(figures: dict[str, Any]) -> bool:
    return all(figures[key] == 0 for key in MUST_BE_ZERO)


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__)
    parser.add_argument("--duration", type=float, default=None, help="seconds (600)")
    parser.add_argument("--outage", type=float, default=None, help="outage seconds (90)")
    parser.add_argument("--rate", type=int, default=200, help="messages per second published")
    parser.add_argument(
        "--busy-fraction", type=float, default=0.0, help="share of calls answered 'busy' (429)"
    )
    args = parser.parse_args(argv)
    duration = args.duration or (120.0 if args.quick else 600.0)
    outage = args.outage or (20.0 if args.quick else 90.0)
    schedule = Schedule.scaled(duration, outage)
    with scratch_dir("bench-soak-") as tmp:
        probe = RedisServer(find_redis_server(load_settings()), tmp / "probe").start()
        info = machine_info(raw_client(probe.url))
        probe.stop()
        try:
            figures = run_soak(tmp, schedule, args.rate, busy_fraction=args.busy_fraction)
        except WaitTimeout as exc:
            emit_json(NAME, {"error": str(exc), "machine": info})
            return 1
    ok = verdict(figures)
    print_table(
        f"soak: {WORKERS} workers, {duration:.0f}s, incidents: {', '.join(figures['incidents'])}",
        [key.removesuffix("_planted").replace("_", " ") for key in SHOWN],
        [[figures[key] for key in SHOWN]],
    )
    print(
        f"  wall {figures['wall_s']} s, resent batches {figures['batches_resent']}, "
        f"trims {figures['stream_trims']}, exit codes {figures['worker_exit_codes']}, "
        f"verdict {'OK' if ok else 'FAILED'}"
    )
    emit_json(NAME, {**figures, "ok": ok, "schedule": schedule.__dict__, "machine": info})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
