"""The data graph materialised on real Spark into a real Redis, read back by a test consumer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.axioms.checks import axioms_quality
from sentinel_platform.domains.axioms.definitions import ASSETS as AXIOM_ASSETS
from sentinel_platform.domains.transactions.checks import transactions_quality
from sentinel_platform.domains.transactions.definitions import ASSETS as TRANSACTION_ASSETS
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform.streams.producer.publish import AXIOM_COLUMNS, TRANSACTION_COLUMNS, id_order

pytestmark = pytest.mark.spark
DAY = "2026-11-20"


def _materialize(
    assets: list[Any], resources: dict[str, Any], instance: Any, run_config: dict | None = None
) -> dg.ExecuteInProcessResult:
    """Materialise ``assets``; no worker reads here, so the publisher's lag limits are
    set above the rows these tests publish (the backlog is the whole stream)."""
    publisher = resources["redis_publisher"]
    unpaced = RedisPublisherResource(
        redis_url=publisher.redis_url,
        max_pause_s=publisher.max_pause_s,
        lag_warn=10_000,
        lag_pause=20_000,
    )
    return dg.materialize(
        assets,
        partition_key=DAY,
        resources={**resources, "redis_publisher": unpaced},
        instance=instance,
        run_config=run_config or {},
        raise_on_error=False,
    )


def _stored(spark: Any, settings: Settings, asset: str) -> Any:
    return spark.read.parquet(f"{settings.data_uri}/{asset}/{DAY}")


def _metadata(result: dg.ExecuteInProcessResult, node: str) -> dict[str, Any]:
    (event,) = result.asset_materializations_for_node(node)
    return {k: v.value for k, v in event.metadata.items()}


def test_transactions_publish_exactly_the_enriched_rows(
    spark: Any,
    data_settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
) -> None:
    keys = transaction_keys(data_settings)
    config = {"ops": {"raw_transactions": {"config": {"rows": 1_500, "spark_partitions": 3}}}}
    result = _materialize(
        [*TRANSACTION_ASSETS, transactions_quality], data_resources, dagster_instance, config
    )
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert check.passed

    entries = redis_client.xrange(keys.stream)
    published = sorted(
        (Transaction.from_fields(f).model_dump() for _, f in entries), key=lambda t: t["id"]
    )
    enriched = _stored(spark, data_settings, "enriched_transactions")
    expected = sorted(
        (
            Transaction.model_validate(r.asDict()).model_dump()
            for r in enriched.select(*TRANSACTION_COLUMNS).collect()
        ),
        key=lambda t: t["id"],
    )
    assert len(published) == 1_500 and published == expected

    meta = _metadata(result, "transaction_stream")
    ids = sorted((i for i, _ in entries), key=id_order)
    assert meta["rows_published"] == 1_500 and meta["spark_partitions"] >= 1
    assert (meta["first_id"], meta["last_id"]) == (ids[0], ids[-1])
    assert meta["pause_episodes"] == 0 and meta["rows_per_s"] > 0
    # Published by Spark's Python workers, not by this (driver) process.
    assert meta["executors"] and f":{os.getpid()}" not in meta["executors"]
    threats = [t for t in published if t["is_threat"]]
    assert 0 < len(threats) < 0.05 * 1_500, "threats at the generator's 2% base rate"
    assert "typology" in enriched.columns and all("typology" not in t for t in published)


def test_axioms_publish_scored_anomalies_in_wire_format(
    spark: Any,
    data_settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
) -> None:
    keys = axiom_keys(data_settings)
    config = {"ops": {"telemetry_readings": {"config": {"sources": 6, "readings_per_source": 200}}}}
    result = _materialize([*AXIOM_ASSETS, axioms_quality], data_resources, dagster_instance, config)
    assert result.success

    published = sorted(
        (Axiom.from_fields(f) for _, f in redis_client.xrange(keys.stream)),
        key=lambda a: a.natural_key,
    )
    stored = _stored(spark, data_settings, "axioms").select(*AXIOM_COLUMNS).collect()
    expected = sorted(
        (Axiom.model_validate(r.asDict()) for r in stored), key=lambda a: a.natural_key
    )
    assert published == expected and len(published) > 0
    assert {a.status for a in published} >= {"critical"}
    assert all(a.anomaly_score >= 0.35 for a in published)
    assert _metadata(result, "axiom_stream")["rows_published"] == len(published)


def test_bad_landing_file_fails_the_blocking_check_and_publishes_nothing(
    data_settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
) -> None:
    landing = data_settings.home_dir / "landing" / "transactions" / DAY
    landing.mkdir(parents=True)
    header = "id,merchant,category,currency,amount,message,is_threat,source,timestamp"
    good = "t-1,Costco Wholesale,retail,USD,10.50,ok,false,pos,2026-11-20T10:00:00Z"
    rows = [
        header,
        good,
        "t-1,Costco Wholesale,retail,USD,11.00,dup id,false,pos,2026-11-20T10:01:00Z",
        "t-3,Kim's,grocery,XXX,-4.00,bad currency and amount,false,pos,2026-11-20T10:02:00Z",
        "t-4,Kim's,grocery,USD,3.999,three decimals,false,pos,2026-11-20T10:03:00Z",
        "t-5,Kim's,gambling,USD,5.00,bad category,false,pos,yesterday at noon",
        "t-6,Kim's,grocery,USD,not-a-number,corrupt,false,pos,2026-11-20T10:05:00Z",
    ]
    Path(landing / "bad.csv").write_text("\n".join(rows) + "\n")
    redis_client.set(transaction_keys(data_settings).lag, 0)

    result = _materialize(
        [*TRANSACTION_ASSETS, transactions_quality], data_resources, dagster_instance
    )
    (check,) = result.get_asset_check_evaluations()
    assert not check.passed
    assert not result.asset_materializations_for_node("transaction_stream")
    assert redis_client.exists(transaction_keys(data_settings).stream) == 0

    failures = {
        (r.data["expectation"], r.data["column"]): r.data
        for r in check.metadata["failures"].value.records
    }
    assert failures[("expect_column_values_to_be_unique", "id")]["unexpected_count"] == 2
    assert "'XXX'" in failures[("expect_column_values_to_be_in_set", "currency")]["sample"]
    assert "-4.0" in failures[("expect_column_values_to_be_between", "amount")]["sample"]
    assert "3.999" in failures[("expect_column_values_to_be_null", "amount_over_2dp")]["sample"]
    assert "'gambling'" in failures[("expect_column_values_to_be_in_set", "category")]["sample"]
    assert (
        "yesterday"
        in failures[("expect_column_values_to_be_null", "timestamp_unparseable")]["sample"]
    )
    assert (
        "not-a-number" in failures[("expect_column_values_to_be_null", "_corrupt_record")]["sample"]
    )
