"""Shard spread: messages and server CPU per master, a stream of 3 shards against one of 1.

On a real 3-primary Redis Cluster on loopback (the suite's cluster harness), N generated
transactions (``--messages``, 300,000; 30,000 with ``--quick``), cached in Spark, are
published from Spark by the platform's publisher resource, which routes each to its id's
shard of ``sharded`` (3 shards, declared by ``sentinel_platform_tests.sharded_stream``),
then drained by W real worker processes (``python -m sentinel_platform.workers``, the
harness's no-op processor for transactions). The same N go to ``transactions`` (1 shard)
in the same run.

The groups are parked at the end of their shards while the workers start and released
together, so the drain is timed from the release to every shard drained. For each case:
messages per master (each shard's length at the primary its slot is on), each primary's
server CPU seconds over the drain (``INFO cpu``, user + system, before and after), the
publish and drain rates, and what came out: every key's result once (0 lost, 0 applied
twice).

Goals (issue 40): with 3 shards, each master's messages and server CPU within 20% of a
third; with 1 shard, every message on one master.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from bench.cells import redis_cpu_s
from bench.publish_throughput import cached_rows, spark_session
from bench.timing import (
    Goal,
    base_parser,
    emit_json,
    machine_info,
    print_goals,
    print_table,
    ratio,
    scratch_dir,
)
from sentinel_platform.registry import spec_for
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.processes import NOOP_TRANSACTIONS_PROCESSOR, launch_worker
from sentinel_platform_tests.harness.redis_cluster import (
    RedisClusterProcess,
    find_cluster_binaries,
)
from sentinel_platform_tests.harness.waits import wait_until

NAME = "shard_spread"
STREAM_MODULE = "sentinel_platform_tests.sharded_stream"
CASES = ("sharded", "transactions")
PARTITIONS = 4
#: Rows published once before the cases: the first publish of a session pays the JVM's
#: and the executors' warm-up (about half the rate after it), which would fall on one case.
WARM_UP = 20_000
#: Each master's share may be this far from an even one (issue 40: 20%).
SPREAD_GOAL = 0.2


@dataclass(frozen=True)
class Outcome:
    """One case: what each master held and spent, the rates, what came out."""

    case: str
    shards: int
    messages_by_master: dict[int, int]
    cpu_s_by_master: dict[int, float]
    publish_per_s: float
    drain_per_s: float
    lost: int
    twice: int


def spread_of(figures: dict[int, float]) -> float | None:
    """The largest distance of a master's share from an even one, as a fraction of it."""
    total = sum(figures.values())
    if not total:
        return None
    even = total / len(figures)
    return round(max(abs(value - even) / even for value in figures.values()), 3)


def main(argv: Sequence[str]) -> int:
    parser = base_parser(NAME, __doc__)
    parser.add_argument("--messages", type=int, default=None, help="messages per case")
    parser.add_argument("--workers", type=int, default=2, help="worker processes per case")
    args = parser.parse_args(argv)
    count = args.messages or (30_000 if args.quick else 300_000)
    found = find_cluster_binaries()
    if isinstance(found, str):
        print(f"{NAME}: {found}", file=sys.stderr)
        return 2
    with scratch_dir(NAME) as home:
        cluster = RedisClusterProcess(*found, home / "cluster").start()
        os.environ["SENTINEL_STREAM_MODULES"] = STREAM_MODULE  # for the publisher resource
        try:
            frame, _ = cached_rows(spark_session(load_settings()), count, PARTITIONS)
            ids = {row.id for row in frame.select("id").toLocalIterator()}
            publish(cluster.url, "sharded", frame.limit(WARM_UP))  # each case flushes it
            outcomes = [run_case(cluster, home, case, frame, ids, args.workers) for case in CASES]
        finally:
            cluster.stop()
    report(outcomes, count, args.workers)
    return 0


def run_case(
    cluster: RedisClusterProcess, home: Path, case: str, frame: Any, ids: set[str], workers: int
) -> Outcome:
    env = {
        **os.environ,
        "REDIS_URL": cluster.url,
        "SENTINEL_HOME": str(home / case),
        "SENTINEL_STREAM_MODULES": STREAM_MODULE,
    }
    settings = load_settings(redis_url=cluster.url, home=home / case, stream_modules=STREAM_MODULE)
    for port in cluster.ports:
        with cluster.node_client(port) as node:
            node.flushall()
    client = connect(settings)
    try:
        spec = spec_for(case, settings)
        shards = keys_of_shards(client, settings, spec)
        publish_s = publish(cluster.url, case, frame)
        by_master: Counter[int] = Counter()
        for shard in shards:
            by_master[cluster.port_for_key(shard.stream)] += int(client.xlen(shard.stream))
        for shard in shards:  # parked: nothing readable until the release
            client.xgroup_create(shard.stream, shard.group, id="$")
        fleet = [
            launch_worker(env, home, case, f"{case}-{n}", NOOP_TRANSACTIONS_PROCESSOR)
            for n in range(workers)
        ]
        try:
            for worker in fleet:  # serving every shard
                wait_until(lambda w=worker: all(w.lease_alive(client, s) for s in shards), 60)
            before = _cpu(cluster)
            started = time.monotonic()
            for shard in shards:
                client.xgroup_setid(shard.stream, shard.group, "0", entries_read=0)
            wait_until(lambda: all(_drained(client, s) for s in shards), 600, 0.05)
            drain_s = time.monotonic() - started
            after = _cpu(cluster)
        finally:
            for worker in fleet:
                worker.stop(30)
        lost, twice = _audit(client, shards, ids)
        messages = {port: by_master.get(port, 0) for port in cluster.ports}
        cpu = {p: round(after[p] - before[p], 3) for p in cluster.ports}
        rates = round(len(ids) / publish_s), round(len(ids) / drain_s)
        return Outcome(case, len(shards), messages, cpu, *rates, lost, twice)
    finally:
        client.close()


def publish(url: str, case: str, frame: Any) -> float:
    """``frame`` published from Spark to ``case`` by the platform's publisher resource (no
    worker reads yet: limits far above the backlog); the seconds it took."""
    publisher = RedisPublisherResource(redis_url=url, lag_warn=10**9, lag_pause=2 * 10**9)
    started = time.monotonic()
    publisher.publish_dataframe(frame, case)
    return time.monotonic() - started


def _drained(client: RedisClient, shard: StreamKeys) -> bool:
    try:
        group = next(g for g in client.xinfo_groups(shard.stream) if g["name"] == shard.group)
    except (redis.ResponseError, StopIteration):
        return False
    return int(group["pending"]) == 0 and group.get("lag") == 0


def _cpu(cluster: RedisClusterProcess) -> dict[int, float]:
    out = {}
    for port in cluster.ports:
        with cluster.node_client(port) as node:
            out[port] = redis_cpu_s(node)
    return out


def _audit(client: RedisClient, shards: Sequence[StreamKeys], ids: set[str]) -> tuple[int, int]:
    """Keys without a result, and results beyond one per key."""
    seen: Counter[str] = Counter()
    for results in dict.fromkeys(shard.results for shard in shards):
        last = "-"
        while rows := client.xrange(results, min=last, max="+", count=10_000):
            seen.update(fields["key"] for _id, fields in rows)
            last = "(" + rows[-1][0]
    lost = len(ids - seen.keys())
    return lost, sum(seen.values()) - len(seen)


def _row(o: Outcome) -> list[object]:
    messages = " / ".join(str(v) for v in o.messages_by_master.values())
    cpu = " / ".join(f"{v:.2f}" for v in o.cpu_s_by_master.values())
    return [o.case, o.shards, messages, cpu, o.publish_per_s, o.drain_per_s, o.lost, o.twice]


def report(outcomes: Sequence[Outcome], count: int, workers: int) -> None:
    headers = ["stream", "shards", "messages per master", "server CPU s per master"]
    headers += ["publish /s", "drain /s", "lost", "twice"]
    title = f"{count} messages, {workers} workers, 3 masters"
    print_table(title, headers, [_row(o) for o in outcomes])
    sharded, single = outcomes
    spread = "3 shards: {} per master, worst distance from a third"
    messages = {port: float(n) for port, n in sharded.messages_by_master.items()}
    goals = [
        Goal(spread.format("messages"), spread_of(messages), SPREAD_GOAL, at_most=True),
        Goal(spread.format("server CPU"), spread_of(sharded.cpu_s_by_master), SPREAD_GOAL, True),
        Goal(
            "1 shard: share of the messages on its master",
            ratio(max(single.messages_by_master.values()), count),
            1.0,
        ),
        Goal(
            "lost or applied twice, both cases",
            sum(o.lost + o.twice for o in outcomes),
            0,
            True,
            "",
        ),
    ]
    verdicts = print_goals(goals)
    payload = {"machine": machine_info(), "messages": count, "workers": workers}
    emit_json(NAME, {**payload, "outcomes": [o.__dict__ for o in outcomes], "goals": verdicts})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
