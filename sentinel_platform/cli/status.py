"""``sentinel status``: is it healthy, what is stuck, what died.

Per stream it reports the lag the producers act on (backlog + pending, measured from the
group itself, because the pending count alone misses the backlog), its zone,
each consumer with its lease (alive or dead: a dead consumer with pending entries is what
the fleet will recover), the DLQ depth and the last alerts. It also answers "did my run get
processed?": entries the group has read so far (``entries-read``), the rate over the last
minute, and the stream's last publish (partition, rows, when, outcome). The exit code is
the worst zone, so the command doubles as a health probe. Every hold on the analyzer
(no worker calls it meanwhile) is shown with its cause, seconds left and analyzer. Per
stream it says who decided the last minutes' verdicts and their tokens per minute; while
most are fallbacks, or the analyzer is exhausted, the overall state is a warning
(:mod:`~sentinel_platform.cli.status_verdicts`). Per stream with labelled model verdicts
it also measures the last hours' verdicts against the truth and the rules
(:mod:`~sentinel_platform.cli.status_quality`).

A stream counts as having a live worker when at least one consumer holds its lease or a
worker published the lag key within its TTL; otherwise its zone is ``worker_off``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from sentinel_platform import argtypes
from sentinel_platform.cli import (
    output,
    status_advice,
    status_batch,
    status_provisional,
    status_shards,
    status_verdicts,
)
from sentinel_platform.cli import status_records as records
from sentinel_platform.cli.common import (
    ZONE_EXIT,
    CliError,
    open_client,
    print_json,
    settings_from_env,
)
from sentinel_platform.cli.status_render import render
from sentinel_platform.redis_server import running_embedded_url
from sentinel_platform.registry import StreamSpec, stream_specs
from sentinel_platform.settings import Settings, redact_url
from sentinel_platform.streams.backlog.drain import card_rate, read_drain_rate
from sentinel_platform.streams.backlog.holdings import most_held, read_holdings
from sentinel_platform.streams.backlog.lag import measure_lag, read_lag_key
from sentinel_platform.streams.backlog.progress import last_publish, progress
from sentinel_platform.streams.backlog.recent_quality import MAX_ENTRIES, WINDOW_S, quality_of
from sentinel_platform.streams.backlog.recent_results import read_recent
from sentinel_platform.streams.backlog.retention import retention_summary
from sentinel_platform.streams.backlog.verdict_mix import mix_of
from sentinel_platform.streams.backlog.zones import (
    limits_from_settings,
    pinned_or_read,
    work_seconds,
    zone,
)
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.operators import dlq_admin
from sentinel_platform.streams.operators.dlq_capacity import fill_level, percent
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.eviction_policy import server_verdict
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.plumbing.replies import entries, text, text_dict
from sentinel_platform.streams.sharding.shards import recorded_keys

ZONE_ORDER = ("nominal", "elevated", "backpressure", "worker_off")


@dataclass
class ConsumerState:
    name: str
    lease: str  # "alive" | "dead"
    pending: int
    idle_ms: int | None
    registered: dict[str, Any] | None = None
    #: what it published it may hold in flight now (its limit in force); None: nothing
    holds: int | None = None


@dataclass
class StreamState:
    stream: str
    name: str
    group: str
    zone: str
    lag: int
    backlog: int
    pending: int
    published_lag: int | None
    producer_paused: bool
    live_workers: int
    #: seconds of queued work at the drain rate the producers measured (None: no rate)
    work_s: float | None = None
    drain_rate_per_s: float | None = None
    consumers: list[ConsumerState] = field(default_factory=list)
    dlq: str = ""
    dlq_depth: int | None = None
    processed: int | None = None
    rate_per_s: float | None = None
    last_publish: dict[str, Any] | None = None
    retained: dict[str, Any] | None = None
    #: what the live workers published they hold in flight, summed (streams.backlog.holdings)
    in_flight_allowance: int = 0
    #: who decided the last minutes' verdicts and their tokens (streams.backlog.verdict_mix)
    verdicts: dict[str, Any] | None = None


def _consumers(client: RedisClient, keys: StreamKeys) -> list[ConsumerState]:
    try:
        infos = {text(c["name"]): c for c in client.xinfo_consumers(keys.stream, keys.group)}
    except redis.ResponseError:  # no stream or group yet
        infos = {}
    registered = text_dict(client.hgetall(keys.consumers))
    states = []
    for name in sorted(set(infos) | set(registered)):
        info = infos.get(name, {})
        states.append(
            ConsumerState(
                name=name,
                lease="alive" if client.exists(keys.lease(name)) else "dead",
                pending=int(info.get("pending", 0)),
                idle_ms=int(info["idle"]) if "idle" in info else None,
                registered=records.registration(registered.get(name)),
            )
        )
    return states


def stream_state(
    client: RedisClient,
    settings: Settings,
    keys: StreamKeys,
    dlq_counts: dict[str, int] | None,
    name: str = "",
) -> StreamState:
    """One stream's state, but its verdict mix (the status reads it, ``stream_doc``; a
    scrape of the exporter does not need it)."""
    reading = measure_lag(client, keys)
    published = read_lag_key(client, keys)
    consumers = _consumers(client, keys)
    live = sum(1 for c in consumers if c.lease == "alive")
    worker_alive = live > 0 or published is not None
    done = progress(client, keys)
    rate = card_rate(read_drain_rate(client, keys), done.rate_per_s)
    holdings = read_holdings(client, keys)
    for consumer in consumers:
        consumer.holds = holdings.by_consumer.get(consumer.name)
    limits = limits_from_settings(settings, holdings.allowance)
    return StreamState(
        stream=keys.stream,
        name=name or keys.stream,
        group=keys.group,
        zone=zone(reading.lag if worker_alive else None, rate, limits),
        lag=reading.lag,
        backlog=reading.backlog,
        pending=reading.pending,
        published_lag=published,
        producer_paused=bool(client.exists(keys.paused)),
        live_workers=live,
        work_s=work_seconds(reading.lag, rate),
        drain_rate_per_s=None if rate is None else round(rate, 1),
        consumers=consumers,
        dlq=keys.dlq,
        dlq_depth=None if dlq_counts is None else dlq_counts.get(keys.stream, 0),
        processed=done.processed,
        rate_per_s=done.rate_per_s,
        last_publish=records.publish_record(last_publish(client, keys)),
        retained=retention_summary(client, keys, settings),
        in_flight_allowance=holdings.allowance,
    )


def stream_doc(
    client: RedisClient, settings: Settings, spec: StreamSpec, dlq_counts: dict[str, int] | None
) -> dict[str, Any]:
    """One declared stream's document; a sharded one is its shards' merged
    (``status_shards``), with the breakdown."""
    base = asdict(stream_state(client, settings, keys_for(settings, spec), dlq_counts, spec.name))
    shards = recorded_keys(client, settings, spec)
    # one read of the results serves the mix (minutes) and the quality line (hours)
    recent = read_recent(client, (shard.results for shard in shards), WINDOW_S, MAX_ENTRIES)
    verdicts = {
        "verdicts": asdict(mix_of(recent)),
        "provisional": status_provisional.read(client, shards),
        "quality": quality_of(client, recent, shards),
        "batch": status_batch.read(client, shards),
    }
    if len(shards) == 1:  # one shard, or none recorded yet
        return {**base, **verdicts}
    states = [asdict(stream_state(client, settings, keys, dlq_counts)) for keys in shards]
    return {**status_shards.merged(base, states, ZONE_ORDER), **verdicts}


def recent_alerts(client: RedisClient, settings: Settings, count: int) -> list[dict[str, Any]]:
    if count <= 0:
        return []
    try:
        rows = entries(client.xrevrange(settings.alerts_stream, max="+", min="-", count=count))
    except redis.ResponseError:
        return []
    return [records.alert_record(alert_id, fields) for alert_id, fields in rows]


def worst_zone(zones: list[str]) -> str:
    return max(zones, key=ZONE_ORDER.index) if zones else "nominal"


def collect(client: RedisClient, settings: Settings, alerts: int = 5) -> dict[str, Any]:
    """The whole status as plain data (the ``--json`` document)."""
    dlq_counts = dlq_admin.depth_by_stream(client, settings)
    streams = [stream_doc(client, settings, spec, dlq_counts) for spec in stream_specs(settings)]
    held = [asdict(hold) for hold in analyzer_holds(client, settings)]
    setup = status_advice.setup_from(settings)
    for s in streams:
        s["drain_advice"] = status_advice.drain_advice(s, held, setup)
    found = (
        status_verdicts.warnings(streams, held)
        + status_provisional.warnings(streams)
        + status_batch.warnings(streams)
    )
    worst = status_verdicts.overall_zone(
        worst_zone([s["zone"] for s in streams]), found, ZONE_ORDER
    )
    depths = dlq_admin.depth(client, settings)
    doc = {
        "zone": worst,
        "exit_code": ZONE_EXIT[worst],
        "warnings": found,
        "redis": redact_url(settings.redis_url_value)
        or f"{running_embedded_url(settings) or '?'} (embedded)",
        "limits": _limits(settings),
        "redis_eviction": eviction_state(client, settings),
        "streams": streams,
        "dlq": depths,
        "dlq_fill": dlq_fill(depths, settings.dlq_maxlen),
        "alerts": recent_alerts(client, settings, alerts),
        "analyzer_holds": held,
    }
    return output.Status.model_validate(doc).model_dump(mode="json")


def analyzer_holds(client: RedisClient, settings: Settings) -> list[holds.Hold]:
    """Every hold on an analyzer: those of the analyzers the workers registered, and of
    the one these settings name (``SENTINEL_ANALYZER_URL`` / ``SENTINEL_ANALYZER_ID``)."""
    return holds.read_holds(client, holds.configured_ids(settings))


def _limits(settings: Settings) -> dict[str, Any]:
    """The zone limits: seconds of work, or Sentinel-L7's counts when set."""
    limits = limits_from_settings(settings)
    return {
        "unit": limits.unit,
        "lag_warn_s": limits.warn_s,
        "lag_pause_s": limits.pause_s,
        "lag_warn": limits.lag_warn,
        "lag_pause": limits.lag_pause,
        "in_flight_per_worker": most_held(settings.read_count, pinned_or_read(settings)),
        "text": limits.describe(),
    }


def dlq_fill(depths: dict[str, int], cap: int) -> dict[str, dict[str, Any]]:
    """Each DLQ stream against SENTINEL_DLQ_MAXLEN (past it the oldest entries are trimmed)."""
    return {
        dlq: {"entries": n, "cap": cap, "percent": percent(n, cap), "level": fill_level(n, cap)}
        for dlq, n in depths.items()
    }


def eviction_state(client: RedisClient, settings: Settings) -> dict[str, Any]:
    """The server's ``maxmemory-policy`` (the worst primary's on a cluster; ``None`` when
    the server hides it) and the verdict workers and ``sentinel up`` act on."""
    verdict = server_verdict(client, settings.allow_evicting_server)
    return {
        "policy": verdict.policy,
        "verdict": verdict.level,
        "accepted": verdict.accepted,
        "message": verdict.message,
    }


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status",
        help="lag, zones, consumers, dead letters and alerts per stream",
        description="Exit code: 0 nominal, 3 elevated, 4 backpressure, 5 worker off "
        "(the worst stream counts), 1 error (Redis unreachable, bad settings).",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument(
        "--alerts",
        type=argtypes.non_negative,
        default=5,
        metavar="N",
        help="how many recent alerts to show",
    )
    parser.add_argument(
        "--shards", action="store_true", help="each shard of a sharded stream on a line"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    client = open_client(settings)
    try:
        doc = collect(client, settings, alerts=args.alerts)
    except redis.RedisError as exc:
        raise CliError(f"reading status from Redis failed: {exc}") from None
    finally:
        with contextlib.suppress(Exception):
            client.close()
    if args.json:
        print_json(doc)
    else:
        render(doc, sys.stdout, shards=args.shards)
    return int(doc["exit_code"])
