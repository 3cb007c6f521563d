"""What a shadow verdict records, and where: pure fields and the one stream they go to.

A shadow verdict is written beside the live one, never instead of it, to the stream's
shadow result stream (:func:`shadow_results_key`: the results stream's name with
``:shadow``, so ``sentinel:verdicts:shadow``, and on a cluster inside the results'
hash slot). Each entry names the message it was asked about (``shadow_of``: the
message's natural key, which the live verdict carries too, since the live entry's id
does not exist before the live verdict is committed), its truth when it has one
(``label``), and what the model said and cost (:meth:`Assessment.recorded`), with
``analyzer_role=shadow``.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.shown import truth_of
from sentinel_platform.streams.backlog.provisional import DAY, day_of
from sentinel_platform.streams.plumbing.keys import shadow_results_key
from workers.analyzer.answers.replies import Assessment

__all__ = ["SHADOW", "SHADOW_MAXLEN", "about", "shadow_entry", "shadow_results_key"]

#: ``Assessment.role`` and ``analyzer_role`` of a shadow verdict
SHADOW = "shadow"
#: The most entries the shadow stream keeps (trimmed approximately as it is written): a
#: trial's verdicts are read by the daily reporting, not kept for ever.
SHADOW_MAXLEN = 200_000


def about(message: Transaction | Axiom) -> dict[str, str]:
    """The fields naming the message a shadow verdict is about, its data day (``day``,
    as the live verdict records it) and its truth."""
    if isinstance(message, Transaction):
        day = day_of(message.timestamp)
        return {
            "shadow_of": message.natural_key,
            "txn_id": message.id,
            DAY: day,
            **truth_of(message),
        }
    day = day_of(message.emitted_at)
    return {"shadow_of": message.natural_key, "source_id": message.source_id, DAY: day}


def shadow_entry(message: Transaction | Axiom, verdict: Assessment) -> dict[str, str]:
    """The shadow stream's entry for ``verdict`` on ``message``."""
    said = {**verdict.recorded(), "analyzer_role": SHADOW}
    return {
        **about(message),
        "is_threat": "true" if verdict.is_threat else "false",
        "risk_level": verdict.risk_level,
        "narrative": verdict.narrative,
        **said,
        "processed_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
    }
