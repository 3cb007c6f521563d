"""``verdict_quality``: is the model right, per data day, plotted across the days.

One daily partition per data day (the publish assets' partitions): the transactions
stream's decisions of that day (their ``day`` field) per driver, model and prompt
version, against the truth and against the rules on the same messages
(:mod:`sentinel_platform.domains.reporting.quality`). The rows are stored (Parquet) and
shown as the ``quality`` table; the figures an operator follows are numeric metadata,
which the Dagster UI plots across partitions (the asset's *Plots* tab):

- ``precision``, ``recall``, ``f1``: every model verdict of the day, whatever model;
  ``rules_precision``, ``rules_recall``, ``rules_f1``: the rules on the same messages;
- ``precision · <model> · <prompt version>`` (and recall, F1, agreement): each model and
  prompt version apart, so a prompt change shows as a new line;
- ``verdicts``, ``labelled``, ``fallback_share``.

The check :data:`QUALITY_CHECK` warns (it never blocks) when a model's recall or
precision is below the rules' on the same messages, or below
``SENTINEL_QUALITY_MIN_RECALL`` / ``SENTINEL_QUALITY_MIN_PRECISION``
(:func:`~sentinel_platform.verdict_quality.shortfalls`). A day without labelled verdicts
passes, saying so: the truth comes from the generator's labels and a source without
truth cannot be measured.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

from sentinel_platform.domains.reporting import cost
from sentinel_platform.domains.reporting.assets import REFRESH_CRON, REFRESH_TIMEZONE, users_only
from sentinel_platform.domains.reporting.quality import (
    KEY,
    SCHEMA,
    DayQuality,
    figures,
    group_counts,
    is_model,
    verdict_rows,
)
from sentinel_platform.domains.shared.common import DAILY, IO_MANAGER_KEY
from sentinel_platform.domains.transactions.assets import transaction_stream
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import Settings
from sentinel_platform.verdict_quality import Confusion, confusion_of, shortfalls

ASSET = "verdict_quality"
QUALITY_CHECK = "model_not_worse_than_rules"
STREAM = "transactions"
#: Today's partition is refreshed at every tick of the read-backs; older days by hand.
QUALITY_CONDITION = (
    dg.AutomationCondition.cron_tick_passed(REFRESH_CRON, REFRESH_TIMEZONE)
    & dg.AutomationCondition.in_latest_time_window()
    & ~dg.AutomationCondition.in_progress()
).with_label(f"today's partition, every tick of {REFRESH_CRON}")
FIGURES = ("precision", "recall", "f1")
TABLE_COLUMNS = (
    *KEY,
    "verdicts",
    "labelled",
    "tp",
    "fp",
    "tn",
    "fn",
    "precision",
    "recall",
    "f1",
    "rules_precision",
    "rules_recall",
    "agreement",
    "fallback_share",
    "tokens_per_verdict",
    "cost_per_verdict",
    "latency_p50_ms",
    "latency_p95_ms",
)
_TYPES = {"string": "string", "bigint": "int", "double": "float"}


def _sum(rows: list[dict[str, Any]], prefix: str = "") -> Confusion:
    return confusion_of({n: sum(r[prefix + n] for r in rows) for n in ("tp", "fp", "tn", "fn")})


def _floats(values: dict[str, float | None]) -> dict[str, dg.MetadataValue]:
    """The figures that exist, as floats (an unknown figure is left out, not plotted 0)."""
    return {k: dg.MetadataValue.float(float(v)) for k, v in values.items() if v is not None}


def plotted(day: DayQuality) -> dict[str, dg.MetadataValue]:
    """The numeric metadata the UI plots across partitions (see the module's doc)."""
    models = [row for row in day.rows if is_model(row)]
    live, rules = _sum(models), _sum(day.rows, "rules_")
    out = {
        "verdicts": dg.MetadataValue.int(sum(r["verdicts"] for r in day.rows)),
        "labelled": dg.MetadataValue.int(sum(r["labelled"] for r in day.rows)),
        **_floats(live.figures()),
        **_floats({f"rules_{k}": v for k, v in rules.figures().items()}),
        **_floats({"fallback_share": day.fallback_share}),
    }
    for row in models:
        name = f"{row['model']} · {row['prompt_version']}"
        out.update(_floats({f"{k} · {name}": row[k] for k in (*FIGURES, "agreement")}))
    return out


def quality_table(rows: list[dict[str, Any]]) -> dg.TableMetadataValue:
    """Every row of the day, its counts and figures (empty cells: not measurable)."""
    types = {f.name: _TYPES[f.dataType.simpleString()] for f in SCHEMA.fields}
    columns = [dg.TableColumn(name, types[name]) for name in TABLE_COLUMNS]
    records = [
        dg.TableRecord({k: "" if row[k] is None else row[k] for k in TABLE_COLUMNS}) for row in rows
    ]
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))


def judged(day: DayQuality, settings: Settings) -> dg.AssetCheckResult:
    """:data:`QUALITY_CHECK` of ``day``: a warning naming each model and prompt version
    whose recall or precision is below the rules' on its messages or a floor."""
    found = {}
    for row in day.rows:
        if not is_model(row) or not row["labelled"]:
            continue
        rules = confusion_of({n: row[f"rules_{n}"] for n in ("tp", "fp", "tn", "fn")})
        said = shortfalls(
            confusion_of(row), rules, settings.quality_min_recall, settings.quality_min_precision
        )
        if said:
            found[f"{row['model']} · {row['prompt_version']}"] = "; ".join(said)
    measured = sum(row["labelled"] for row in day.rows if is_model(row))
    meta: dict[str, Any] = {"labelled model verdicts": dg.MetadataValue.int(measured)}
    if found:
        meta["shortfalls"] = dg.MetadataValue.json(found)
    if not measured:
        meta["note"] = "no labelled model verdict this day: nothing to measure"
    return dg.AssetCheckResult(
        check_name=QUALITY_CHECK,
        passed=not found,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=meta,
        description=None if not found else "; ".join(f"{k}: {v}" for k, v in found.items()),
    )


@dg.asset(
    name=ASSET,
    group_name="reporting",
    partitions_def=DAILY,
    deps=[transaction_stream],
    io_manager_key=IO_MANAGER_KEY,
    kinds={"spark", "redis", "parquet"},
    automation_condition=QUALITY_CONDITION,
    check_specs=[
        dg.AssetCheckSpec(
            QUALITY_CHECK,
            asset=ASSET,
            description="Warns when a model's recall or precision on the day's labelled "
            "messages is below the rules' on the same messages, or below "
            "SENTINEL_QUALITY_MIN_RECALL / SENTINEL_QUALITY_MIN_PRECISION.",
        )
    ],
    description="Is the model right: the day's transaction decisions per driver, model and "
    "prompt version against the truth (label) and the rules on the same messages; "
    "precision, recall and F1 plotted across days.",
)
def verdict_quality(
    context: dg.AssetExecutionContext,
    pyspark: PySparkResource,
    redis_publisher: RedisPublisherResource,
    settings: SettingsResource,
) -> Iterator[dg.Output[DataFrame] | dg.AssetCheckResult]:
    values = settings.load()
    keys = redis_publisher.stream_keys(STREAM)
    spark = pyspark.spark_session
    raw = users_only(redis_publisher.read_stream(spark, keys.results))
    counts = group_counts(verdict_rows(raw), context.partition_key)
    day = figures(STREAM, counts, cost.prices_from(values))
    ordered = [tuple(row[f.name] for f in SCHEMA.fields) for row in day.rows]
    frame = spark.createDataFrame(ordered, SCHEMA)
    meta: dict[str, Any] = {
        "stream": keys.results,
        "quality": quality_table(day.rows),
        **plotted(day),
    }
    yield dg.Output(frame, metadata=meta)
    yield judged(day, values)
