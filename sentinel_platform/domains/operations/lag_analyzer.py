"""When the analyzer's capacity limits the drain: the lag advice that names it.

The lag card's usual advice under pressure is "add workers or raise
``SENTINEL_WORKER_CONCURRENCY``". That cannot help when the workers wait on the analyzer:
the fleet is held off it (a ``Retry-After``, a spent quota), paced to a budget (the
provider's announced one, ``SENTINEL_ANALYZER_RATE_LIMIT``,
``SENTINEL_ANALYZER_TOKENS_PER_MINUTE``), the messages wait for a down analyzer
(``SENTINEL_ANALYZER_WHEN_DOWN=wait``), or every message is a model call to a server that
may answer one call at a time. :func:`analyzer_bound` tells which from the stream's AI
figures (:class:`~sentinel_platform.domains.operations.ai_health.AiFigures`) and the
drain rate, and :func:`analyzer_advice` words what to do instead; both pure and
table-tested. The figures are read only for a stream under pressure
(:func:`read_analyzer_bound`), so a calm stream's lag tick costs nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sentinel_platform.domains.operations.ai_health import AiFigures, message_fate
from sentinel_platform.domains.operations.ai_health_read import read_figures
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import read_drain_rate
from sentinel_platform.streams.backlog.verdict_mix import MIN_VERDICTS
from sentinel_platform.streams.operators import analyzer_holds as hold_store
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

#: Zones whose advice the analyzer may change (worker_off's is to start workers).
ADVISED_ZONES = frozenset({"elevated", "backpressure"})
#: A configured budget used to this share is what paces the drain.
BUDGET_USED = 0.8
#: From this share of model verdicts, every message waits on a model call.
MODEL_SHARE = 0.5

BoundKind = Literal["held", "paced", "budget", "waiting_down", "model_speed"]


@dataclass(frozen=True)
class AnalyzerBound:
    """Why the analyzer limits the drain (``kind``), what to do (``advice``), and the
    same in a few words for an alert's one-line summary (``todo``)."""

    kind: BoundKind
    advice: str
    todo: str


def analyzer_bound(
    figures: AiFigures,
    drain_rate: float | None,
    rate_limit: float | None = None,
    tokens_per_minute: int | None = None,
) -> AnalyzerBound | None:
    """Whether the analyzer's capacity is what limits this stream's drain, most certain
    cause first: a standing hold, the pacing to a budget (announced, or configured and
    used to ``BUDGET_USED``), no verdict at all while ``wait`` keeps the messages for a
    down analyzer, or most verdicts being the model's. None: the workers are the limit."""
    if not figures.analyzer_configured:
        return None
    mix = figures.mix
    release = "`sentinel analyzer release` once it is usable"
    if figures.standing:
        hold = figures.standing[0]
        return AnalyzerBound(
            "held",
            f"The fleet is held off the analyzer ({hold_store.hold_text(hold)}): no model "
            "call goes out, so more workers or SENTINEL_WORKER_CONCURRENCY cannot drain "
            f"faster; {message_fate(hold.cause, figures.when_down)}. It drains when the "
            f"hold ends (`sentinel status` shows it; {release}).",
            f"the analyzer is held ({hold.cause}), more workers cannot help; it drains when "
            "the hold ends (`sentinel status`)",
        )
    if any(hold.cause == hold_store.ANNOUNCED_LIMIT for hold in figures.holds):
        return AnalyzerBound(
            "paced",
            "The fleet paces itself to the analyzer's announced budget (the provider's "
            "rate-limit headers): more workers cannot drain faster. Raise the limit with "
            "the provider, or let the backlog drain at the budget's pace.",
            "the analyzer's announced budget paces the drain, more workers cannot help",
        )
    used = _budget_used(figures, drain_rate, rate_limit, tokens_per_minute)
    if used:
        return AnalyzerBound(
            "budget",
            f"The drain runs at the analyzer's configured budget ({used}): more workers "
            "cannot drain faster. Raise the budget if the provider allows, or let the "
            "backlog drain at its pace.",
            f"the drain runs at {used}, more workers cannot help",
        )
    if figures.when_down == "wait" and mix.verdicts == 0:
        return AnalyzerBound(
            "waiting_down",
            "No verdict in the last minutes while messages wait, with "
            "SENTINEL_ANALYZER_WHEN_DOWN=wait: the analyzer is likely down and the messages "
            "wait for it (worker logs: `analyzer_unavailable`); more workers cannot help. "
            "Bring the analyzer back, or set SENTINEL_ANALYZER_WHEN_DOWN=rules to decide "
            "them by the rules meanwhile.",
            "the analyzer looks down and the messages wait for it "
            "(SENTINEL_ANALYZER_WHEN_DOWN=wait): bring it back",
        )
    if mix.verdicts >= MIN_VERDICTS and (mix.ai_share or 0) >= MODEL_SHARE:
        return AnalyzerBound(
            "model_speed",
            "Every message waits on a model call: more workers or "
            "SENTINEL_WORKER_CONCURRENCY help only while the model server has room for "
            "more calls at once (a server answering one call at a time, such as llama.cpp "
            "without `--parallel`, is the limit); check its load before adding workers.",
            "each message waits on a model call: add workers only if the model server "
            "has room for more calls at once",
        )
    return None


def _budget_used(
    figures: AiFigures,
    drain_rate: float | None,
    rate_limit: float | None,
    tokens_per_minute: int | None,
) -> str:
    """The configured budget the drain uses up (``BUDGET_USED``), named; "" for none."""
    if rate_limit and drain_rate and drain_rate >= BUDGET_USED * rate_limit:
        return f"SENTINEL_ANALYZER_RATE_LIMIT={rate_limit:g} calls/s"
    tokens = figures.mix.input_tokens_per_min + figures.mix.output_tokens_per_min
    if tokens_per_minute and tokens >= BUDGET_USED * tokens_per_minute:
        return f"SENTINEL_ANALYZER_TOKENS_PER_MINUTE={tokens_per_minute}"
    return ""


def analyzer_advice(zone: str, bound: AnalyzerBound) -> str:
    """The lag advice for ``zone`` when the analyzer limits the drain."""
    if zone == "backpressure":
        return (
            "Publishing is paused until the backlog drains (it resumes by itself at "
            f"nominal). {bound.advice}"
        )
    return f"Producers are paced to the workers. {bound.advice}"


def analyzer_explains_wait(
    client: RedisClient, stream: str, keys: StreamKeys, settings: Settings
) -> bool:
    """Whether the analyzer's limits explain messages a live worker has held past the
    reclaim idle time: a hold of any registered analyzer stands, or the analyzer limits
    the stream's drain (:func:`analyzer_bound` at its drain rate)."""
    if hold_store.read_holds(client, hold_store.configured_ids(settings)):
        return True
    drain_rate = read_drain_rate(client, keys)
    return read_analyzer_bound(client, stream, keys, settings, drain_rate) is not None


def read_analyzer_bound(
    client: RedisClient,
    stream: str,
    keys: StreamKeys,
    settings: Settings,
    drain_rate: float | None,
) -> AnalyzerBound | None:
    """:func:`analyzer_bound` from the stream's AI figures read now."""
    if settings.analyzer_url is None:
        return None
    figures = read_figures(client, stream, keys, settings)
    return analyzer_bound(
        figures, drain_rate, settings.analyzer_rate_limit, settings.analyzer_tokens_per_minute
    )
