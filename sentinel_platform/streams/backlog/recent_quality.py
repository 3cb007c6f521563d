"""Is the model right lately: the last hours' model verdicts against the truth and the
rules, per role (primary, fallback, shadow), model and prompt version, for ``sentinel
status``.

Read as :mod:`~sentinel_platform.streams.backlog.verdict_mix` reads the mix, and from
the same read (:mod:`~sentinel_platform.streams.backlog.recent_results`): one bounded
``XREVRANGE`` of the results stream (at most :data:`MAX_ENTRIES`, the newest, back
:data:`WINDOW_S` seconds), and one of the shadow result stream, nothing new written by
the workers. A shadow's verdicts are measured on the messages that have a live decision
among the results read, with the live decisions' figures on those messages beside them.
A labelled result entry carries its truth (``label``) and the rules' verdict on the same
message (``rules_is_threat``), so the figures are counts
(:class:`~sentinel_platform.verdict_quality.Confusion`), computed as the
``verdict_quality`` asset computes them. A provisional fallback a re-screen in the window
superseded (``rescreen_of``) is left out, so a message counts by its newest verdict; the
demo's entries are left out. Only a model's verdicts are measured: the rules decided the
others, and the rules' figures on the model's messages stand beside the model's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sentinel_platform.schemas import is_demo
from sentinel_platform.streams.backlog.provisional import RESCREEN_OF
from sentinel_platform.streams.backlog.recent_results import RecentResults, read_recent
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, shadow_results_key
from sentinel_platform.streams.plumbing.replies import Entry
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
#: Result field: which analyzer made a model's verdict (absent: the primary).
ANALYZER_ROLE = "analyzer_role"
#: Shadow entry field: the natural key of the message (a transaction's ``txn_id``).
SHADOW_OF = "shadow_of"
#: The roles of a model's verdicts, in the order the status lists them.
ROLES = ("primary", "fallback", "shadow")
SHADOW = "shadow"


def _standing(rows: Sequence[Entry]) -> list[Mapping[str, str]]:
    """``rows`` (id, fields) without the demo's and those a re-screen among them names."""
    superseded = {fields.get(RESCREEN_OF) for _, fields in rows} - {None}
    return [f for entry_id, f in rows if entry_id not in superseded and not is_demo(f)]


def _order(key: tuple[str, str, str]) -> tuple[int, str, str]:
    role, model, prompt = key
    return (ROLES.index(role) if role in ROLES else len(ROLES), model, prompt)


def summarise(rows: Sequence[Entry]) -> list[dict[str, Any]]:
    """Per role, model and prompt version (primary, fallback, then any other role; each
    by model and prompt), among the model verdicts of ``rows``: the verdicts, the
    labelled ones, the confusion matrix and figures of the model and of the rules on the
    same messages, and the share of verdicts that agreed with the rules. The role is the
    entry's ``analyzer_role``; one without it is the primary's."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for fields in _standing(rows):
        if fields.get("driver_used") in RULES_DRIVERS or not fields.get("model"):
            continue
        role = fields.get(ANALYZER_ROLE) or ROLES[0]
        group = groups.setdefault((role, *_named(fields)), _empty())
        _count(group, fields, flag(fields.get(RULES_IS_THREAT)))
    return [
        _figures(key, group) for key, group in sorted(groups.items(), key=lambda i: _order(i[0]))
    ]


def summarise_shadow(shadow: Sequence[Entry], live: Sequence[Entry]) -> list[dict[str, Any]]:
    """Per model and prompt version (sorted), the shadow's verdicts among ``shadow`` (its
    stream's entries, newest first) on the messages with a live decision among ``live``
    (the results' entries), each message once by its newest shadow verdict: the shadow's
    figures as :func:`summarise` gives them, with the live decisions' on the same
    messages (``live_precision``, ``live_recall``, ``live_f1``) and the rules'."""
    decided: dict[str, Mapping[str, str]] = {}
    for fields in _standing(live):  # newest first: the first seen is the newest
        key = fields.get("txn_id")
        if key is not None:
            decided.setdefault(key, fields)
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    seen: set[tuple[str, str, str]] = set()
    for _, fields in shadow:
        asked, model = fields.get(SHADOW_OF), _named(fields)
        if asked not in decided or is_demo(fields) or (asked, *model) in seen:
            continue
        seen.add((asked, *model))
        group = groups.setdefault((SHADOW, *model), _empty())
        verdict = decided[asked]
        _count(group, fields, flag(verdict.get(RULES_IS_THREAT)))
        group["live"] = group["live"].add(
            outcome(flag(fields.get(LABEL)), flag(verdict.get("is_threat")))
        )
    return [_figures(key, group) for key, group in sorted(groups.items())]


def _named(fields: Mapping[str, str]) -> tuple[str, str]:
    return fields.get("model") or "-", fields.get("prompt_version") or "-"


def _count(group: dict[str, Any], fields: Mapping[str, str], rules: bool | None) -> None:
    said, label = flag(fields.get("is_threat")), flag(fields.get(LABEL))
    group["verdicts"] += 1
    group["mine"] = group["mine"].add(outcome(label, said))
    group["rules"] = group["rules"].add(outcome(label, rules))
    if said is not None and rules is not None:
        group["compared"] += 1
        group["agreed"] += said == rules


def _empty() -> dict[str, Any]:
    return {
        "verdicts": 0,
        "agreed": 0,
        "compared": 0,
        "mine": Confusion(),
        "rules": Confusion(),
        "live": Confusion(),
    }


def _figures(key: tuple[str, str, str], group: dict[str, Any]) -> dict[str, Any]:
    role, model, prompt = key
    mine, rules, live = group["mine"], group["rules"], group["live"]
    shown = {
        "role": role,
        "model": model,
        "prompt_version": prompt,
        "verdicts": group["verdicts"],
        "labelled": mine.labelled,
        **{name: getattr(mine, name) for name in ("tp", "fp", "tn", "fn")},
        **mine.figures(),
        **{f"rules_{name}": value for name, value in rules.figures().items()},
        "agreement": agreement(group["agreed"], group["compared"]),
    }
    if role == SHADOW:
        shown.update({f"live_{name}": value for name, value in live.figures().items()})
    return shown


def quality_of(
    client: RedisClient, recent: RecentResults, shards: Iterable[StreamKeys]
) -> dict[str, Any]:
    """The quality of ``recent`` (the results of ``shards`` read back at least
    :data:`WINDOW_S` seconds, :data:`MAX_ENTRIES` each), as the status document holds it:
    ``window_s`` and ``models`` (:func:`summarise`, then the shadow's rows from the
    shards' shadow result streams, read here, :func:`summarise_shadow`)."""
    live = [entry for read in recent.within(WINDOW_S, MAX_ENTRIES) for entry in read]
    keys = (shadow_results_key(shard) for shard in shards)
    shadow = read_recent(client, keys, WINDOW_S, MAX_ENTRIES).rows()
    return {"window_s": WINDOW_S, "models": summarise(live) + summarise_shadow(shadow, live)}
