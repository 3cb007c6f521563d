"""The resources the data domains use, built once for the code location."""

from __future__ import annotations

from sentinel_platform.domains.shared.common import IO_MANAGER_KEY
from sentinel_platform.resources.io_manager import SparkParquetIOManager
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.spark import spark_resource


def data_resources(settings: SettingsResource) -> dict[str, object]:
    """Resource keys the data assets use: ``settings``, ``pyspark``, ``redis_publisher``, the
    IO manager; every one of them reads its settings through ``settings``.

    The Spark session's configuration is read when the code location loads (a session is
    configured once), so a bad setting fails the load naming the variable. The IO manager
    holds the same ``pyspark`` resource, so a step that only loads or stores a DataFrame
    gets the configured session too.
    """
    pyspark = spark_resource(settings.load())
    return {
        "settings": settings,
        "pyspark": pyspark,
        "redis_publisher": RedisPublisherResource(settings=settings),
        IO_MANAGER_KEY: SparkParquetIOManager(pyspark=pyspark, settings=settings),
    }
