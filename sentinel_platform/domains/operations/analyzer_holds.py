"""The analyzer's holds as the AI-health sensor alerts on them: one alert per episode.

A short hold is routine (a ``Retry-After: 2`` costs two seconds); one that lasts means no
message is assessed by the model, often for a reason only an operator can end (a spent
quota). The sensor (:mod:`~sentinel_platform.domains.operations.ai_health_sensor`) reads
every hold each tick (``streams.operators.analyzer_holds``: the analyzers the workers
registered and the one the settings name) and remembers in its cursor since when each one
has been seen. A hold lasting ``ALERT_AFTER_S``, or any exhaustion at once (only an
operator or the provider's reset ends it), raises one alert naming the analyzer, the
cause, the reason, what becomes of the messages under ``SENTINEL_ANALYZER_WHEN_DOWN``
(:func:`~sentinel_platform.domains.operations.ai_health.message_fate`) and the command
that ends it. A hold that ends and comes back is a new episode, alerted again. The
decisions are the pure :func:`held_since` and :func:`due`, table-tested. The same
condition reaches Prometheus as ``SentinelAnalyzerHeld`` (from the exporter).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.ai_health import EXHAUSTED, message_fate
from sentinel_platform.streams.operators import analyzer_holds as holds

#: A hold seen for this long raises the warning (the Prometheus rule's ``for: 1m``).
ALERT_AFTER_S = 60.0


def held_since(found: Sequence[holds.Hold], seen: dict[str, float], now: float) -> dict[str, float]:
    """Since when each hold in ``found`` has been held: what the cursor remembers, else
    when its record says it was set (never later than ``now``). A hold no longer found
    drops out, so its return is a new episode."""
    since = {}
    for hold in found:
        first = seen.get(hold.ident)
        if first is None:
            first = now if hold.set_at is None else min(now, hold.set_at)
        since[hold.ident] = first
    return since


def due(
    found: Sequence[holds.Hold], since: dict[str, float], alerted: set[str], now: float
) -> list[tuple[holds.Hold, float]]:
    """The holds to warn about now, with how long each has lasted: held at least
    ``ALERT_AFTER_S`` (an exhaustion at once) and not yet alerted in this episode. Never
    the fleet's pacing to an
    announced budget (``ANNOUNCED_LIMIT``): it ends by itself within one window, and
    where the budget stays nearly spent one such hold follows another with calls made
    between them, which ticks 30 s apart cannot tell from one long hold."""
    return [
        (hold, now - since[hold.ident])
        for hold in found
        if hold.cause != holds.ANNOUNCED_LIMIT
        and hold.ident not in alerted
        and (hold.cause == EXHAUSTED or now - since[hold.ident] >= ALERT_AFTER_S)
    ]


#: A hold's reason is cut to this in the summary (whole in the details), so the summary's
#: command to end the hold is never cut off.
REASON_CHARS = 80


def _short(reason: str) -> str:
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"


def hold_alert(
    hold: holds.Hold, held_s: float, since: float, source: str, when_down: str = "rules"
) -> Alert:
    """The alert of one hold's episode: an ERROR for an exhaustion, else a warning; what
    becomes of the messages is worded for ``when_down`` (``SENTINEL_ANALYZER_WHEN_DOWN``)."""
    left = "until released" if hold.seconds_left is None else f"{hold.seconds_left:.0f} s left"
    on_key = f" on the key {hold.key}" if hold.key_digest else ""
    return Alert(
        severity="error" if hold.cause == EXHAUSTED else "warning",
        source=source,
        condition=f"analyzer_hold:{hold.ident}:{math.floor(since)}",
        summary=f"No worker{on_key} has called the analyzer {hold.analyzer_id} for "
        f"{held_s:.0f} s ({hold.cause}, {left}: {_short(hold.reason)}): "
        f"{message_fate(hold.cause, when_down)}. `sentinel analyzer release --analyzer "
        f"{hold.analyzer_id}` ends the hold once the analyzer is usable",
        details={
            "analyzer_id": hold.analyzer_id,
            "analyzer": hold.analyzer,
            "key": hold.key,
            "cause": hold.cause,
            "reason": hold.reason,
            "seconds_left": hold.seconds_left,
            "held_s": round(held_s, 1),
            "when_down": when_down,
        },
    )
