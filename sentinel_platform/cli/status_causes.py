"""``sentinel status``: why the rules decided, named from what the workers recorded.

A stream whose recent verdicts are mostly rules fallbacks is a warning
(:mod:`~sentinel_platform.cli.status_verdicts`). "The analyzer is failing" is the wrong
diagnosis when the fleet stopped asking it on purpose: a spent daily token budget
(``SENTINEL_ANALYZER_DAILY_TOKENS``) or the token budget per minute is no failure of the
model server, and each has its own remedy. Two records tell the cause: the hold the fleet
set on an exhausted analyzer (its reason starts with the exhaustion's own cause, such as
``daily_tokens``), and the ``fallback_cause`` every fallback verdict carries. A hold
speaks for the whole fleet, so it is named first; then the most frequent recorded cause;
with neither, the analyzer is failing for all the status can tell.

:func:`fallback_cause` is pure and table-tested; :func:`hold_remedy` is the remedy of a
hold, shared with the drain advice (:mod:`~sentinel_platform.cli.status_advice`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sentinel_platform.streams.backlog.provisional import BATCH_CAUSE_TEXT

#: The hold cause a worker writes for an exhausted analyzer (quota, spend limit, key).
EXHAUSTED = "exhausted"
#: The exhaustion cause of the fleet's own daily token budget (a hold reason's prefix).
DAILY_TOKENS = "daily_tokens"

#: The words for each recorded ``fallback_cause`` (the provisional verdicts' contract).
CAUSE_TEXT = {
    "down": "the analyzer is down (refused, timing out or failing)",
    "breaker_open": "the analyzer is down: its circuit breaker is open",
    "held": "the fleet holds the analyzer (no worker calls it)",
    "exhausted": "the analyzer is exhausted (quota, spend limit or key)",
    "over_budget": "the daily token budget (SENTINEL_ANALYZER_DAILY_TOKENS) is spent",
    "refused": "the model refused the messages",
    "unusable": "the model's answers were no verdicts",
    **{
        cause: f"the batch lane's requests {text} (the rules decided them, final)"
        for cause, text in BATCH_CAUSE_TEXT.items()
    },
}
FAILING = "the analyzer is failing"


def exhaustion_cause(hold: Mapping[str, Any]) -> str:
    """An exhausted hold's own cause: the prefix of its reason (``daily_tokens: ...``)."""
    head, sep, _ = str(hold.get("reason") or "").partition(":")
    return head.strip() if sep else ""


def hold_remedy(hold: Mapping[str, Any]) -> str:
    """What ends ``hold`` (a :class:`~sentinel_platform.cli.output.AnalyzerHold` record)."""
    cause = hold.get("cause")
    if cause == EXHAUSTED and exhaustion_cause(hold) == DAILY_TOKENS:
        return (
            "the daily token budget (SENTINEL_ANALYZER_DAILY_TOKENS) refills at midnight UTC; "
            "to resume now, raise it and run `sentinel analyzer release`"
        )
    if cause == EXHAUSTED:
        return (
            "fix what the provider reports (quota, spend limit, key), then run "
            "`sentinel analyzer release`"
        )
    if cause == "announced_limit":
        return "it ends as the provider's announced budget refills; raise the account's limits"
    return (
        "it ends by itself; if it recurs, set SENTINEL_ANALYZER_RATE_LIMIT to what the "
        "analyzer takes"
    )


def _held_text(hold: Mapping[str, Any]) -> str:
    if exhaustion_cause(hold) == DAILY_TOKENS:
        return (
            f"the daily token budget of analyzer {hold['analyzer_id']} is spent "
            "(SENTINEL_ANALYZER_DAILY_TOKENS; it refills at midnight UTC)"
        )
    which = exhaustion_cause(hold) or "exhausted"
    if hold.get("key_digest"):
        key = hold.get("key") or hold["key_digest"]
        return f"analyzer {hold['analyzer_id']} holds its key {key} ({which})"
    return f"analyzer {hold['analyzer_id']} is exhausted ({which})"


def fallback_cause(causes: Mapping[str, int], holds: Sequence[Mapping[str, Any]]) -> str:
    """Why the rules decided: an exhausted analyzer's hold first (the daily budget named
    as such, then the analyzer's own hold, then a key's), else the most frequent recorded
    ``fallback_cause``, else :data:`FAILING`."""
    exhausted = [h for h in holds if h.get("cause") == EXHAUSTED]
    # the daily budget first, then a hold of the whole analyzer, then a key's
    exhausted.sort(key=lambda h: (exhaustion_cause(h) != DAILY_TOKENS, bool(h.get("key_digest"))))
    if exhausted:
        return _held_text(exhausted[0])
    known = [(n, c) for c, n in causes.items() if c in CAUSE_TEXT and n > 0]
    if known:
        return CAUSE_TEXT[max(known)[1]]
    return FAILING
