"""Is the model right lately: the last hours' model verdicts against the truth and the
rules, per model and prompt version, for ``sentinel status``.

Read as :mod:`~sentinel_platform.streams.backlog.verdict_mix` reads the mix: one bounded
``XREVRANGE`` of the results stream (at most :data:`MAX_ENTRIES`, the newest, back
:data:`WINDOW_S` seconds), nothing new written by the workers. A labelled result entry
carries its truth (``label``) and the rules' verdict on the same message
(``rules_is_threat``), so the figures are counts
(:class:`~sentinel_platform.verdict_quality.Confusion`), computed as the
``verdict_quality`` asset computes them. A provisional fallback a re-screen in the window
superseded (``rescreen_of``) is left out, so a message counts by its newest verdict; the
demo's entries are left out. Only a model's verdicts are measured: the rules decided the
others, and the rules' figures on the model's messages stand beside the model's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import redis

from sentinel_platform.schemas import is_demo
from sentinel_platform.streams.backlog.entry_ages import server_now_s
from sentinel_platform.streams.backlog.provisional import RESCREEN_OF
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform.verdict_quality import (
    LABEL,
    RULES_IS_THREAT,
    Confusion,
    agreement,
    flag,
    outcome,
)

#: The last hours the status measures: enough labelled threats at a 2% base rate to say
#: something, recent enough that a prompt change shows the same day.
WINDOW_S = 6 * 3600
#: At most this many results are read per stream and per call (the newest ones).
MAX_ENTRIES = 5_000
RULES_DRIVERS = ("rules", "fallback")


def _standing(rows: Sequence[tuple[str, Mapping[str, str]]]) -> list[Mapping[str, str]]:
    """``rows`` (id, fields) without the demo's and those a re-screen among them names."""
    superseded = {fields.get(RESCREEN_OF) for _, fields in rows} - {None}
    return [f for entry_id, f in rows if entry_id not in superseded and not is_demo(f)]


def summarise(rows: Sequence[tuple[str, Mapping[str, str]]]) -> list[dict[str, Any]]:
    """Per model and prompt version (sorted), among the model verdicts of ``rows``: the
    verdicts, the labelled ones, the confusion matrix and figures of the model and of the
    rules on the same messages, and the share of verdicts that agreed with the rules."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for fields in _standing(rows):
        if fields.get("driver_used") in RULES_DRIVERS or not fields.get("model"):
            continue
        key = (fields["model"], fields.get("prompt_version") or "-")
        group = groups.setdefault(key, _empty())
        said, rules = flag(fields.get("is_threat")), flag(fields.get(RULES_IS_THREAT))
        label = flag(fields.get(LABEL))
        group["verdicts"] += 1
        group["mine"] = group["mine"].add(outcome(label, said))
        group["rules"] = group["rules"].add(outcome(label, rules))
        if said is not None and rules is not None:
            group["compared"] += 1
            group["agreed"] += said == rules
    return [_figures(model, prompt, group) for (model, prompt), group in sorted(groups.items())]


def _empty() -> dict[str, Any]:
    return {"verdicts": 0, "agreed": 0, "compared": 0, "mine": Confusion(), "rules": Confusion()}


def _figures(model: str, prompt: str, group: dict[str, Any]) -> dict[str, Any]:
    mine, rules = group["mine"], group["rules"]
    return {
        "model": model,
        "prompt_version": prompt,
        "verdicts": group["verdicts"],
        "labelled": mine.labelled,
        **{name: getattr(mine, name) for name in ("tp", "fp", "tn", "fn")},
        **mine.figures(),
        **{f"rules_{name}": value for name, value in rules.figures().items()},
        "agreement": agreement(group["agreed"], group["compared"]),
    }


def read_quality(
    client: RedisClient,
    shards: Iterable[StreamKeys],
    window_s: int = WINDOW_S,
    cap: int = MAX_ENTRIES,
) -> dict[str, Any]:
    """The last ``window_s`` seconds' quality of the results of ``shards`` (each results
    key read once), as the status document holds it: ``window_s`` and ``models``
    (:func:`summarise`)."""
    since_ms = int(server_now_s(client) * 1000) - window_s * 1000
    rows: list[tuple[str, Mapping[str, str]]] = []
    for results in dict.fromkeys(shard.results for shard in shards):
        try:
            rows += entries(client.xrevrange(results, max="+", min=str(since_ms), count=cap))
        except redis.ResponseError:  # the key holds something else: say nothing
            continue
    return {"window_s": window_s, "models": summarise(rows)}
