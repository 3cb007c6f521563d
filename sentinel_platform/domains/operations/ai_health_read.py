"""Reading one stream's AI figures from Redis, for the ``ai_verdicts`` check and the
AI-health sensor: the I/O edge of :mod:`~sentinel_platform.domains.operations.ai_health`.

The verdict mix is the one ``sentinel status`` reads (``verdict_mix.summarise`` over one
bounded ``XREVRANGE`` of the results), with the demo's entries left out: the demo's
traffic is answered by the rules alone on purpose, and would otherwise read as the
analyzer failing. The fallbacks are counted by their ``fallback_cause`` (``unknown``
where a verdict records none). The holds are the fleet's (``analyzer_holds.read_holds``)
and the provisional backlog the contract's one read (``read_provisional``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import redis

from sentinel_platform.domains.operations.ai_health import AiFigures, fate_policy
from sentinel_platform.schemas import is_demo
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.entry_ages import server_now_s
from sentinel_platform.streams.backlog.provisional import FALLBACK_CAUSE, read_provisional
from sentinel_platform.streams.backlog.verdict_mix import MAX_ENTRIES, WINDOW_S, summarise
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import entries


def read_figures(
    client: RedisClient,
    stream: str,
    keys: StreamKeys,
    settings: Settings,
    found: Sequence[holds.Hold] | None = None,
    window_s: int = WINDOW_S,
    cap: int = MAX_ENTRIES,
) -> AiFigures:
    """The AI figures of the stream ``keys`` name now; ``found``: the holds if the caller
    read them already (one read per tick serves every stream)."""
    now_ms = int(server_now_s(client) * 1000)
    try:
        read = entries(
            client.xrevrange(keys.results, max="+", min=str(now_ms - window_s * 1000), count=cap)
        )
    except redis.ResponseError:  # the key holds something else: say nothing
        read = []
    covered_ms = window_s * 1000
    if read and len(read) >= cap:  # cut short: the oldest entry read bounds the span
        covered_ms = min(covered_ms, max(now_ms - int(read[-1][0].split("-")[0]), 1000))
    rows = [fields for _, fields in read if not is_demo(fields)]
    causes = Counter(
        fields.get(FALLBACK_CAUSE) or "unknown"
        for fields in rows
        if fields.get("driver_used") == "fallback"
    )
    if found is None:
        found = holds.read_holds(client, holds.configured_ids(settings))
    return AiFigures(
        stream=stream,
        mix=summarise(rows, window_s, covered_ms / 1000),
        fallback_causes=dict(causes),
        holds=list(found),
        provisional=read_provisional(client, keys),
        when_down=fate_policy(str(settings.analyzer_when_down), settings.analyzer_rescreen),
        analyzer_configured=settings.analyzer_url is not None,
    )
