"""Wall time of a publish run: one process per step vs all steps in one process.

Usage: ``python bench/spark_executor_wall_time.py [--quick] [--runs N] [--group G]``

Starts its own ``redis-server`` on a free port, marks an idle live consumer on both
streams (lag key 0), then times ``dagster asset materialize`` of one publish group for
one day through the real code location, once with ``multiprocess`` (one process, hence
one Spark driver JVM, per step) and once with ``in_process`` (the platform's executor:
one process and one Spark session per run), interleaved, each with a fresh Dagster home.
The wall time covers the whole CLI process, start-up included, as a user waits for it.

Prints a table and one final JSON line with the figures.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (
    base_parser,
    emit_json,
    machine_info,
    raw_client,
    redis_server,
)
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import all_stream_keys
from sentinel_platform_tests.harness.processes import child_env

DAY = "2026-11-20"
DAGSTER = str(Path(sys.executable).parent / "dagster")
MODES = ("multiprocess", "in_process")
SIZES = {  # (transactions, telemetry readings per source) per run
    "quick": (2_000, 96),
    "full": (20_000, 288),
}


def run_config(mode: str, size: str) -> dict[str, Any]:
    rows, readings = SIZES[size]
    return {
        "execution": {"config": {mode: {}}},
        "ops": {
            "raw_transactions": {"config": {"rows": rows, "spark_partitions": 2}},
            "telemetry_readings": {
                "config": {"sources": 8, "readings_per_source": readings, "spark_partitions": 2}
            },
        },
    }


def timed_run(env: dict[str, str], group: str, mode: str, size: str, home: Path) -> float:
    """Seconds for one ``dagster asset materialize`` of ``group``; raises if the run fails."""
    command = [
        DAGSTER,
        *("asset", "materialize", "-m", "sentinel_platform.definitions"),
        *("--select", f"group:{group}", "--partition", DAY),
        *("--config-json", json.dumps(run_config(mode, size))),
    ]
    started = time.monotonic()
    done = subprocess.run(
        command, env={**env, "DAGSTER_HOME": str(home)}, capture_output=True, text=True
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{mode} run failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return wall


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="runs per mode (default 1/3)")
    parser.add_argument("--group", default="axioms", choices=("axioms", "transactions"))
    args = parser.parse_args()
    size = "quick" if args.quick else "full"
    runs = args.runs or (1 if args.quick else 3)
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    with redis_server() as server, tempfile.TemporaryDirectory(prefix="bench-exec-") as tmp:
        client = raw_client(server.url)
        home = Path(tmp) / "home"
        env = child_env(server.url, home, lag_warn=50_000, lag_pause=100_000)
        env["SENTINEL_SPARK_CONF"] = "spark.driver.memory=1g,spark.sql.shuffle.partitions=2"
        settings = load_settings(redis_url=server.url, home=home)
        for index in range(runs):
            for mode in MODES:
                for keys in all_stream_keys(settings):
                    client.set(keys.lag, 0)
                dagster_home = Path(tmp) / f"dagster-{mode}-{index}"
                dagster_home.mkdir()
                walls[mode].append(timed_run(env, args.group, mode, size, dagster_home))
                print(f"run {index + 1}/{runs} {mode}: {walls[mode][-1]:.1f} s", flush=True)
        machine = machine_info(client)
    median = {mode: statistics.median(values) for mode, values in walls.items()}
    baseline = median["multiprocess"]
    print(f"\npublish group {args.group!r}, {size} size, median of {runs} run(s) per mode")
    print("| executor | wall s | x multiprocess |\n|---|---:|---:|")
    for mode in MODES:
        print(f"| {mode} | {median[mode]:.1f} | {median[mode] / baseline:.2f} |")
    emit_json(
        "spark_executor_wall_time",
        {
            "group": args.group,
            "size": size,
            "runs": runs,
            "wall_s": walls,
            "median_s": median,
            "in_process_vs_multiprocess": round(median["in_process"] / baseline, 3),
            "machine": machine,
        },
    )


if __name__ == "__main__":
    main()
