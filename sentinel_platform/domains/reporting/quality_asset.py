"""``verdict_quality``: is the model right, per data day, plotted across the days.

One daily partition per data day (the publish assets' partitions): the transactions
stream's decisions of that day (their ``day`` field) per role (primary, fallback),
driver, model and prompt version, against the truth and against the rules on the same
messages (:mod:`sentinel_platform.domains.reporting.quality`), and the shadow's verdicts
of that day beside the live decisions on the same messages
(:mod:`sentinel_platform.domains.reporting.shadow_quality`). The rows are stored (Parquet) and
shown as the ``quality`` table; the figures an operator follows are numeric metadata,
which the Dagster UI plots across partitions (the asset's *Plots* tab):

- ``precision``, ``recall``, ``f1``: every model decision of the day, whatever model
  (the shadow's verdicts decide nothing and are not among them);
  ``rules_precision``, ``rules_recall``, ``rules_f1``: the rules on the same messages;
- ``precision · <model> · <prompt version>`` (and recall, F1, agreement): each primary
  model and prompt version apart, so a prompt change shows as a new line; a fallback's
  and a shadow's the same with the role first (``recall · shadow · <model> · <prompt
  version>``), a shadow's also with the live decision's figures on its messages
  (``live_recall · shadow · ...``);
- ``verdicts``, ``labelled``, ``fallback_share``.

Where the day's ``enriched_transactions`` partition holds the generator's ``typology``,
the ``typologies`` table counts per role, model, prompt version and typology the
messages, those the verdict flagged and those the rules flagged
(:mod:`sentinel_platform.domains.reporting.typology_quality`), so a model's misses show
by typology.

The check :data:`QUALITY_CHECK` warns (it never blocks) when a model's recall or
precision is below the rules' on the same messages (a shadow's: or below the live
decision's on its messages), or below
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
    LIVE_FIGURES,
    SCHEMA,
    SHADOW,
    DayQuality,
    figures,
    group_counts,
    is_live_model,
    is_model,
    keyed_decisions,
    live_of,
    name_of,
    verdict_rows,
)
from sentinel_platform.domains.reporting.shadow_quality import (
    shadow_counts,
    shadow_joined,
    shadow_rows,
)
from sentinel_platform.domains.reporting.typology_quality import (
    typologies_of,
    typology_counts,
    typology_table,
)
from sentinel_platform.domains.shared.common import DAILY, IO_MANAGER_KEY
from sentinel_platform.domains.transactions.assets import enriched_transactions, transaction_stream
from sentinel_platform.resources.io_manager import SparkParquetIOManager
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.keys import shadow_results_key
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
    "live_precision",
    "live_recall",
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
    decided = [row for row in day.rows if row["role"] != SHADOW]
    models = [row for row in decided if is_model(row)]
    live, rules = _sum(models), _sum(decided, "rules_")
    out = {
        "verdicts": dg.MetadataValue.int(sum(r["verdicts"] for r in decided)),
        "labelled": dg.MetadataValue.int(sum(r["labelled"] for r in decided)),
        **_floats(live.figures()),
        **_floats({f"rules_{k}": v for k, v in rules.figures().items()}),
        **_floats({"fallback_share": day.fallback_share}),
    }
    for row in day.rows:
        if not is_model(row):
            continue
        shown = (*FIGURES, "agreement", *(LIVE_FIGURES if row["role"] == SHADOW else ()))
        out.update(_floats({f"{k} · {name_of(row)}": row[k] for k in shown}))
    return out


def quality_table(rows: list[dict[str, Any]]) -> dg.TableMetadataValue:
    """Every row of the day, its counts and figures (empty cells: not measurable)."""
    types = {f.name: _TYPES[f.dataType.simpleString()] for f in SCHEMA.fields}
    columns = [dg.TableColumn(name, types[name]) for name in TABLE_COLUMNS]
    records = [
        dg.TableRecord({k: "" if row[k] is None else row[k] for k in TABLE_COLUMNS}) for row in rows
    ]
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))


def behind_live(shadow: Confusion, live: Confusion) -> list[str]:
    """Why a shadow is worse than the live decisions on the same messages, one sentence
    per figure (recall, precision) below theirs; a figure not computed is never one."""
    found = []
    for name in ("recall", "precision"):
        mine, theirs = getattr(shadow, name), getattr(live, name)
        if mine is not None and theirs is not None and mine < theirs:
            found.append(f"{name} {mine:.3f} below the live model's {theirs:.3f}")
    return found


def judged(day: DayQuality, settings: Settings) -> dg.AssetCheckResult:
    """:data:`QUALITY_CHECK` of ``day``: a warning naming each model and prompt version
    (with its role when not the primary) whose recall or precision is below the rules'
    on its messages or a floor, or, a shadow's, below the live decision's on its
    messages."""
    found = {}
    for row in day.rows:
        if not is_model(row) or not row["labelled"]:
            continue
        mine = confusion_of(row)
        rules = confusion_of({n: row[f"rules_{n}"] for n in ("tp", "fp", "tn", "fn")})
        said = shortfalls(mine, rules, settings.quality_min_recall, settings.quality_min_precision)
        live = live_of(row)
        if live is not None:
            said += behind_live(mine, live)
        if said:
            found[name_of(row)] = "; ".join(said)
    measured = sum(row["labelled"] for row in day.rows if is_live_model(row))
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
    description="Is the model right: the day's transaction decisions per role (primary, "
    "fallback), driver, model and prompt version against the truth (label) and the rules "
    "on the same messages, and a shadow model's verdicts beside the live decisions on the "
    "same messages; precision, recall and F1 plotted across days.",
)
def verdict_quality(
    context: dg.AssetExecutionContext,
    pyspark: PySparkResource,
    redis_publisher: RedisPublisherResource,
    settings: SettingsResource,
    parquet_io_manager: dg.ResourceParam[SparkParquetIOManager],
) -> Iterator[dg.Output[DataFrame] | dg.AssetCheckResult]:
    values = settings.load()
    keys = redis_publisher.stream_keys(STREAM)
    spark = pyspark.spark_session
    raw = users_only(redis_publisher.read_stream(spark, keys.results))
    verdicts = verdict_rows(raw)
    counts = group_counts(verdicts, context.partition_key)
    shadow = shadow_rows(users_only(redis_publisher.read_stream(spark, shadow_results_key(keys))))
    joined = shadow_joined(shadow, verdicts, context.partition_key).cache()
    counts += shadow_counts(joined)
    day = figures(STREAM, counts, cost.prices_from(values))
    ordered = [tuple(row[f.name] for f in SCHEMA.fields) for row in day.rows]
    frame = spark.createDataFrame(ordered, SCHEMA)
    meta: dict[str, Any] = {
        "stream": keys.results,
        "shadow_stream": shadow_results_key(keys),
        "quality": quality_table(day.rows),
        **plotted(day),
    }
    typologies = typologies_of(
        parquet_io_manager.stored_partition(enriched_transactions.key, context.partition_key)
    )
    if typologies is not None:
        decided = keyed_decisions(verdicts, context.partition_key)
        meta["typologies"] = typology_table(typology_counts(decided, joined, typologies))
    joined.unpersist()
    yield dg.Output(frame, metadata=meta)
    yield judged(day, values)
