"""``sentinel status``: the last hours' model verdicts against the truth and the rules.

One short line per stream whose results carry labelled model verdicts (the figures of
:func:`~sentinel_platform.streams.backlog.recent_quality.quality_of`), each model and
prompt version with its precision and recall and the rules' on the same messages, so an
operator sees at a glance whether the model beats the rules it replaces. A fallback
model's and a shadow's are named by their role first (``fallback m2·p2``), and a
shadow's carry the live decisions' figures on the same messages beside the rules'. A stream
without labelled model verdicts in the window (a source without truth) gets no line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pair(row: Mapping[str, Any], prefix: str) -> str:
    return f"{_figure(row[f'{prefix}precision'])}/{_figure(row[f'{prefix}recall'])}"


def _model(row: Mapping[str, Any]) -> str:
    role = row.get("role") or "primary"
    named = f"{row['model']}·{row['prompt_version']}"
    beside = f"rules {_pair(row, 'rules_')}"
    if role == "shadow":
        beside = f"live {_pair(row, 'live_')}, {beside}"
    return (
        f"{named if role == 'primary' else f'{role} {named}'} precision "
        f"{_figure(row['precision'])} recall {_figure(row['recall'])} ({beside}) "
        f"on {row['labelled']} labelled"
    )


def line(doc: Mapping[str, Any] | None) -> str | None:
    """``  quality (last 6 h): gpt-4o-mini·3f2a9c1e precision 0.80 recall 0.75 (rules
    1.00/0.60) on 120 labelled``; None without labelled model verdicts (or not read)."""
    labelled = [row for row in (doc or {}).get("models") or [] if row["labelled"]]
    if not doc or not labelled:  # no truth (the axioms', a partner feed's): nothing to say
        return None
    hours = f"{doc['window_s'] / 3600:g} h"
    return f"  quality (last {hours}): " + "; ".join(_model(row) for row in labelled)
