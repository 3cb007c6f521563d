"""The suite's Spark JVMs start from the class-data archive, and start without it too.

Each test starts a real Spark JVM in a process of its own with the environment the plugin
gives every test (``SPARK_CONF_DIR``, ``SPARK_SUBMIT_OPTS``). ``-Xshare:on`` makes the JVM
refuse to start unless it maps the archive on the class path Spark's launcher builds, so
the first test (a local session and a small job) fails if the archive is stale, misbuilt
or dumped on another class path; the second shows that a JVM started before the archive
exists runs anyway (Spark's launcher starting ``SparkSubmit``: a driver's command and
options, without a session's seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sentinel_platform_tests.harness import spark_jvm

pytestmark = pytest.mark.spark

JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
arguments = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
print("ARGS", " ".join(arguments.getInputArguments()))
print("COUNT", spark.range(0, 1000).filter("id % 3 = 0").count())
spark.stop()
"""


def run_session(submit_opts: str) -> str:
    env = {**os.environ, **spark_jvm.environment(), "SPARK_SUBMIT_OPTS": submit_opts}
    done = subprocess.run(
        [sys.executable, "-c", JOB], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_driver_jvm_maps_the_archive_on_the_launchers_class_path() -> None:
    archive = spark_jvm.build_archive()
    assert archive is not None and archive.stat().st_size > 0
    out = run_session(spark_jvm.submit_opts(archive) + " -Xshare:on")
    assert f"-XX:SharedArchiveFile={archive}" in out
    assert "-XX:TieredStopAtLevel=1" in out
    assert "COUNT 334" in out


def test_a_driver_jvm_starts_without_the_archive(tmp_path: Path) -> None:
    # Spark's own launcher, as for a driver, with an archive not built yet: SparkSubmit
    # starts and answers (``-Xshare:on`` in its place would stop it).
    submit = spark_jvm.pyspark_home() / "bin" / "spark-submit"
    env = {
        **os.environ,
        **spark_jvm.environment(),
        "SPARK_SUBMIT_OPTS": spark_jvm.submit_opts(tmp_path / "not-built-yet.jsa"),
    }
    done = subprocess.run(
        [str(submit), "--version"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Using Scala version" in done.stderr
