"""The Spark resource: dagster-pyspark's ``PySparkResource`` configured from settings.

``SENTINEL_SPARK_MASTER`` picks the engine (``local[*]`` by default, ``spark://host:7077``
for a standalone cluster, ``sc://host:15002`` for Spark Connect) and
``SENTINEL_SPARK_CONF`` adds any ``key=value`` pairs, which win over the defaults here.
The defaults favour a quiet, predictable session: the UI is off (turn it on with
``SENTINEL_SPARK_CONF=spark.ui.enabled=true``) and so is its console progress bar, which
would otherwise fill run logs; timestamps are rendered in UTC so the
ISO strings on the wire do not depend on the host's time zone, and shuffles use a few
partitions because the data sets are per-day slices.
"""

from __future__ import annotations

import os
import sys

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import SparkSession

from sentinel_platform.settings import Settings

DEFAULT_CONF: dict[str, str] = {
    "spark.app.name": "sentinel-platform",
    "spark.ui.enabled": "false",
    # The console progress bar writes `[Stage n:>  (0 + 2) / 2]` lines into run logs.
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
}


def spark_config(settings: Settings) -> dict[str, str]:
    """The Spark configuration for ``settings``: defaults, then master, then user pairs."""
    conf = dict(DEFAULT_CONF)
    if settings.spark_master.startswith("sc://"):
        conf["spark.remote"] = settings.spark_master
    else:
        conf["spark.master"] = settings.spark_master
    conf.update(settings.spark_conf_pairs)
    return conf


def use_this_python_for_workers() -> None:
    """Run Spark's Python workers with this interpreter (and its installed packages).

    PySpark reads ``PYSPARK_PYTHON`` when the SparkContext starts and falls back to
    ``python3`` on the PATH, which lacks redis-py and this package; the publish functions
    then fail on the executors with ``ModuleNotFoundError``. An explicit value (e.g. for a
    cluster whose hosts keep Python elsewhere) wins.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def spark_resource(settings: Settings) -> PySparkResource:
    use_this_python_for_workers()
    return PySparkResource(spark_config=spark_config(settings))


def session_metadata(spark: SparkSession) -> dict[str, dg.MetadataValue]:
    """Where a step's Spark work ran: master, application id and session time zone.

    Attached to every Spark asset and check result, so the UI (and the tests) show per
    step that the configured session, not a stray default one, did the work.
    """
    try:
        context = spark.sparkContext
        master, application = str(context.master), str(context.applicationId)
    except Exception:  # a Spark Connect session has no local SparkContext
        master = str(spark.conf.get("spark.remote", None) or spark.conf.get("spark.master", "?"))
        application = str(spark.conf.get("spark.app.id", None) or "?")
    return {
        "spark/master": dg.MetadataValue.text(master),
        "spark/application_id": dg.MetadataValue.text(application),
        "spark/session_time_zone": dg.MetadataValue.text(
            str(spark.conf.get("spark.sql.session.timeZone"))
        ),
    }
