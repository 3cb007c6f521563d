"""The Spark standalone fixture runs jobs in an executor the Worker launched, not the driver."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sentinel_platform_tests.scale_out.spark_standalone import SparkStandaloneCluster

pytestmark = pytest.mark.cluster


def test_a_job_runs_in_an_executor_launched_by_the_worker(
    spark_standalone: SparkStandaloneCluster,
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sentinel_platform_tests.scale_out.spark_probe",
            spark_standalone.master_url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=spark_standalone.env,
    )
    assert result.returncode == 0, result.stderr[-3000:] + spark_standalone.logs()
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["master"] == spark_standalone.master_url
    assert sorted(p["partition"] for p in report["partitions"]) == [0, 1]
    assert sum(p["rows"] for p in report["partitions"]) == 100
    for partition in report["partitions"]:
        chain = [a["pid"] for a in partition["ancestry"]]
        assert partition["pid"] != report["driver_pid"]
        assert report["driver_pid"] not in chain
        assert spark_standalone.worker_pid in chain, partition
        executor = chain[: chain.index(spark_standalone.worker_pid)]
        commands = [a["command"] for a in partition["ancestry"] if a["pid"] in executor]
        assert any("CoarseGrainedExecutorBackend" in c for c in commands), commands
