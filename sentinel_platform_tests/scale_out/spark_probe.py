"""A tiny Spark driver run as its own process: ``python -m ...spark_probe <master-url>``.

It runs a two-partition job on the given master and prints, as one JSON line, the
driver's PID and, per partition, the PID, parent PID and environment markers of the
Python process that computed it. The smoke test uses it to show that work leaves the
driver: a separate driver process keeps the test session free of a second SparkContext.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any


def _ancestry() -> list[dict[str, Any]]:
    """(pid, command) of every ancestor, read where the code runs (it exits with the app)."""
    chain = []
    pid = os.getpid()
    while pid > 1:
        with open(f"/proc/{pid}/status") as handle:
            ppid = int(next(line.split()[1] for line in handle if line.startswith("PPid:")))
        if ppid <= 1:
            break
        with open(f"/proc/{ppid}/cmdline", "rb") as handle:
            command = handle.read().replace(b"\0", b" ").decode(errors="replace")
        chain.append({"pid": ppid, "command": command[-300:]})
        pid = ppid
    return chain


def _who(index: int, rows: Iterator[int]) -> Iterator[dict[str, Any]]:
    yield {
        "partition": index,
        "rows": sum(1 for _ in rows),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "spark_env": sorted(name for name in os.environ if name.startswith("SPARK_")),
        "ancestry": _ancestry(),
    }


def main(master: str) -> None:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("sentinel-scale-out-probe")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    try:
        rdd = spark.sparkContext.parallelize(range(100), 2)
        partitions = rdd.mapPartitionsWithIndex(_who).collect()
        print(
            json.dumps(
                {
                    "driver_pid": os.getpid(),
                    "master": spark.sparkContext.master,
                    "partitions": partitions,
                }
            ),
            flush=True,
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
