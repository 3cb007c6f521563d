"""Publish throughput: Spark executors vs a raw pipelined loop vs the original per-message guard.

Usage: ``python bench/publish_throughput.py [--quick] [--rows N] [--original-rows N]``

Starts its own ``redis-server`` on a free port (no persistence) and a local SparkSession,
then measures, each into an empty Redis:

* ``spark``: ``generate_transactions`` + :class:`PartitionPublisher` inside ``mapInArrow``
  (the production path: wire-model validation, pipelined batches, guard before each batch,
  lag key present at 0 as with a live idle worker); generation time is included;
* ``raw_pipeline``: one Python process, pre-serialised entries, pipelined XADD batches,
  no guard: the ceiling for a single client;
* ``original_guard``: Sentinel-L7's loop, ``GET`` the lag key then ``XADD`` for every
  message (two round trips per row).

Prints a table and one final JSON line with the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import redis

from bench._common import emit_json, machine_info, raw_client, redis_server
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.backpressure import BackpressureConfig
from sentinel_platform.streams.keys import transaction_keys
from sentinel_platform.streams.publish import (
    STATS_SCHEMA,
    TRANSACTION_COLUMNS,
    PartitionPublisher,
    PublishStats,
    publish_rows,
)

DAY = date(2026, 11, 21)
SAMPLE = (
    '{"id":"txn-20261121-7-%08d","merchant":"Costco Wholesale","category":"retail",'
    '"currency":"USD","amount":123.45,"message":"Weekly groceries","is_threat":false,'
    '"source":"simulator","timestamp":"2026-11-21T08:15:30.123Z"}'
)


def bench_spark(url: str, rows: int, partitions: int, batch_size: int) -> dict[str, Any]:
    from pyspark.sql import SparkSession

    from sentinel_platform.assets.generation import generate_transactions

    spark = (
        SparkSession.builder.master(os.environ.get("BENCH_SPARK_MASTER", "local[*]"))
        .appName("publish-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    partitions = partitions or spark.sparkContext.defaultParallelism
    settings = load_settings(redis_url=url)
    keys = transaction_keys(settings)
    client = redis.Redis.from_url(url, decode_responses=True)
    client.set(keys.lag, 0)  # a live, idle worker
    publisher = PartitionPublisher(
        url=url,
        cluster=False,
        keys=keys,
        kind="transactions",
        config=BackpressureConfig.from_settings(settings),
        batch_size=batch_size,
    )
    df = generate_transactions(spark, DAY, rows, 7, partitions).select(*TRANSACTION_COLUMNS)
    started = time.monotonic()
    df.write.format("noop").mode("overwrite").save()
    generate_s = time.monotonic() - started
    started = time.monotonic()
    parts = df.mapInArrow(publisher, STATS_SCHEMA).collect()
    elapsed = time.monotonic() - started
    stats = PublishStats.combine(PublishStats(**row.asDict()) for row in parts)
    assert stats.rows == rows == client.xlen(keys.stream), (stats.rows, rows)
    spark.stop()
    return {
        "rows": rows,
        "seconds": elapsed,
        "rows_per_s": rows / elapsed,
        "partitions": partitions,
        "generate_only_s": generate_s,
    }


def bench_raw_pipeline(url: str, rows: int, batch_size: int) -> dict[str, Any]:
    settings = load_settings(redis_url=url)
    keys = transaction_keys(settings)
    client = redis.Redis.from_url(url, decode_responses=True)
    entries = ({"data": SAMPLE % i} for i in range(rows))
    started = time.monotonic()
    stats = publish_rows(client, keys, entries, batch_size)
    elapsed = time.monotonic() - started
    assert stats.rows == rows == client.xlen(keys.stream)
    return {"rows": rows, "seconds": elapsed, "rows_per_s": rows / elapsed}


def bench_original_guard(url: str, rows: int) -> dict[str, Any]:
    """Sentinel-L7's producer: read the lag key, maybe sleep, XADD; per message."""
    settings = load_settings(redis_url=url)
    keys = transaction_keys(settings)
    client = redis.Redis.from_url(url, decode_responses=True)
    client.set(keys.lag, 0)
    warn, pause = settings.lag_warn, settings.lag_pause
    started = time.monotonic()
    for i in range(rows):
        lag = int(client.get(keys.lag) or 0)
        if lag > pause:
            while int(client.get(keys.lag) or 0) > pause:
                time.sleep(settings.lag_pause_poll_ms / 1000)
        elif lag > warn:
            time.sleep(settings.lag_warn_sleep_ms / 1000)
        client.xadd(keys.stream, {"data": SAMPLE % i})
    elapsed = time.monotonic() - started
    assert client.xlen(keys.stream) == rows
    return {"rows": rows, "seconds": elapsed, "rows_per_s": rows / elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 rows instead of 1,000,000")
    parser.add_argument("--rows", type=int, help="rows for the Spark and raw runs")
    parser.add_argument(
        "--original-rows",
        type=int,
        help="rows for the per-message loop (default: all of them; it is the slow one)",
    )
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=0, help="0: Spark's parallelism")
    args = parser.parse_args(argv)
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    original_rows = args.original_rows or rows

    with redis_server(config={"save": '""', "appendonly": "no"}) as server:
        flush = redis.Redis.from_url(server.url)
        machine = machine_info(raw_client(server.url))
        flush.flushdb()
        results: dict[str, dict[str, Any]] = {}
        results["spark"] = bench_spark(server.url, rows, args.partitions, args.batch_size)
        flush.flushdb()
        results["raw_pipeline"] = bench_raw_pipeline(server.url, rows, args.batch_size)
        flush.flushdb()
        results["original_guard"] = bench_original_guard(server.url, original_rows)

    print(f"{'path':<16} {'rows':>10} {'seconds':>9} {'rows/s':>11}")
    for name, r in results.items():
        print(f"{name:<16} {r['rows']:>10,} {r['seconds']:>9.2f} {r['rows_per_s']:>11,.0f}")
    spark = results["spark"]
    print(
        f"(spark: {spark['partitions']} partitions; generating the rows alone took "
        f"{spark['generate_only_s']:.2f}s; cpu count {os.cpu_count()})"
    )
    emit_json("publish_throughput", {"batch_size": args.batch_size, **results, "machine": machine})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
