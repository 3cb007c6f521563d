"""``sentinel status``: who decided the recent verdicts, what they cost, and when the
analyzer's state alone makes the overall status a warning.

The lag zones say whether the fleet keeps up; they say nothing when every message is
decided by the rules because the analyzer is down or exhausted. :func:`warnings` names
each such condition (most of a stream's recent verdicts are fallbacks, see
:func:`~sentinel_platform.streams.backlog.verdict_mix.mostly_fallback`, with their cause
as :func:`~sentinel_platform.cli.status_causes.fallback_cause` tells it; the fleet holds
an exhausted analyzer), and :func:`overall_zone` raises the overall state to at least
``elevated`` while any holds, so the exit code is the existing warning code (3) rather
than 0. The stream's own zone is left alone: producers pause on it, and a down analyzer
is not a reason to stop publishing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sentinel_platform.cli.status_causes import EXHAUSTED, fallback_cause
from sentinel_platform.streams.backlog.verdict_mix import FALLBACK_SHARE_LIMIT

#: The least overall state while a warning stands.
WARNING_ZONE = "elevated"


def warnings(streams: Sequence[dict[str, Any]], holds: Sequence[dict[str, Any]]) -> list[str]:
    """Why the analyzer alone makes the status a warning, one sentence per cause."""
    found = []
    for s in streams:
        mix = s.get("verdicts")
        if mix and mix["mostly_fallback"]:
            found.append(
                f"{s['stream']}: {_percent(mix['fallback_share'])} of the last "
                f"{mix['verdicts']} verdicts were rules fallbacks (over "
                f"{_percent(FALLBACK_SHARE_LIMIT)}): "
                f"{fallback_cause(mix.get('fallback_causes') or {}, holds)}"
            )
    for hold in holds:
        if hold["cause"] == EXHAUSTED:
            found.append(f"analyzer {hold['analyzer_id']} exhausted: {hold['reason']}")
    return found


def overall_zone(worst: str, found: Sequence[str], order: Sequence[str]) -> str:
    """``worst`` (the worst lag zone), raised to :data:`WARNING_ZONE` while ``found``."""
    if found and order.index(worst) < order.index(WARNING_ZONE):
        return WARNING_ZONE
    return worst


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def _per_min(value: float) -> str:
    return f"{value:,.0f}"


def verdict_line(mix: dict[str, Any] | None) -> str:
    """``verdicts (last 5 min) 120: AI 95%, fallback 5%, rules 0%; tokens/min in 2,400
    (cached 1,200) out 600; model gpt-4o-mini``."""
    if not mix:
        return "  verdicts: not read"
    minutes = f"{mix['window_s'] / 60:g} min"
    if not mix["verdicts"]:
        return f"  verdicts (last {minutes}): none"
    total = mix["verdicts"]
    # a busy stream's read stops at the newest MAX_ENTRIES: say so, never "2000 in 5 min"
    span = (
        f"last {minutes}"
        if mix["covered_s"] >= mix["window_s"]
        else f"the newest, over the last {mix['covered_s']:g} s of {minutes}"
    )
    shares = ", ".join(
        f"{'AI' if driver == 'analyzer' else driver} {_percent(count / total)}"
        for driver, count in mix["by_driver"].items()
    )
    cached = mix["cached_input_tokens_per_min"]
    tokens = (
        f"tokens/min in {_per_min(mix['input_tokens_per_min'])}"
        + (f" (cached {_per_min(cached)})" if cached else "")
        + f" out {_per_min(mix['output_tokens_per_min'])}"
    )
    models = f"; model {', '.join(mix['models'])}" if mix["models"] else ""
    return f"  verdicts ({span}) {total}: {shares}; {tokens}{models}"
