"""Which lane a publish run sends its partition to: the stream itself (real time) or the
stream's batch lane (``batch_stream_key``), read by workers that send it through the
analyzer provider's batch API at the batch price.

The choice is by urgency: a verdict on fresh data is wanted in seconds, one on a past day
is not, and a provider's batch lane takes it at half price and apart from the per-minute
limits. :func:`lane_for` is the whole decision, pure: a run's :data:`LANE_TAG` wins both
ways; without it a partition whose data day ended longer than
``SENTINEL_ANALYZER_BATCH_AFTER_S`` ago goes to the batch lane. Only an analyzer whose
API has a batch lane (a key of ``BATCH_PRICE_SHARE``, with ``SENTINEL_ANALYZER_URL``
set) on a server that serves it (:func:`~sentinel_platform.settings.batch.serves_batches`)
can take one: for the ``sentinel`` API, an OpenAI-compatible server such as llama.cpp,
or no analyzer the partition stays real time,
and a run tagged ``batch`` there is told so (:attr:`LaneChoice.warning`) rather than
published to a lane nobody reads.

The tag is a plain Dagster run tag, so it is set in the UI's launch and backfill dialogs
(a backfill gives its tags to every run it launches) and through GraphQL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

from sentinel_platform.settings import Settings
from sentinel_platform.settings.batch import BATCH_PRICE_SHARE, LANES, Lane, serves_batches

#: The run tag that names a run's lane (``batch`` or ``realtime``); it wins both ways.
LANE_TAG = "sentinel/lane"


@dataclass(frozen=True)
class LaneChoice:
    """The lane of one publish, why (a sentence for the run's metadata), and what the
    user must hear when the run's tag could not be followed."""

    lane: Lane
    reason: str
    warning: str | None = None


def day_end(day: date) -> datetime:
    """When a daily partition's data day ended: the next midnight, UTC."""
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=timezone.utc)


def lane_for(
    *,
    day: date | None,
    now: datetime,
    batch_after_s: float,
    api: str,
    has_analyzer: bool,
    tag: str | None,
    server_batches: bool = True,
) -> LaneChoice:
    """The lane of a publish of the partition of ``day`` (None: not a daily partition)
    at ``now``, for an analyzer speaking ``api`` (``has_analyzer``: a URL is set) on a
    server that serves its batch API or not (``server_batches``), with the run's
    :data:`LANE_TAG` value ``tag`` (None: not tagged)."""
    if has_analyzer and api in BATCH_PRICE_SHARE and not server_batches:
        api = f"{api}-compatible server"  # the API, not this server's batch endpoints
    batchable = has_analyzer and api in BATCH_PRICE_SHARE
    unknown = None
    if tag is not None and tag not in LANES:
        unknown = f"run tag {LANE_TAG}={tag!r} is neither batch nor realtime: ignored"
        tag = None
    if tag == "realtime":
        return LaneChoice("realtime", f"run tag {LANE_TAG}=realtime")
    if tag == "batch":
        if batchable:
            return LaneChoice("batch", f"run tag {LANE_TAG}=batch")
        why = _no_batch_lane(api, has_analyzer)
        return LaneChoice(
            "realtime",
            f"run tag {LANE_TAG}=batch, but {why}",
            f"run tag {LANE_TAG}=batch not followed: {why}; published real time",
        )
    return _by_urgency(day, now, batch_after_s, api, has_analyzer, unknown)


def _by_urgency(
    day: date | None,
    now: datetime,
    batch_after_s: float,
    api: str,
    has_analyzer: bool,
    warning: str | None,
) -> LaneChoice:
    if day is None:
        return LaneChoice("realtime", "not a daily partition", warning)
    age_s = (now - day_end(day)).total_seconds()
    if age_s <= batch_after_s:
        return LaneChoice(
            "realtime",
            f"the data day {day} {_ended(age_s)}: the batch lane takes days ended over "
            f"{_age(batch_after_s)} ago (SENTINEL_ANALYZER_BATCH_AFTER_S)",
            warning,
        )
    if not (has_analyzer and api in BATCH_PRICE_SHARE):
        why = _no_batch_lane(api, has_analyzer)
        return LaneChoice("realtime", f"the data day {day} is past, but {why}", warning)
    return LaneChoice(
        "batch",
        f"the data day {day} {_ended(age_s)}, over SENTINEL_ANALYZER_BATCH_AFTER_S "
        f"({_age(batch_after_s)})",
        warning,
    )


def _no_batch_lane(api: str, has_analyzer: bool) -> str:
    if not has_analyzer:
        return "no analyzer is set (SENTINEL_ANALYZER_URL): the rules decide in real time"
    if api.endswith("-compatible server"):
        return (
            f"the {api} has no batch lane (SENTINEL_ANALYZER_BATCH_LANE=auto takes only "
            "the provider's own host; on: this server serves the batch API)"
        )
    return f"the {api} API has no batch lane (only {', '.join(sorted(BATCH_PRICE_SHARE))} have)"


def _ended(age_s: float) -> str:
    return "has not ended yet" if age_s < 0 else f"ended {_age(age_s)} ago"


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds:.0f}s"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86_400:.1f} days"


def lane_of_run(
    settings: Settings, partition: str | None, tags: Mapping[str, str], now: datetime
) -> LaneChoice:
    """:func:`lane_for` of a run: its daily ``partition`` key (None or not a date: no
    day), its tags and the analyzer the settings name."""
    day = None
    if partition is not None:
        try:
            day = date.fromisoformat(partition)
        except ValueError:
            day = None
    return lane_for(
        day=day,
        now=now,
        batch_after_s=settings.analyzer_batch_after_s,
        api=settings.analyzer_api_kind,
        has_analyzer=settings.analyzer_url is not None,
        tag=tags.get(LANE_TAG),
        server_batches=server_batches(settings),
    )


def server_batches(settings: Settings) -> bool:
    """Whether the analyzer the settings name takes the provider's batch API."""
    url = settings.analyzer_url.get_secret_value() if settings.analyzer_url else None
    return serves_batches(settings.analyzer_api_kind, url, settings.analyzer_batch_lane)
