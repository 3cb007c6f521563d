"""A 10-partition backfill of the transactions group through the real code location, on
SQLite and on PostgreSQL.

Usage: ``python bench/backfill.py [--quick] [--partitions N] [--rows N]``

For each storage, a fresh ``SENTINEL_HOME``: ``sentinel up --production`` (gRPC code
server, webserver, daemon, one worker per stream) against one throw-away Redis, with the
instance in SQLite files or in a throw-away PostgreSQL database (Debian's ``postgresql``
binaries, as the tests start them). The lag gate and the reporting automation are
stopped first (they would launch runs of their own), lag limits are set out of reach (the
subject is the run queue, not backpressure). Then one asset backfill of the transactions
group (``raw_transactions`` -> ``enriched_transactions`` -> ``transaction_stream``), N
daily partitions of ``--rows`` generated rows, launched through GraphQL as the UI does.

Measured, per storage: wall time from the launch to the backfill's completion,
partitions per minute, the peak number of Spark driver JVMs alive at once and their peak
resident memory together (``/proc``, sampled every 0.25 s), and the most runs in progress
at once (from the runs' own start and end times). Goals: the JVM count never above the
run queue's limit, PostgreSQL within 1.2x of SQLite's wall time.

Prints a table and one final JSON line with the figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (
    base_parser,
    emit_json,
    machine_info,
    print_table,
    ratio,
    raw_client,
    redis_server,
    scratch_dir,
)
from sentinel_platform.redis_server import free_port
from sentinel_platform.settings import load_settings
from sentinel_platform_tests.harness.postgres import start_postgres
from sentinel_platform_tests.harness.processes import child_env
from sentinel_platform_tests.harness.waits import wait_until

SENTINEL = str(Path(sys.executable).parent / "sentinel")
FIRST_DAY = date(2026, 4, 1)
ASSETS = ["raw_transactions", "enriched_transactions", "transaction_stream"]
#: Launch their own runs; stopped so that only the backfill runs.
AUTOMATION = ("consumer_lag_sensor", "reporting_automation_sensor")
WALL_RATIO_GOAL = 1.2
LAUNCH = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}"""
BACKFILL = """query($id: String!) {
  partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } } }"""
RUNS = """query($id: String!) {
  runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
    ... on Runs { results { runId status startTime endTime } } } }"""


def graphql(port: int, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer: dict[str, Any] = json.loads(response.read())
    if "errors" in answer:
        raise RuntimeError(answer["errors"])
    return dict(answer["data"])


def spark_jvms() -> list[psutil.Process]:
    """Spark driver JVMs on this machine (``SparkSubmit``, as pyspark starts them)."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if (
            cmdline
            and "java" in os.path.basename(cmdline[0])
            and any("org.apache.spark.deploy.SparkSubmit" in part for part in cmdline)
        ):
            found.append(process)
    return found


@dataclass
class JvmSampler:
    """Counts the Spark JVMs and sums their resident memory every ``interval_s``."""

    interval_s: float = 0.25
    peak_count: int = 0
    peak_rss_mb: float = 0.0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            rss = 0
            jvms = spark_jvms()
            for jvm in jvms:
                with contextlib.suppress(psutil.Error):
                    rss += jvm.memory_info().rss
            self.peak_count = max(self.peak_count, len(jvms))
            self.peak_rss_mb = max(self.peak_rss_mb, rss / 2**20)
            self.samples += 1
            self._stop.wait(self.interval_s)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[JvmSampler]:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(5)


@contextlib.contextmanager
def platform(env: dict[str, str], home: Path) -> Iterator[int]:
    """``sentinel up --production`` with the automation that launches runs stopped."""
    workspace = Path(__file__).resolve().parents[1] / "workspace.yaml"
    env = {**env, "DAGSTER_HOME": str(home / "dagster")}
    from sentinel_platform.cli.dagster_home import ensure_dagster_home

    url = env.get("SENTINEL_DAGSTER_POSTGRES_URL") or None
    ensure_dagster_home(home / "dagster", load_settings(home=home, dagster_postgres_url=url))
    for sensor in AUTOMATION:
        subprocess.run(
            [sys.executable, "-m", "dagster", "sensor", "stop", sensor, "-w", str(workspace)],
            env=env,
            check=True,
            capture_output=True,
            timeout=180,
        )
    port = free_port()
    argv = [SENTINEL, "up", "--production", "--no-demo", "--port", str(port)]
    argv += ["--code-port", str(free_port())]
    log = (home / "bench-up.log").open("wb")
    up = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
                    return True
            except OSError:
                return False

        wait_until(ready, 300, 0.5, "the webserver answers")
        yield port
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(180)
        except subprocess.TimeoutExpired:
            up.kill()
        log.close()


def measure(
    storage: str, env: dict[str, str], home: Path, partitions: int, rows: int
) -> dict[str, Any]:
    days = [(FIRST_DAY + timedelta(days=i)).isoformat() for i in range(partitions)]
    with platform(env, home) as port, JvmSampler().sampling() as sampler:
        started = time.monotonic()
        launched = graphql(
            port,
            LAUNCH,
            {
                "params": {
                    "assetSelection": [{"path": [name]} for name in ASSETS],
                    "partitionNames": days,
                    "runConfigData": {
                        "ops": {"raw_transactions": {"config": {"rows": rows, "seed": 5}}}
                    },
                }
            },
        )["launchPartitionBackfill"]
        if launched["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(launched)
        backfill = launched["backfillId"]

        def status() -> str:
            answer = graphql(port, BACKFILL, {"id": backfill})["partitionBackfillOrError"]
            return str(answer["status"])

        final = wait_until(
            lambda: (s := status()) not in ("REQUESTED", "CANCELING") and s,
            3600,
            1.0,
            "the backfill ends",
        )
        wall_s = time.monotonic() - started
        runs = graphql(port, RUNS, {"id": backfill})["runsOrError"]["results"]
    spans = [(r["startTime"], r["endTime"]) for r in runs if r["startTime"] and r["endTime"]]
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = peak_runs = 0
    for _, step in edges:
        running += step
        peak_runs = max(peak_runs, running)
    return {
        "storage": storage,
        "status": final,
        "partitions": partitions,
        "runs_succeeded": sum(r["status"] == "SUCCESS" for r in runs),
        "wall_s": round(wall_s, 1),
        "partitions_per_min": round(partitions / wall_s * 60, 2),
        "peak_spark_jvms": sampler.peak_count,
        "peak_jvm_rss_mb": round(sampler.peak_rss_mb),
        "max_concurrent_runs_observed": peak_runs,
        "run_limit": load_settings(home=home).max_concurrent_runs,
        "samples": sampler.samples,
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=None)
    parser.add_argument("--rows", type=int, default=2_000, help="generated rows per partition")
    args = parser.parse_args()
    partitions = args.partitions or (3 if args.quick else 10)
    results = []
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(redis_server())
        postgres = start_postgres()
        stack.callback(postgres.stop)
        client = raw_client(server.url)
        info = machine_info(client)
        for storage in ("sqlite", "postgres"):
            client.flushall()
            home = stack.enter_context(scratch_dir(f"bench-backfill-{storage}-")) / "home"
            extra = {"lag_warn": 1_000_000, "lag_pause": 2_000_000}
            if storage == "postgres":
                extra["dagster_postgres_url"] = postgres.create_database()  # type: ignore[assignment]
            env = child_env(server.url, home, **extra)
            print(f"== {storage}: {partitions} partitions of {args.rows} rows", flush=True)
            results.append(measure(storage, env, home, partitions, args.rows))
            print(json.dumps(results[-1]), flush=True)
    headers = list(results[0])
    print_table("backfill of the transactions group", headers, [list(r.values()) for r in results])
    sqlite, pg = results
    wall_ratio = ratio(pg["wall_s"], sqlite["wall_s"])
    jvms_ok = all(r["peak_spark_jvms"] <= r["run_limit"] for r in results)
    print(f"peak Spark JVMs within the run limit: {'PASS' if jvms_ok else 'MISS'}")
    verdict = "PASS" if wall_ratio is not None and wall_ratio <= WALL_RATIO_GOAL else "MISS"
    print(f"PostgreSQL / SQLite wall time {wall_ratio} (goal <= {WALL_RATIO_GOAL}): {verdict}")
    emit_json(
        "backfill",
        {
            "machine": info,
            "results": results,
            "pg_sqlite_wall_ratio": wall_ratio,
            "jvms_within_limit": jvms_ok,
        },
    )


if __name__ == "__main__":
    main()
