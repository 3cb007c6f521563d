"""The data domains' resources as the deployed definitions get them, on the test server."""

from __future__ import annotations

from typing import Any

from sentinel_platform.settings import Settings


def resources_on(settings: Settings, base_uri: str | None) -> dict[str, Any]:
    """The definitions' resources on the test Redis and home (Spark: the test session).

    The settings resource carries the test server and home, as the environment does for
    the deployed definitions. The IO manager stores under ``base_uri``; ``None`` leaves it
    to the settings, as in the deployed definitions.
    """
    from sentinel_platform.resources.io_manager import SparkParquetIOManager
    from sentinel_platform.resources.redis_publisher import RedisPublisherResource
    from sentinel_platform.resources.settings import SettingsResource
    from sentinel_platform.resources.spark import spark_resource

    resource = SettingsResource(
        overrides={"redis_url": settings.redis_url_value, "home": str(settings.home_dir)}
    )
    pyspark = spark_resource(settings)
    return {
        "settings": resource,
        "pyspark": pyspark,
        "redis_publisher": RedisPublisherResource(max_pause_s=20, settings=resource),
        "parquet_io_manager": SparkParquetIOManager(
            pyspark=pyspark, base_uri=base_uri, settings=resource
        ),
    }
