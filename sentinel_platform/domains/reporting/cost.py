"""What the analyzer's verdicts cost, per day and model, for the read-back assets' metadata.

Every AI verdict records the tokens its model call reported (``input_tokens``,
``output_tokens``, ``cached_input_tokens`` and the ``model``: extra fields of the result
entry), and so does a fallback whose answer the provider billed without giving a verdict
(cut at ``max_tokens``, a refusal, content that is not the verdict), so the cost of a
day's calls is a sum over the results the read-back already reads; nothing else has to
be kept. A day is the UTC date in the entry id (the server's
clock when the verdict was committed), the key of the publish assets' daily partitions:
a partition published and processed the same day is one row. Only the small aggregate
(days x models) reaches the driver.

Prices are the settings ``SENTINEL_ANALYZER_PRICE_{INPUT,OUTPUT,CACHED_INPUT}_PER_MTOK``
(per million tokens, in the currency of the user's price list). Without an input and an
output price the metadata shows tokens only: a cost made up from a default price list
would be wrong for every provider but one. Cached prompt tokens are billed at the cached
price when set, else at the input price (never less than what is paid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sentinel_platform.settings import Settings

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens")
#: At most this many (day, model) rows are shown (the totals count them all).
MAX_ROWS = 100


@dataclass(frozen=True)
class Prices:
    """Per million tokens; ``cached_input`` None: billed as ``input``."""

    input: float
    output: float
    cached_input: float | None = None


def prices_from(settings: Settings) -> Prices | None:
    """The configured prices, or None unless both the input and output price are set."""
    if settings.analyzer_price_input_per_mtok is None:
        return None
    if settings.analyzer_price_output_per_mtok is None:
        return None
    return Prices(
        settings.analyzer_price_input_per_mtok,
        settings.analyzer_price_output_per_mtok,
        settings.analyzer_price_cached_input_per_mtok,
    )


def cost(input_tokens: int, output_tokens: int, cached: int, prices: Prices | None) -> float | None:
    """What the tokens cost at ``prices`` (None: no prices). ``cached`` is part of
    ``input_tokens`` (as the APIs report it), billed at the cached price when set."""
    if prices is None:
        return None
    cached = min(max(cached, 0), input_tokens)
    cached_price = prices.input if prices.cached_input is None else prices.cached_input
    paid = (input_tokens - cached) * prices.input + cached * cached_price
    return round((paid + output_tokens * prices.output) / 1_000_000, 6)


def usage_by_day(raw: DataFrame) -> DataFrame:
    """``raw`` (a read-back's ``stream_id``, ``fields``) summed per day and model: AI
    verdicts, the answers billed without one (``unusable``: fallbacks that record a
    ``model``) and the tokens of both. Entries without a ``model`` (rules, fallbacks
    of calls that billed nothing known, the ``sentinel`` contract's verdicts) are left
    out."""
    millis = F.split(F.col("stream_id"), "-").getItem(0).cast("long")
    # Whole days since the epoch, so the date is UTC whatever the session's time zone.
    day = F.date_add(F.lit("1970-01-01").cast("date"), F.floor(millis / 86_400_000).cast("int"))
    tokens = [
        F.coalesce(F.col("fields").getItem(n).try_cast("long"), F.lit(0)).alias(n)
        for n in TOKEN_FIELDS
    ]
    model = F.col("fields").getItem("model")
    verdict = (F.col("fields").getItem("driver_used") == F.lit("analyzer")).cast("int")
    return (
        raw.where(model.isNotNull())
        .select(day.cast("string").alias("day"), model.alias("model"), verdict.alias("v"), *tokens)
        .groupBy("day", "model")
        .agg(
            F.sum("v").alias("verdicts"),
            (F.count("*") - F.sum("v")).alias("unusable"),
            *[F.sum(n).alias(n) for n in TOKEN_FIELDS],
        )
        .orderBy(F.desc("day"), "model")
    )


def metadata(raw: DataFrame, prices: Prices | None) -> dict[str, Any]:
    """The read-back's cost metadata: a table per day and model, and the totals; a
    ``cost`` column and total only when ``prices`` are set."""
    rows = [row.asDict() for row in usage_by_day(raw).collect()]  # days x models: small
    for row in rows:
        counts = [int(row[n] or 0) for n in TOKEN_FIELDS]
        row.update(dict(zip(TOKEN_FIELDS, counts, strict=True)))
        row["cost"] = cost(counts[0], counts[1], counts[2], prices)
    columns = [
        dg.TableColumn("day", "string"),
        dg.TableColumn("model", "string"),
        dg.TableColumn("verdicts", "int"),
        dg.TableColumn("unusable", "int"),
        *[dg.TableColumn(n, "int") for n in TOKEN_FIELDS],
    ]
    if prices is not None:
        columns.append(dg.TableColumn("cost", "float"))
    shown = [{c.name: row[c.name] for c in columns} for row in rows[:MAX_ROWS]]
    totals = {n: sum(row[n] for row in rows) for n in TOKEN_FIELDS}
    out: dict[str, Any] = {
        "analyzer_usage": dg.MetadataValue.table(
            [dg.TableRecord(r) for r in shown], schema=dg.TableSchema(columns=columns)
        ),
        **{n: dg.MetadataValue.int(v) for n, v in totals.items()},
    }
    if prices is not None:
        # A float even when no row was billed: an empty sum is the int 0, which
        # ``MetadataValue.float`` refuses, and the whole read-back would fail.
        total = sum((row["cost"] for row in rows), 0.0)
        out["cost"] = dg.MetadataValue.float(round(total, 6))
    return out
