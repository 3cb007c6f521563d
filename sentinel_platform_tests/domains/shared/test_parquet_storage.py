"""The Parquet IO manager stores by URI through Hadoop, partition by partition, and says
what is missing.

The storage tests use ``viewfs://``: Hadoop's own view filesystem, mounted here onto a
temporary directory, so every path operation (listing landing files, existence checks,
writes, reads) goes through a non-``file:`` scheme that Hadoop resolves, as it would for
``hdfs://`` or ``s3a://``.
"""

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sentinel_platform.domains.axioms.definitions import ASSETS as AXIOM_ASSETS
from sentinel_platform.domains.shared.common import DAILY, IO_MANAGER_KEY
from sentinel_platform.domains.transactions.checks import transactions_quality
from sentinel_platform.domains.transactions.definitions import ASSETS as TRANSACTION_ASSETS
from sentinel_platform.resources.io_manager import PARTITION_COLUMN
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.domains import resources_on

pytestmark = pytest.mark.spark
DAY = "2026-11-20"
HEADER = "id,merchant,category,currency,amount,message,is_threat,source,timestamp"
ROWS = [
    f"t-{i},Costco Wholesale,retail,USD,{10 + i}.25,ok,false,pos,2026-11-20T10:0{i}:00Z"
    for i in range(5)
]


@pytest.fixture
def viewfs(spark: Any, tmp_path: Path) -> Callable[[str], str]:
    """``viewfs(name)``: a ``viewfs://`` URI whose ``/sentinel`` is ``tmp_path/disk``."""
    disk = tmp_path / "disk"
    disk.mkdir()
    cluster = f"sentinel-{uuid.uuid4().hex[:8]}"  # Hadoop caches filesystems per authority
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    conf.set(f"fs.viewfs.mounttable.{cluster}.link./sentinel", disk.as_uri())
    return lambda name: f"viewfs://{cluster}/sentinel/{name}"


@pytest.fixture
def data_root(viewfs: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The ``viewfs://`` data root, named by ``SENTINEL_DATA_DIR`` for the assets to read."""
    root = viewfs("data")
    monkeypatch.setenv("SENTINEL_DATA_DIR", root)
    return root


@pytest.fixture
def resources(settings: Settings, spark: Any) -> dict[str, Any]:
    """The definitions' resources; the IO manager takes its root from the environment."""
    return resources_on(settings, None)


def _metadata(result: dg.ExecuteInProcessResult, node: str) -> dict[str, Any]:
    (event,) = result.asset_materializations_for_node(node)
    return {k: getattr(v, "value", v) for k, v in event.metadata.items()}


def test_landing_files_and_assets_go_through_a_viewfs_uri_end_to_end(
    spark: Any,
    viewfs: Callable[[str], str],
    data_root: str,
    settings: Settings,
    resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SENTINEL_LANDING_DIR", viewfs("landing"))
    landing = tmp_path / "disk" / "landing" / "transactions" / DAY
    landing.mkdir(parents=True)
    (landing / "batch.csv").write_text("\n".join([HEADER, *ROWS]) + "\n")
    redis_client.set(transaction_keys(settings).lag, 0)

    result = dg.materialize(
        [*TRANSACTION_ASSETS, transactions_quality],
        partition_key=DAY,
        resources=resources,
        instance=dagster_instance,
    )
    assert result.success

    raw = _metadata(result, "raw_transactions")
    assert raw["origin"] == "landing"
    assert [f.rsplit("/", 1)[-1] for f in raw["files"]] == ["batch.csv"]
    assert all(f.startswith(viewfs("landing")) for f in raw["files"]), raw["files"]
    for asset in ("raw_transactions", "enriched_transactions"):
        meta = _metadata(result, asset)
        assert meta["path"] == f"{data_root}/{asset}/{DAY}"
        assert meta["dagster/row_count"] == len(ROWS)
        columns = {c.name: c.type for c in meta["dagster/column_schema"].columns}
        assert columns["id"] == "string" and columns["amount"] == "float"
        assert (tmp_path / "disk" / "data" / asset / DAY / "_SUCCESS").exists()
    assert "pre_score" in {
        c.name for c in _metadata(result, "enriched_transactions")["dagster/column_schema"].columns
    }
    stream = _metadata(result, "transaction_stream")
    assert stream["dagster/row_count"] == len(ROWS) == redis_client.xlen("transactions")
    assert {c.name for c in stream["dagster/column_schema"].columns} >= {"id", "amount"}
    stored = spark.read.parquet(f"{data_root}/enriched_transactions/{DAY}")
    assert sorted(r.id for r in stored.select("id").collect()) == [f"t-{i}" for i in range(5)]


@dg.asset(
    partitions_def=DAILY,
    io_manager_key=IO_MANAGER_KEY,
    backfill_policy=dg.BackfillPolicy.single_run(),
)
def daily_numbers(context: dg.AssetExecutionContext, pyspark: PySparkResource) -> DataFrame:
    """One row per partition key of the run, valued by the run's tag ``value``."""
    value = int(context.run.tags["value"])
    keys = context.partition_keys
    rows = [(key, value) for key in keys]
    return pyspark.spark_session.createDataFrame(rows, [PARTITION_COLUMN, "value"])


@dg.asset(
    partitions_def=DAILY,
    io_manager_key=IO_MANAGER_KEY,
    backfill_policy=dg.BackfillPolicy.single_run(),
)
def daily_numbers_seen(daily_numbers: DataFrame) -> DataFrame:
    """The upstream rows as loaded for the run's partitions, with their partition column."""
    return daily_numbers.select(PARTITION_COLUMN, (F.col("value") + 1).alias("value"))


def _run_range(
    assets: list[Any], resources: dict[str, Any], instance: Any, first: str, last: str, value: int
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        assets,
        resources=resources,
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
            "value": str(value),
        },
        raise_on_error=False,
    )


def _stored(spark: Any, root: str, asset: str, day: str) -> list[int]:
    return sorted(r.value for r in spark.read.parquet(f"{root}/{asset}/{day}").collect())


def test_writing_several_partitions_in_one_step_leaves_the_other_partitions_alone(
    spark: Any, data_root: str, resources: dict[str, Any], dagster_instance: Any
) -> None:
    first = _run_range([daily_numbers], resources, dagster_instance, "2026-11-17", "2026-11-17", 1)
    assert first.success
    both = _run_range(
        [daily_numbers, daily_numbers_seen],
        resources,
        dagster_instance,
        "2026-11-18",
        "2026-11-19",
        2,
    )
    assert both.success, both.all_events

    assert _stored(spark, data_root, "daily_numbers", "2026-11-17") == [1]
    assert _stored(spark, data_root, "daily_numbers", "2026-11-18") == [2]
    assert _stored(spark, data_root, "daily_numbers", "2026-11-19") == [2]
    assert _stored(spark, data_root, "daily_numbers_seen", "2026-11-18") == [3]
    assert _stored(spark, data_root, "daily_numbers_seen", "2026-11-19") == [3]
    events = both.asset_materializations_for_node("daily_numbers")
    assert sorted(e.partition for e in events) == ["2026-11-18", "2026-11-19"]
    assert all(e.metadata["dagster/row_count"].value == 2 for e in events)


@dg.asset(
    partitions_def=DAILY,
    io_manager_key=IO_MANAGER_KEY,
    backfill_policy=dg.BackfillPolicy.single_run(),
)
def daily_numbers_unlabelled(pyspark: PySparkResource) -> DataFrame:
    return pyspark.spark_session.createDataFrame([(1,)], ["value"])


@pytest.mark.usefixtures("data_root")
def test_a_multi_partition_output_without_its_partition_column_is_refused_by_name(
    resources: dict[str, Any], dagster_instance: Any
) -> None:
    result = _run_range(
        [daily_numbers_unlabelled], resources, dagster_instance, "2026-11-18", "2026-11-19", 1
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = _failure_text(failure)
    assert "daily_numbers_unlabelled" in message and PARTITION_COLUMN in message


def _failure_text(event: dg.DagsterEvent) -> str:
    data = event.step_failure_data
    parts = [data.error.to_string() if data.error else ""]
    if data.user_failure_data is not None:
        parts.append(data.user_failure_data.description or "")
    return "\n".join(parts)


@pytest.mark.usefixtures("data_root")
@pytest.mark.parametrize(
    ("assets", "selected", "missing"),
    [
        (TRANSACTION_ASSETS, "transaction_stream", "enriched_transactions"),
        (AXIOM_ASSETS, "axiom_stream", "axioms"),
        (AXIOM_ASSETS, "axioms", "telemetry_readings"),
    ],
)
def test_a_step_without_its_upstream_partition_says_how_to_build_it_with_its_upstream(
    assets: list[Any],
    selected: str,
    missing: str,
    resources: dict[str, Any],
    dagster_instance: Any,
) -> None:
    result = dg.materialize(
        assets,
        selection=[selected],
        partition_key=DAY,
        resources=resources,
        instance=dagster_instance,
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    description = failure.step_failure_data.user_failure_data.description
    assert "\n" not in description
    assert f"partition {DAY} of asset {missing!r}" in description
    # advice that works as written: the step's asset with all of its upstream, recorded
    # in the instance the run belongs to (the one the UI shows)
    assert f"--select '*{selected}' --partition {DAY}" in description
    assert f"DAGSTER_HOME={dagster_instance.root_directory} " in description
    assert "py4j" not in description and "PATH_NOT_FOUND" not in description


@pytest.mark.parametrize(
    ("spark_type", "shown"),
    [
        ("bigint", "int"),
        ("int", "int"),
        ("double", "float"),
        ("boolean", "bool"),
        ("string", "string"),
        ("timestamp", "timestamp"),
        ("array<string>", "array<string>"),
    ],
)
def test_the_column_schema_shows_spark_types_as_dagster_types(spark_type: str, shown: str) -> None:
    from pyspark.sql.types import StructType

    from sentinel_platform.resources.io_manager import column_schema

    schema = StructType.fromJson(
        {
            "type": "struct",
            "fields": [
                {"name": "c", "type": _json_type(spark_type), "nullable": False, "metadata": {}}
            ],
        }
    )
    (column,) = column_schema(schema).columns
    assert (column.name, column.type, column.constraints.nullable) == ("c", shown, False)


def _json_type(spark_type: str) -> Any:
    names = {"bigint": "long", "int": "integer"}
    if spark_type.startswith("array<"):
        return {"type": "array", "elementType": "string", "containsNull": True}
    return names.get(spark_type, spark_type)
