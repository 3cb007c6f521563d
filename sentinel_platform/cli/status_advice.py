"""``sentinel status``: when the analyzer's capacity is what limits a stream's drain, say so.

A stream behind (``elevated``, ``backpressure``) is usually a matter of workers: more of
them, or more calls each (``SENTINEL_WORKER_CONCURRENCY``). Not when every message waits
for the analyzer: a held analyzer is called by no worker, a model server that answers one
call at a time answers no faster for more callers, and the fleet's call rate is capped by
``SENTINEL_ANALYZER_RATE_LIMIT``. Advising workers then sends the operator the wrong way,
so :func:`drain_advice` names the analyzer whenever what the status already reads shows
it is the limit, first match wins:

* a hold that keeps the messages waiting: any hold on the whole analyzer but an
  exhausted one under ``SENTINEL_ANALYZER_WHEN_DOWN=rules`` (the rules decide then, at
  their own speed), with the hold's remedy (:func:`~.status_causes.hold_remedy`);
* ``wait`` and nothing decided in the window while work waits: the workers wait for an
  analyzer that is down or answers nothing;
* the drain at the configured call rate (:data:`AT_RATE_LIMIT` of it or more);
* most verdicts are the analyzer's: the drain is its pace, and more callers help only as
  far as the model server answers calls in parallel.

Otherwise it says nothing: the lag figures stand for themselves. The function is pure
(table-tested) over the stream's and the holds' status records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sentinel_platform.cli.status_causes import EXHAUSTED, hold_remedy
from sentinel_platform.settings import Settings

#: The zones in which a drain is short of the work.
BEHIND = ("elevated", "backpressure")
#: A drain at this share of SENTINEL_ANALYZER_RATE_LIMIT or more is held by that limit.
AT_RATE_LIMIT = 0.9
#: Most of the window's verdicts are the analyzer's past this share.
MOSTLY_AI = 0.5
NO_HELP = "more workers or SENTINEL_WORKER_CONCURRENCY cannot help"


@dataclass(frozen=True)
class AnalyzerSetup:
    """What the settings say about the analyzer, as far as the advice needs it."""

    configured: bool
    when_down: str = "rules"
    rate_limit: float | None = None


def setup_from(settings: Settings) -> AnalyzerSetup:
    configured = settings.analyzer_url is not None or settings.analyzer_api is not None
    return AnalyzerSetup(configured, settings.analyzer_when_down, settings.analyzer_rate_limit)


def _left(hold: Mapping[str, Any]) -> str:
    left = hold.get("seconds_left")
    return "until released" if left is None else f"{math.ceil(left):d} s left"


def _waiting_hold(holds: Sequence[Mapping[str, Any]], when_down: str) -> Mapping[str, Any] | None:
    """The first hold of a whole analyzer that keeps messages waiting (see the module)."""
    for hold in holds:
        if hold.get("key_digest"):
            continue  # workers on another key still call it
        if hold.get("cause") != EXHAUSTED or when_down == "wait":
            return hold
    return None


def drain_advice(
    stream: Mapping[str, Any], holds: Sequence[Mapping[str, Any]], setup: AnalyzerSetup
) -> str | None:
    """What limits ``stream``'s drain when it is the analyzer, and what to do; None when
    the stream keeps up or the analyzer is not shown to be the limit."""
    if stream.get("zone") not in BEHIND:
        return None
    hold = _waiting_hold(holds, setup.when_down)
    if hold is not None:
        return (
            f"the analyzer limits the drain: {hold['analyzer_id']} is held ({hold['cause']}, "
            f"{_left(hold)}) and no worker calls it, so its messages wait; {NO_HELP}: "
            f"{hold_remedy(hold)}"
        )
    if not setup.configured:
        return None
    mix = stream.get("verdicts") or {}
    rate = stream.get("drain_rate_per_s")
    if setup.when_down == "wait" and not mix.get("verdicts") and stream.get("lag", 0) > 0:
        return (
            "the analyzer limits the drain: nothing was decided lately while the workers "
            "wait for it (SENTINEL_ANALYZER_WHEN_DOWN=wait), so it is down or answers "
            f"nothing; {NO_HELP}: check the analyzer (the worker logs say why), or set "
            "SENTINEL_ANALYZER_WHEN_DOWN=rules to let the rules decide meanwhile"
        )
    if setup.rate_limit and rate is not None and rate >= AT_RATE_LIMIT * setup.rate_limit:
        return (
            f"the analyzer's call rate limits the drain: {rate:g} rows/s at "
            f"SENTINEL_ANALYZER_RATE_LIMIT={setup.rate_limit:g}; {NO_HELP}: raise it if the "
            "analyzer takes more calls"
        )
    share = mix.get("ai_share")
    if share is not None and share > MOSTLY_AI:
        pace = "-" if rate is None else f"{rate:g}"
        models = ", ".join(mix.get("models") or []) or "the analyzer"
        return (
            f"the analyzer's pace limits the drain: {pace} rows/s, most decided by {models} "
            f"with {stream.get('in_flight_allowance', 0)} in flight; more workers or "
            "SENTINEL_WORKER_CONCURRENCY help only as far as the model server answers "
            "calls in parallel (a llama.cpp server: --parallel); else a faster server or "
            "model, or fewer output tokens (SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS)"
        )
    return None
