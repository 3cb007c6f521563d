"""What every data domain runs with: the Spark resources and the one-session-per-run executor."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.shared.execution import spark_executor
from sentinel_platform.domains.shared.resources import data_resources
from sentinel_platform.resources.settings import SettingsResource


def defs(settings: SettingsResource) -> dg.Definitions:
    """Resources ``settings``, ``pyspark``, ``redis_publisher``, ``parquet_io_manager``;
    ``spark_executor`` for every job of the location, the UI's Materialize included."""
    return dg.Definitions(resources=data_resources(settings), executor=spark_executor)
