"""Generated data does not depend on the Spark session's time zone, and no asset changes it.

Every step of an in-process run shares one session, so an asset that set the zone would
silently change it for the steps after it. The real assets run through Dagster twice on
the same real local session: once with the session zone UTC, once with
``SENTINEL_SPARK_CONF`` setting ``America/New_York``, for a day on which New York skips
an hour. The data is identical, its timestamps are UTC, and the zone is still the
configured one afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.axioms.assets import telemetry_readings
from sentinel_platform.domains.transactions.assets import enriched_transactions, raw_transactions
from sentinel_platform.resources.io_manager import SparkParquetIOManager
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.spark import spark_resource
from sentinel_platform.settings import Settings
from sentinel_platform.storage_uri import join

pytestmark = pytest.mark.spark

DAY = "2026-03-08"  # US clocks spring forward: New York has no 02:00-03:00 that night
NEW_YORK = "America/New_York"
ZONE_KEY = "spark.sql.session.timeZone"
ASSETS = ("raw_transactions", "enriched_transactions", "telemetry_readings")
SMALL = {
    "ops": {
        "raw_transactions": {"config": {"rows": 400, "spark_partitions": 2}},
        "telemetry_readings": {
            "config": {"sources": 3, "readings_per_source": 96, "spark_partitions": 2}
        },
    }
}
BUCKETS = ((6, "night"), (12, "morning"), (18, "afternoon"), (24, "evening"))


@pytest.fixture
def session_zone_restored(spark: Any) -> Iterator[None]:
    """The shared test session gets its UTC zone back, whatever a test set."""
    yield
    spark.conf.set(ZONE_KEY, "UTC")


def materialize_in_zone(
    zone: str,
    make_settings: Callable[..., Settings],
    spark: Any,
    data_dir: Path,
    instance: dg.DagsterInstance,
) -> dict[str, list[dict[str, Any]]]:
    """Run the assets with the configured session in ``zone``; their stored rows."""
    settings = make_settings(spark_conf=json.dumps({ZONE_KEY: zone}), data_dir=str(data_dir))
    pyspark = spark_resource(settings)
    result = dg.materialize(
        [raw_transactions, enriched_transactions, telemetry_readings],
        partition_key=DAY,
        resources={
            "settings": SettingsResource(
                overrides={"redis_url": settings.redis_url_value, "home": str(settings.home_dir)}
            ),
            "pyspark": pyspark,
            "parquet_io_manager": SparkParquetIOManager(
                pyspark=pyspark, base_uri=settings.data_uri
            ),
        },
        run_config=SMALL,
        instance=instance,
    )
    assert result.success
    for event in result.get_asset_materialization_events():
        shown = event.materialization.metadata["spark/session_time_zone"]
        assert shown.value == zone, event.asset_key  # each step ran in the configured zone
    assert spark.conf.get(ZONE_KEY) == zone, "an asset changed the session time zone"
    return {
        name: sorted(
            (
                row.asDict()
                for row in spark.read.parquet(join(settings.data_uri, name, DAY)).collect()
            ),
            key=lambda row: json.dumps(row, sort_keys=True, default=str),
        )
        for name in ASSETS
    }


def expected_bucket(timestamp: str) -> str:
    hour = int(timestamp[11:13])
    return next(name for upper, name in BUCKETS if hour < upper)


def test_generated_data_is_the_same_in_any_session_time_zone_which_no_asset_changes(
    make_settings: Callable[..., Settings],
    spark: Any,
    session_zone_restored: None,
    dagster_instance: dg.DagsterInstance,
    tmp_path: Path,
) -> None:
    in_utc = materialize_in_zone("UTC", make_settings, spark, tmp_path / "utc", dagster_instance)
    in_new_york = materialize_in_zone(
        NEW_YORK, make_settings, spark, tmp_path / "new-york", dagster_instance
    )

    assert in_new_york == in_utc
    transactions = in_utc["raw_transactions"]
    assert len(transactions) == 400
    assert all(row["timestamp"].startswith(f"{DAY}T") for row in transactions)
    assert all(row["timestamp"].endswith("Z") for row in transactions)
    # Every UTC hour of the day, the one New York skips (07 UTC) included.
    assert {row["timestamp"][11:13] for row in transactions} == {f"{h:02d}" for h in range(24)}
    for row in in_utc["enriched_transactions"]:
        assert row["time_of_day"] == expected_bucket(row["timestamp"]), row
    readings = in_utc["telemetry_readings"]
    assert min(row["reading_at"] for row in readings) == f"{DAY}T00:00:00.000Z"
    assert max(row["reading_at"] for row in readings) == f"{DAY}T23:45:00.000Z"
