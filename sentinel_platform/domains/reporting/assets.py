"""Read-back: the workers' result streams into Spark, and a compliance report over them.

The streams are read by the executors, each over a slice of the id range
(:mod:`sentinel_platform.streams.producer.range_read`), so a million verdicts never pass through
the driver. The report's small summary tables are the only thing collected, to show them
in the Dagster UI.

Nobody has to materialise them by hand: declarative automation keeps them fresh. The two
read-back assets run once per ``REFRESH_CRON`` tick (the workers write results
continuously, so "upstream published" is not "results complete"; a periodic read-back is
what the report needs), and the report runs once both read-backs are newer than that
tick. ``reporting_automation_sensor`` (running by default) evaluates the conditions.

The demo's traffic is never a user's figure: entries carrying the demo's mark
(:data:`~sentinel_platform.schemas.DEMO_FIELD`; the workers copy it onto their results)
are left out of the read-backs, and so of the report, which also leaves out the demo's
input entries and dead letters (:func:`users_only`).
"""

import functools
from collections.abc import Callable
from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sentinel_platform.domains.axioms.assets import axiom_stream
from sentinel_platform.domains.reporting import cost
from sentinel_platform.domains.reporting.decisions import (
    decision_counts,
    decisions,
    provenance_columns,
    threats_table,
    with_supersession,
)
from sentinel_platform.domains.shared.common import IO_MANAGER_KEY
from sentinel_platform.domains.transactions.assets import transaction_stream
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE
from sentinel_platform.settings import Settings
from sentinel_platform.streams.sharding.shards import dlq_streams_of

VERDICT_FIELDS = ("txn_id", "merchant", "currency", "risk_level", "processed_at", "narrative")
EVENT_FIELDS = (
    "source_id",
    "domain",
    "status",
    "emitted_at",
    "routed_to_ai",
    "risk_level",
    "audit_narrative",
)
TABLE_ROWS = 50
#: How often the read-back and the report are refreshed.
REFRESH_CRON = "*/15 * * * *"
REFRESH_TIMEZONE = "UTC"
#: Read the result streams back once per tick, never twice at once.
READ_BACK_CONDITION = (
    dg.AutomationCondition.cron_tick_passed(REFRESH_CRON, REFRESH_TIMEZONE)
    & ~dg.AutomationCondition.in_progress()
).with_label(f"refresh every tick of {REFRESH_CRON}")
#: Summarise once both read-backs are newer than the tick.
REPORT_CONDITION = dg.AutomationCondition.on_cron(REFRESH_CRON, REFRESH_TIMEZONE)


def _field(name: str, cast: str | None = None) -> Any:
    column = F.col("fields").getItem(name)
    return (column.try_cast(cast) if cast else column).alias(name)


def users_only(entries: DataFrame, payload: str | None = None) -> DataFrame:
    """``entries`` (``(stream_id, fields)``) without those the demo marked: the mark is an
    entry's own field, or, with ``payload`` (a dead letter's original fields as JSON), a
    key of that field's JSON."""
    fields = F.col("fields")
    mark = (
        fields.getItem(DEMO_FIELD)
        if payload is None
        else F.get_json_object(fields.getItem(payload), f"$.{DEMO_FIELD}")
    )
    return entries.filter(F.coalesce(mark != F.lit(DEMO_VALUE), F.lit(True)))


def read_back(
    name: str,
    stream: str,
    upstream: dg.AssetsDefinition,
    columns: Callable[[], list[Column]],
    description: str,
    shown: Callable[[DataFrame], dict[str, Any]] = lambda _: {},
) -> dg.AssetsDefinition:
    """The read-back asset ``name``: the result stream of the registry's ``stream``, read
    by the executors (``RedisPublisherResource.read_stream``), each entry's fields as the
    ``columns()`` that are truly this stream's (which fields, which types), after its
    ``stream_id`` and before who decided and why
    (:func:`~sentinel_platform.domains.reporting.decisions.provenance_columns`) and
    ``superseded_by`` (:func:`~sentinel_platform.domains.reporting.decisions.with_supersession`),
    the demo's entries left out (:func:`users_only`). Refreshed once per ``REFRESH_CRON``
    tick, downstream of ``upstream`` (the stream's publish asset). Its metadata say how
    many decisions it holds, what the AI verdicts cost, per data day, lane and model
    (:func:`~sentinel_platform.domains.reporting.cost.metadata`), and what ``shown``
    makes of the frame."""

    @dg.asset(
        name=name,
        group_name="reporting",
        deps=[upstream],
        io_manager_key=IO_MANAGER_KEY,
        kinds={"spark", "redis", "parquet"},
        automation_condition=READ_BACK_CONDITION,
        description=description,
    )
    def results(
        context: dg.AssetExecutionContext,
        pyspark: PySparkResource,
        redis_publisher: RedisPublisherResource,
        settings: SettingsResource,
    ) -> DataFrame:
        keys = redis_publisher.stream_keys(stream)
        raw = redis_publisher.read_stream(pyspark.spark_session, keys.results)
        users = users_only(raw)
        usage = cost.metadata(users, cost.prices_from(settings.load()))
        left_out = f"the demo's entries ({DEMO_FIELD}={DEMO_VALUE})"
        frame = with_supersession(users.select("stream_id", *columns(), *provenance_columns()))
        context.add_output_metadata(
            {
                "stream": keys.results,
                "left out": left_out,
                **decision_counts(frame),
                **usage,
                **shown(frame),
            }
        )
        return frame

    return results


def _verdict_columns() -> list[Column]:
    return [
        *[_field(n) for n in VERDICT_FIELDS],
        _field("amount", "double"),
        (F.lower(F.col("fields").getItem("is_threat")) == "true").alias("is_threat"),
    ]


def _event_columns() -> list[Column]:
    return [
        *[_field(n) for n in EVENT_FIELDS],
        _field("metric_value", "double"),
        _field("anomaly_score", "double"),
    ]


transaction_verdicts = read_back(
    "transaction_verdicts",
    "transactions",
    transaction_stream,
    _verdict_columns,
    "Every verdict the transaction workers wrote to `sentinel:verdicts`, who made it and "
    "why; a provisional verdict a re-screen superseded is kept, marked `superseded_by`.",
    shown=lambda frame: {"threats": threats_table(frame)},
)
compliance_events = read_back(
    "compliance_events",
    "axioms",
    axiom_stream,
    _event_columns,
    "Every compliance event the axiom workers wrote to `sentinel:compliance_events`, who "
    "made it and why; a provisional one a re-screen superseded is kept, marked "
    "`superseded_by`.",
)


def _table(df: DataFrame) -> dg.TableMetadataValue:
    rows = [row.asDict() for row in df.limit(TABLE_ROWS).collect()]
    types = {"bigint": "int", "int": "int", "double": "float", "boolean": "bool"}
    schema = dg.TableSchema(
        columns=[dg.TableColumn(name, types.get(kind, "string")) for name, kind in df.dtypes]
    )
    return dg.MetadataValue.table([dg.TableRecord(r) for r in rows], schema=schema)


def _markdown(df: DataFrame) -> str:
    rows = df.limit(TABLE_ROWS).collect()
    header = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns)
    body = "\n".join("| " + " | ".join(str(v) for v in row) + " |" for row in rows)
    return f"{header}\n{body}" if rows else f"{header}\n| (none) |"


def threats_by_merchant(verdicts: DataFrame, transactions: DataFrame) -> DataFrame:
    """Threat counts per merchant and category (the category comes from the input stream)."""
    categories = transactions.select(
        F.get_json_object(F.col("fields").getItem("data"), "$.id").alias("txn_id"),
        F.get_json_object(F.col("fields").getItem("data"), "$.category").alias("category"),
    ).dropDuplicates(["txn_id"])
    return (
        verdicts.join(categories, "txn_id", "left")
        .groupBy("merchant", F.coalesce("category", F.lit("unknown")).alias("category"))
        .agg(
            F.count("*").alias("verdicts"),
            F.sum(F.col("is_threat").cast("int")).alias("threats"),
        )
        .orderBy(F.desc("threats"), "merchant")
    )


def risk_by_domain(events: DataFrame) -> DataFrame:
    return (
        events.groupBy(F.coalesce("domain", F.lit("unknown")).alias("domain"))
        .pivot("risk_level", ["low", "medium", "high"])
        .count()
        .na.fill(0)
        .orderBy("domain")
    )


def dead_letters(dlq: DataFrame) -> DataFrame:
    return (
        dlq.select(
            F.col("fields").getItem("stream").alias("stream"),
            F.col("fields").getItem("reason").alias("reason"),
        )
        .groupBy("stream", "reason")
        .count()
        .orderBy("stream", "reason")
    )


def dead_letter_frame(
    spark: SparkSession, redis_publisher: RedisPublisherResource, settings: Settings
) -> DataFrame:
    """Every user's dead letter, of every DLQ the declared streams may write: on a cluster
    each stream's own and each recorded shard's (``sharding.shards.dlq_streams_of``)."""
    client = redis_publisher.connect(settings)
    try:
        names = dlq_streams_of(client, settings)
    finally:
        client.close()
    frames = [
        users_only(redis_publisher.read_stream(spark, name), payload="payload") for name in names
    ]
    return functools.reduce(DataFrame.unionByName, frames)


@dg.asset(
    group_name="reporting",
    io_manager_key=IO_MANAGER_KEY,
    kinds={"spark", "parquet"},
    automation_condition=REPORT_CONDITION,
)
def compliance_report(
    context: dg.AssetExecutionContext,
    transaction_verdicts: DataFrame,
    compliance_events: DataFrame,
    pyspark: PySparkResource,
    redis_publisher: RedisPublisherResource,
    settings: SettingsResource,
) -> DataFrame:
    """Threats by merchant and category, risk levels by domain, dead letters per stream;
    of each message its decision only (a verdict a re-screen superseded is left out)."""
    spark = pyspark.spark_session
    transaction_verdicts = decisions(transaction_verdicts)
    compliance_events = decisions(compliance_events)
    transactions = users_only(
        redis_publisher.read_stream(spark, redis_publisher.stream_keys("transactions").stream)
    )
    dlq = dead_letter_frame(spark, redis_publisher, settings.load())
    threats = threats_by_merchant(transaction_verdicts, transactions).cache()
    risks = risk_by_domain(compliance_events).cache()
    letters = dead_letters(dlq).cache()
    context.add_output_metadata(
        {
            "threats_by_merchant": _table(threats),
            "risk_by_domain": _table(risks),
            "dead_letters": _table(letters),
            "report": dg.MetadataValue.md(
                "## Threats by merchant and category\n"
                + _markdown(threats)
                + "\n\n## Risk levels by domain\n"
                + _markdown(risks)
                + "\n\n## Dead letters\n"
                + _markdown(letters)
            ),
            "verdicts": dg.MetadataValue.int(transaction_verdicts.count()),
            "compliance_events": dg.MetadataValue.int(compliance_events.count()),
        }
    )
    # One long table, so the three sections share one Parquet file.
    return (
        _section(threats, "threats_by_merchant", "merchant", F.col("category"), "threats")
        .unionByName(_section(risks, "risk_by_domain", "domain", F.lit("high"), "high"))
        .unionByName(_section(letters, "dead_letters", "stream", F.col("reason"), "count"))
    )


def _section(df: DataFrame, section: str, key: str, detail: Column, value: str) -> DataFrame:
    """One section of the report as rows of its long table: section, key, detail, value."""
    return df.select(
        F.lit(section).alias("section"),
        F.col(key).alias("key"),
        detail.alias("detail"),
        F.col(value).cast("long").alias("value"),
    )
