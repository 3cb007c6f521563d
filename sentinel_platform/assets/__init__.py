"""The Spark data assets, their checks, jobs and resources, listed for the definitions file.

Jobs (all three are what sensors and schedules launch):

* ``publish_transactions``: group ``transactions`` for one day (source, enrich, check,
  publish to ``transactions``);
* ``publish_axioms``: group ``axioms`` for one day (telemetry, axioms, check, publish to
  ``synapse:axioms``);
* ``report_compliance``: group ``reporting`` (read the result streams back, summarise).

``spark_executor`` (:mod:`~sentinel_platform.assets.execution`) is the code location's
executor, so these jobs, sensor and schedule runs and the UI's "Materialize" all run a
run's steps in one process with one Spark session.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from sentinel_platform.assets.axioms import axiom_stream, axioms, telemetry_readings
from sentinel_platform.assets.common import DAILY, IO_MANAGER_KEY
from sentinel_platform.assets.reporting import (
    compliance_events,
    compliance_report,
    transaction_verdicts,
)
from sentinel_platform.assets.transactions import (
    enriched_transactions,
    raw_transactions,
    transaction_stream,
)
from sentinel_platform.resources.io_manager import SparkParquetIOManager
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.spark import spark_resource
from sentinel_platform.settings import Settings

TRANSACTION_ASSETS = [raw_transactions, enriched_transactions, transaction_stream]
AXIOM_ASSETS = [telemetry_readings, axioms, axiom_stream]
REPORTING_ASSETS = [transaction_verdicts, compliance_events, compliance_report]
DATA_ASSETS = [*TRANSACTION_ASSETS, *AXIOM_ASSETS, *REPORTING_ASSETS]


def publish_selection(group: str, stream_asset: dg.AssetsDefinition) -> dg.AssetSelection:
    """A group's assets and data-quality checks, without the stream-health checks.

    Selecting a group also selects every check on its assets. The health checks on the
    stream asset (lag, DLQ, delivery counts) judge the consumers, not this run: run right
    after a publish they would see the backlog the run just created and, being blocking,
    fail it. The sensors and the checks schedule run them instead.
    """
    return dg.AssetSelection.groups(group) - dg.AssetSelection.checks_for_assets(stream_asset)


publish_transactions = dg.define_asset_job(
    "publish_transactions",
    selection=publish_selection("transactions", transaction_stream),
    partitions_def=DAILY,
    description="Build, check and publish one day of transactions to the transactions stream.",
)
publish_axioms = dg.define_asset_job(
    "publish_axioms",
    selection=publish_selection("axioms", axiom_stream),
    partitions_def=DAILY,
    description="Build, check and publish one day of axioms to the axiom stream.",
)
report_compliance = dg.define_asset_job(
    "report_compliance",
    selection=dg.AssetSelection.groups("reporting"),
    description="Read the workers' result streams back and summarise them.",
)
DATA_JOBS = [publish_transactions, publish_axioms, report_compliance]


def data_resources(settings: Settings) -> dict[str, object]:
    """Resource keys the data assets use: ``pyspark``, ``redis_publisher``, the IO manager.

    The IO manager holds the same ``pyspark`` resource, so a step that only loads or
    stores a DataFrame gets the configured session too.
    """
    pyspark = spark_resource(settings)
    return {
        "pyspark": pyspark,
        "redis_publisher": RedisPublisherResource(),
        IO_MANAGER_KEY: SparkParquetIOManager(pyspark=pyspark),
    }


def __getattr__(name: str) -> Any:
    # The checks import the assets they check; importing them lazily keeps
    # ``import sentinel_platform.checks.data_quality`` free of an import cycle.
    if name == "DATA_CHECKS":
        from sentinel_platform.checks.data_quality import axioms_quality, transactions_quality

        return [transactions_quality, axioms_quality]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
