"""The Spark standalone fixture is a live Master with one registered Worker of the sized shape.

Cheap on purpose (the Master's own JSON status page, the daemons' command lines): the proof
that jobs really run in that Worker's executors, and not in the driver, is the publish test
next door.
"""

from __future__ import annotations

import pytest

from sentinel_platform_tests.harness.spark_standalone import (
    SparkStandaloneCluster,
    command_line,
)

pytestmark = pytest.mark.cluster


def test_master_is_alive_with_one_worker_of_one_core(
    spark_standalone: SparkStandaloneCluster,
) -> None:
    status = spark_standalone.status()
    assert status is not None, spark_standalone.logs()
    assert status["url"] == spark_standalone.master_url
    assert status["status"] == "ALIVE"
    (worker,) = [w for w in status["workers"] if w["state"] == "ALIVE"]
    assert (worker["cores"], worker["memory"]) == (1, 1024)
    assert worker["host"] == "127.0.0.1"
    assert "org.apache.spark.deploy.worker.Worker" in command_line(spark_standalone.worker_pid)


def test_the_daemons_run_with_the_suites_jvm_options(
    spark_standalone: SparkStandaloneCluster,
) -> None:
    # Their launcher reads SPARK_DAEMON_JAVA_OPTS (a driver's reads SPARK_SUBMIT_OPTS).
    assert spark_standalone.master is not None
    for pid in (spark_standalone.master.process.pid, spark_standalone.worker_pid):
        line = command_line(pid)
        assert "-XX:TieredStopAtLevel=1" in line and "-XX:+UseSerialGC" in line, line
        assert "-XX:SharedArchiveFile=" in line, line
