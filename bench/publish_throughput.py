"""Publish throughput: the Spark publish step alone against raw pipelined XADD of the same fields.

Usage: ``python -m bench publish_throughput [--quick] [--rows N] [--rounds N]``

Starts its own server on a free port (no persistence; or uses ``REDIS_URL``) and a local
SparkSession, generates the transactions once and caches them (generation is excluded
from every figure), collects their entries, then measures, each into an empty database:

* ``spark``: the production publish step, ``wire_frame`` (entries built in the JVM) +
  :class:`PartitionPublisher` inside ``mapInArrow`` (sampled wire-model check,
  pipelined batches, the backpressure guard asked before each batch; no consumers run, so
  the lag limits are set above the row count and the guard measures but never holds);
* ``raw_pipeline``: one Python process pipelining XADD of the same, pre-built entries
  through redis-py in batches of the same size, no guard: the goal's anchor.

A Spark job has a fixed start (scheduling, a Python worker per task) of a few tenths
of a second, which at 100,000 rows is half the publish; ``--quick`` therefore publishes
300,000 rows. The Spark path runs once on a small slice first, so Python workers are
started and modules imported before timing (a long publish pays that once). Every path
runs ``--rounds`` times, interleaved; the table shows the median. Goal (issue 16):
``spark >= 0.8x raw_pipeline``, printed with PASS/MISS. Ends with one JSON line.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from typing import Any

import redis

from bench.timing import (
    Goal,
    base_parser,
    emit_json,
    machine_info,
    print_goals,
    print_table,
    redis_server,
)
from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform.streams.producer.partition_publisher import (
    STATS_SCHEMA,
    PartitionPublisher,
)
from sentinel_platform.streams.producer.publish import TRANSACTION_COLUMNS, PublishStats

DAY = date(2026, 11, 21)
GOAL = 0.8
WARM_UP_ROWS = 2_000


def spark_session(settings: Settings) -> Any:
    """A session configured as the platform's Spark resource configures its own
    (``SENTINEL_SPARK_MASTER``, ``SENTINEL_SPARK_CONF``)."""
    from pyspark.sql import SparkSession

    from sentinel_platform.resources.spark import spark_config, use_this_python_for_workers

    use_this_python_for_workers()
    builder = SparkSession.builder
    for key, value in spark_config(settings).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cached_rows(spark: Any, rows: int, partitions: int) -> tuple[Any, float]:
    """The generated transactions, cached in executor memory, and the time that took."""
    from sentinel_platform.domains.shared.generation import generate_transactions

    df = generate_transactions(spark, DAY, rows, 7, partitions).select(*TRANSACTION_COLUMNS)
    started = time.monotonic()
    df = df.cache()
    assert df.count() == rows
    return df, time.monotonic() - started


def spark_publish(df: Any, publisher: PartitionPublisher) -> PublishStats:
    from sentinel_platform.resources.wire_columns import wire_frame

    parts = wire_frame(df, TRANSACTIONS).mapInArrow(publisher, STATS_SCHEMA).collect()
    return PublishStats.combine(PublishStats(**row.asDict()) for row in parts)


def raw_pipeline(client: redis.Redis, keys: StreamKeys, entries: list[str], batch: int) -> None:
    """redis-py's pipeline, ``XADD`` per entry, ``batch`` commands per round trip."""
    for start in range(0, len(entries), batch):
        pipe = client.pipeline(transaction=False)
        for data in entries[start : start + batch]:
            pipe.xadd(keys.stream, {"data": data})
        pipe.execute()


def timed(
    client: redis.Redis, keys: StreamKeys, rows: int, action: Callable[[], object], name: str
) -> float:
    """Seconds ``action`` took to put ``rows`` entries into an emptied database."""
    print(f"... {name}: {rows:,} rows", file=sys.stderr, flush=True)
    client.flushdb()
    started = time.monotonic()
    action()
    elapsed = time.monotonic() - started
    assert client.xlen(keys.stream) == rows, (client.xlen(keys.stream), rows)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = base_parser("publish_throughput", __doc__)
    parser.add_argument("--rows", type=int, help="rows (1,000,000; --quick: 300,000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=0, help="0: Spark's parallelism")
    args = parser.parse_args(argv)
    rows = args.rows or (300_000 if args.quick else 1_000_000)

    with redis_server(config={"save": '""', "appendonly": "no"}) as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        machine = machine_info(client)
        # No consumers run: limits above the row count keep the guard measuring every
        # batch without ever holding the producer.
        settings = load_settings(redis_url=server.url, lag_warn=10 * rows, lag_pause=20 * rows)
        keys = transaction_keys(settings)
        spark = spark_session(settings)
        partitions = args.partitions or spark.sparkContext.defaultParallelism
        df, generate_s = cached_rows(spark, rows, partitions)
        from sentinel_platform.resources.wire_columns import wire_frame

        entries = [r.data for r in wire_frame(df, TRANSACTIONS).select("data").collect()]
        publisher = PartitionPublisher(
            url=server.url,
            cluster=False,
            keys=keys,
            spec=TRANSACTIONS,
            config=BackpressureConfig.from_settings(settings),
            batch_size=args.batch_size,
        )
        warm = df.limit(WARM_UP_ROWS).repartition(partitions)
        timed(client, keys, WARM_UP_ROWS, lambda: spark_publish(warm, publisher), "warm-up")

        seconds: dict[str, list[float]] = {}
        paths: dict[str, tuple[int, Callable[[], object]]] = {
            "spark": (rows, lambda: spark_publish(df, publisher)),
            "raw_pipeline": (rows, lambda: raw_pipeline(client, keys, entries, args.batch_size)),
        }
        for _ in range(args.rounds):
            for name, (count, action) in paths.items():
                seconds.setdefault(name, []).append(timed(client, keys, count, action, name))
        spark.stop()

    results = {
        name: {
            "rows": paths[name][0],
            "seconds": statistics.median(values),
            "rows_per_s": paths[name][0] / statistics.median(values),
            "rows_per_s_each": [round(paths[name][0] / s) for s in values],
        }
        for name, values in seconds.items()
    }
    print_table(
        f"generation (excluded) {generate_s:.2f}s, {partitions} partitions, batches of "
        f"{args.batch_size}, {args.rounds} rounds, server {machine.get('server')}",
        ["path", "rows", "seconds", "rows/s (median)", "each round"],
        [
            [k, r["rows"], r["seconds"], r["rows_per_s"], r["rows_per_s_each"]]
            for k, r in results.items()
        ],
    )
    ratio = results["spark"]["rows_per_s"] / results["raw_pipeline"]["rows_per_s"]
    goals = print_goals([Goal(f"publish: spark >= {GOAL}x raw_pipeline", round(ratio, 3), GOAL)])
    emit_json(
        "publish_throughput",
        {
            "batch_size": args.batch_size,
            "partitions": partitions,
            "generate_s": generate_s,
            **results,
            "spark_x_raw": round(ratio, 3),
            "goals": goals,
            "machine": machine,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
