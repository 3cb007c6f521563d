"""What the analyzer's verdicts cost, per day, lane and model, for the read-back assets'
metadata.

Every AI verdict records the tokens its model call reported (``input_tokens``,
``output_tokens``, ``cached_input_tokens`` and the ``model``: extra fields of the result
entry), and so does a fallback whose answer the provider billed without giving a verdict
(cut at ``max_tokens``, a refusal, content that is not the verdict), so the cost of a
day's calls is a sum over the results the read-back already reads; nothing else has to
be kept, and the tables are as fresh as the read-back that computed them.

A day is the data's day, the daily partition the message belongs to: the entry's ``day``
field (:data:`~sentinel_platform.streams.backlog.provisional.DAY`), so a partition
published, re-screened or processed days later is still its own row. An entry written
before results carried it falls back to the UTC date of its entry id (the server's clock
when the verdict was committed). A lane is how the model was asked: the entry's ``lane``
field, ``realtime`` when absent. Only the small aggregate (days x lanes x models) reaches
the driver.

Prices are the settings ``SENTINEL_ANALYZER_PRICE_{INPUT,OUTPUT,CACHED_INPUT}_PER_MTOK``
(per million tokens, in the currency of the user's price list). Without an input and an
output price the metadata shows tokens only: a cost made up from a default price list
would be wrong for every provider but one. Cached prompt tokens are billed at the cached
price when set, else at the input price (never less than what is paid). The batch
lane's tokens cost ``Settings.batch_price_share`` of those prices
(``SENTINEL_ANALYZER_BATCH_PRICE_SHARE``, else the provider's documented discount for
``SENTINEL_ANALYZER_API``): each row's cost is its lane's, and ``saved`` is what the
batch lane's tokens would have cost in real time less what they cost.

The tables fit their cell in the Dagster UI's metadata, whose value column is narrow at a
laptop's width (a third column already scrolls out of sight): each has two columns, one
figure and then the day, lane and model in one cell: ``analyzer_usage`` the AI
verdicts, ``analyzer_tokens`` the tokens billed (input + output), ``analyzer_cost``
(with prices) the cost. The totals
give the input, output and cached tokens and the answers billed without a verdict
(``unusable``) apart; with prices, ``cost`` in all and ``saved`` by the batch lane.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import DAY

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens")
#: The columns that name a row of the tables: (name, type).
KEY_COLUMNS = (("day", "string"), ("lane", "string"), ("model", "string"))
#: The tables' second column: the day, lane and model of the row, in one cell.
ROW_NAME = "day · lane · model"
#: Result field: how the model was asked; absent, :data:`REALTIME`.
LANE = "lane"
REALTIME = "realtime"
BATCH = "batch"
#: At most this many (day, lane, model) rows are shown (the totals count them all).
MAX_ROWS = 100


@dataclass(frozen=True)
class Prices:
    """Per million tokens; ``cached_input`` None: billed as ``input``. ``batch_share``:
    what a batch-lane token costs as a share of these real-time prices."""

    input: float
    output: float
    cached_input: float | None = None
    batch_share: float = 1.0

    def of_lane(self, lane: str) -> Prices:
        """The prices of ``lane``'s tokens (the batch lane's at its share)."""
        if lane != BATCH or self.batch_share == 1.0:
            return self
        share = self.batch_share
        cached = None if self.cached_input is None else self.cached_input * share
        return Prices(self.input * share, self.output * share, cached, 1.0)


def prices_from(settings: Settings) -> Prices | None:
    """The configured prices, or None unless both the input and output price are set;
    the batch lane's share is the configured API's (:meth:`Settings.batch_price_share`)."""
    if settings.analyzer_price_input_per_mtok is None:
        return None
    if settings.analyzer_price_output_per_mtok is None:
        return None
    return Prices(
        settings.analyzer_price_input_per_mtok,
        settings.analyzer_price_output_per_mtok,
        settings.analyzer_price_cached_input_per_mtok,
        settings.batch_price_share(settings.analyzer_api_kind),
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


def lane_cost(
    input_tokens: int, output_tokens: int, cached: int, lane: str | None, prices: Prices | None
) -> float | None:
    """What tokens asked in ``lane`` (None: :data:`REALTIME`) cost: :func:`cost` at the
    lane's prices (:meth:`Prices.of_lane`). Every figure that prices verdicts (these
    tables, the quality rows' cost per verdict, ``sentinel verdict``) prices through
    it, so a batch token costs the same everywhere."""
    lane_prices = None if prices is None else prices.of_lane(lane or REALTIME)
    return cost(input_tokens, output_tokens, cached, lane_prices)


def data_day() -> Column:
    """The entry's data day (its ``day`` field), else the UTC date of its entry id."""
    millis = F.split(F.col("stream_id"), "-").getItem(0).cast("long")
    # Whole days since the epoch, so the date is UTC whatever the session's time zone.
    committed = F.date_add(
        F.lit("1970-01-01").cast("date"), F.floor(millis / 86_400_000).cast("int")
    )
    return F.coalesce(F.col("fields").getItem(DAY), committed.cast("string"))


def usage_by_day(raw: DataFrame) -> DataFrame:
    """``raw`` (a read-back's ``stream_id``, ``fields``) summed per data day, lane and
    model: AI verdicts, the answers billed without one (``unusable``: fallbacks that
    record a ``model``) and the tokens of both. Entries without a ``model`` (rules,
    fallbacks of calls that billed nothing known, the ``sentinel`` contract's verdicts)
    are left out."""
    fields = F.col("fields")
    tokens = [
        F.coalesce(fields.getItem(n).try_cast("long"), F.lit(0)).alias(n) for n in TOKEN_FIELDS
    ]
    model = fields.getItem("model")
    lane = F.coalesce(fields.getItem(LANE), F.lit(REALTIME))
    verdict = (fields.getItem("driver_used") == F.lit("analyzer")).cast("int")
    return (
        raw.where(model.isNotNull())
        .select(
            data_day().alias("day"),
            lane.alias("lane"),
            model.alias("model"),
            verdict.alias("v"),
            *tokens,
        )
        .groupBy("day", "lane", "model")
        .agg(
            F.sum("v").alias("verdicts"),
            (F.count("*") - F.sum("v")).alias("unusable"),
            *[F.sum(n).alias(n) for n in TOKEN_FIELDS],
        )
        .orderBy(F.desc("day"), "lane", "model")
    )


def _table(rows: list[dict[str, Any]], figure: tuple[str, str]) -> dg.TableMetadataValue:
    """The first :data:`MAX_ROWS` of ``rows`` as a two-column table: ``figure`` (name,
    type) first, then :data:`ROW_NAME` (the day, lane and model in one cell). The UI
    never wraps a table cell, so a narrow window cuts the table's right end: there it
    cuts the model's name, never the figure. Each record keeps the day, lane and model
    apart too, for a reader of the API (the UI shows the schema's columns)."""
    name = figure[0]
    keys = [key for key, _ in KEY_COLUMNS]
    records = [
        dg.TableRecord(
            {
                ROW_NAME: " · ".join(str(row[k]) for k in keys),
                name: row[name],
                **{k: row[k] for k in keys},
            }
        )
        for row in rows[:MAX_ROWS]
    ]
    columns = [dg.TableColumn(name, figure[1]), dg.TableColumn(ROW_NAME, "string")]
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))


def usage_tables(rows: list[dict[str, Any]], priced: bool) -> dict[str, dg.TableMetadataValue]:
    """``analyzer_usage`` (``verdicts``), ``analyzer_tokens`` (``tokens``, input +
    output) and, when ``priced``, ``analyzer_cost`` (``cost``) per day, lane and model,
    from ``rows`` (:func:`usage_by_day`'s, with ``cost``)."""
    for row in rows:
        row["tokens"] = row["input_tokens"] + row["output_tokens"]
    figures = {
        "analyzer_usage": ("verdicts", "int"),
        "analyzer_tokens": ("tokens", "int"),
        **({"analyzer_cost": ("cost", "float")} if priced else {}),
    }
    return {key: _table(rows, figure) for key, figure in figures.items()}


def metadata(raw: DataFrame, prices: Prices | None) -> dict[str, Any]:
    """The read-back's cost metadata: the tables per data day, lane and model
    (:func:`usage_tables`) and the totals; a ``cost`` column (each row at its lane's
    prices), its total and ``saved`` (the batch lane's tokens at real-time prices less
    their cost) only when ``prices`` are set."""
    rows = [row.asDict() for row in usage_by_day(raw).collect()]  # days x lanes x models
    for row in rows:
        counts = [int(row[n] or 0) for n in TOKEN_FIELDS]
        row.update(dict(zip(TOKEN_FIELDS, counts, strict=True)))
        row["verdicts"], row["unusable"] = int(row["verdicts"] or 0), int(row["unusable"] or 0)
        row["cost"] = lane_cost(counts[0], counts[1], counts[2], row["lane"], prices)
        full = cost(counts[0], counts[1], counts[2], prices)
        row["saved"] = (full or 0.0) - (row["cost"] or 0.0)
    totals = {n: sum(row[n] for row in rows) for n in (*TOKEN_FIELDS, "unusable")}
    out: dict[str, Any] = {
        **usage_tables(rows, prices is not None),
        **{n: dg.MetadataValue.int(v) for n, v in totals.items()},
    }
    if prices is not None:
        # A float even when no row was billed: an empty sum is the int 0, which
        # ``MetadataValue.float`` refuses, and the whole read-back would fail.
        total = sum((row["cost"] for row in rows), 0.0)
        out["cost"] = dg.MetadataValue.float(round(total, 6))
        saved = sum((row["saved"] for row in rows), 0.0)
        out["saved"] = dg.MetadataValue.float(round(saved, 6))
    return out
