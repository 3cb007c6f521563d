"""``sentinel verdict``: one message's verdicts as a document and as text, from the entries
:mod:`~sentinel_platform.cli.verdict_lookup` found (pure: nothing here reads Redis).

Who made a verdict is its ``driver_used``: the model (``analyzer``, with the ``model``
and ``prompt_version`` it recorded), the rules, or the rules as a fallback with its
``fallback_cause``. A provisional fallback is superseded by the model's verdict naming
it (``rescreen_of``); both are kept, and the verdict in force is the newest model
verdict, else the newest (:func:`in_force`). The cost is what ``price`` makes of the
tokens the entry recorded in its ``lane`` (the settings' prices, the batch lane's at its
share; None without them). A batch-lane fallback is named for what the provider did
(:data:`~sentinel_platform.streams.backlog.provisional.BATCH_CAUSE_TEXT`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from sentinel_platform.cli.verdict_lookup import RESULT_KEYS, Entry, Found
from sentinel_platform.schemas import is_demo
from sentinel_platform.streams.backlog.provisional import (
    BATCH_CAUSE_TEXT,
    DAY,
    FALLBACK_CAUSE,
    PROVISIONAL,
    RESCREEN_OF,
)

#: Tokens to a cost (input, output, cached input, the lane); None: no prices.
Pricing = Callable[[int, int, int, str], float | None]
#: Result field: the lane a verdict was decided in; absent, :data:`REALTIME`.
LANE = "lane"
REALTIME = "realtime"
TOKENS = ("input_tokens", "output_tokens", "cached_input_tokens")
WHERE = {
    "stream": "from its source stream",
    "rescreen_queue": "from the re-screen queue (the source entry was trimmed)",
}


def _count(value: str | None) -> int | None:
    try:
        return None if value is None else max(0, int(value))
    except ValueError:
        return None


def _threat(value: str | None) -> bool | None:
    return None if value is None else value.lower() == "true"


def _committed_at(entry_id: str) -> datetime:
    return datetime.fromtimestamp(int(entry_id.split("-")[0]) / 1000, tz=timezone.utc)


def record(
    entry: Entry, results: Sequence[Entry], queued: Mapping[str, str], price: Pricing
) -> dict[str, Any]:
    """One result entry as a :class:`~sentinel_platform.cli.output_verdict.VerdictRecord`."""
    entry_id, fields = entry
    tokens = {name: _count(fields.get(name)) for name in TOKENS}
    lane = fields.get(LANE) or REALTIME
    cost = None
    if tokens["input_tokens"] is not None or tokens["output_tokens"] is not None:
        counts = [tokens[name] or 0 for name in TOKENS]
        cost = price(counts[0], counts[1], counts[2], lane)
    later = [i for i, f in results if f.get(RESCREEN_OF) == entry_id]
    return {
        "entry_id": entry_id,
        "committed_at": _committed_at(entry_id),
        "day": fields.get(DAY),
        "is_threat": _threat(fields.get("is_threat")),
        "risk_level": fields.get("risk_level"),
        "driver_used": fields.get("driver_used") or "unknown",
        "model": fields.get("model"),
        "prompt_version": fields.get("prompt_version"),
        "fallback_cause": fields.get(FALLBACK_CAUSE),
        "lane": lane,
        "provisional": fields.get(PROVISIONAL) == "true",
        "rescreen_of": fields.get(RESCREEN_OF),
        "superseded_by": later[-1] if later else None,
        "queued_for_rescreen": queued.get(entry_id) if not later else None,
        "narrative": fields.get("narrative") or fields.get("audit_narrative"),
        **tokens,
        "cost": cost,
        "demo": is_demo(fields),
        "fields": dict(fields),
    }


def in_force(records: Sequence[Mapping[str, Any]]) -> str:
    """The verdict in force: the newest model verdict, else the newest one."""
    models = [r for r in records if r["driver_used"] == "analyzer"]
    return (models or list(records))[-1]["entry_id"]


def document(stream: str, query: str, found: Found, price: Pricing) -> dict[str, Any]:
    """The :class:`~sentinel_platform.cli.output_verdict.VerdictLookup` of ``found``."""
    records = [record(e, found.results, found.queued, price) for e in found.results]
    key_of = RESULT_KEYS.get(stream)
    keys = [k for _, f in found.results if key_of and (k := key_of(f))]
    return {
        "stream": stream,
        "query": query,
        "key": keys[0] if keys else None,
        "input": {
            "source_message_id": found.source_id,
            "kept_in": found.kept_in,
            "fields": found.input_fields,
            "note": WHERE.get(found.kept_in or "")
            or "no longer kept: trimmed from the source stream and not in the re-screen queue",
        },
        "verdicts": records,
        "in_force": in_force(records),
        "rescreened": any(r["rescreen_of"] for r in records),
        "search": {
            "found_by": found.search.found_by,
            "entries_scanned": found.search.scanned,
            "complete": found.search.complete,
            "note": found.search.note,
        },
    }


def _who(r: Mapping[str, Any]) -> str:
    """``the model gpt-4o-mini (prompt 3f2a9c1e)``, ``the rules``, or a fallback's cause."""
    driver = r["driver_used"]
    if driver == "analyzer":
        model = f" {r['model']}" if r["model"] else ""
        prompt = f" (prompt_version {r['prompt_version']})" if r["prompt_version"] else ""
        return f"the model{model}{prompt}"
    if driver == "fallback":
        cause = r["fallback_cause"] or "unknown"
        if cause in BATCH_CAUSE_TEXT:
            said = f"the batch lane's request {BATCH_CAUSE_TEXT[cause]}"
            return f"the rules, as a fallback: {said} (fallback_cause {cause})"
        return f"the rules, as a fallback (fallback_cause {cause})"
    return "the rules" if driver == "rules" else driver


def _standing(r: Mapping[str, Any]) -> str:
    """``: provisional, superseded by X``, ``: a re-screen of X``, or nothing."""
    parts = []
    if r["provisional"]:
        parts.append("provisional")
    if r["superseded_by"]:
        parts.append(f"superseded by {r['superseded_by']}")
    elif r["queued_for_rescreen"]:
        parts.append(f"waits for the model in the re-screen queue ({r['queued_for_rescreen']})")
    if r["rescreen_of"]:
        parts.append(f"a re-screen of {r['rescreen_of']}")
    return f": {', '.join(parts)}" if parts else ""


def _decision(r: Mapping[str, Any]) -> str:
    risk = f"risk {r['risk_level'] or '-'}"
    if r["is_threat"] is None:  # a stream without a threat decision (the axioms)
        return risk
    return f"{'threat' if r['is_threat'] else 'no threat'}, {risk}"


def _tokens(r: Mapping[str, Any]) -> str | None:
    if r["input_tokens"] is None and r["output_tokens"] is None:
        return None
    cached = f" (cached {r['cached_input_tokens']})" if r["cached_input_tokens"] else ""
    cost = "cost - (no SENTINEL_ANALYZER_PRICE_*)" if r["cost"] is None else f"cost {r['cost']:g}"
    return f"tokens in {r['input_tokens'] or 0}{cached}, out {r['output_tokens'] or 0}; {cost}"


def lines(doc: Mapping[str, Any]) -> list[str]:
    """The document (as ``--json`` prints it) in words, one verdict after the other."""
    key = f" {doc['key']}" if doc["key"] else ""
    source = doc["input"]["source_message_id"] or "?"
    out = [f"{doc['stream']}{key}: source message {source}"]
    shown = doc["input"]["fields"]
    payload = "" if shown is None else " " + ", ".join(f"{k}={v}" for k, v in shown.items())
    out.append(f"input ({doc['input']['note']}){':' if shown is not None else ''}{payload}")
    for r in doc["verdicts"]:
        when = str(r["committed_at"])[:19].replace("T", " ") + " UTC"
        day = f", day {r['day']}" if r["day"] else ""
        demo = " (the demo's)" if r["demo"] else ""
        lane = " (batch lane)" if r["lane"] != REALTIME else ""
        out.append(f"verdict {r['entry_id']} at {when}{day}{demo}{lane}: {_decision(r)}")
        out.append(f"  by {_who(r)}{_standing(r)}")
        if r["narrative"]:
            out.append(f"  narrative: {r['narrative']}")
        if tokens := _tokens(r):
            out.append(f"  {tokens}")
    out.append(f"in force: {doc['in_force']}")
    search = doc["search"]
    out.append(f"searched: {search['note']}" if search["note"] else "")
    return [line for line in out if line]
