"""A sharded stream in ``sentinel status``: one stream to its operators, its shards below.

Each shard is measured as a stream is (``status.stream_state`` on the shard's keys).
:func:`merged` makes the stream's figures from theirs: lag, backlog, pending, dead
letters, what the workers hold in flight, processed entries and rates are summed, with
what still waits on the base key for the workers' forwarders; the zone and the seconds
of work are the worst shard's, so a hot shard cannot hide behind cold ones. Every worker
serves every shard, so a consumer is alive only while it holds its lease on every shard.
Each shard's own figures are the breakdown (``--shards``; ``shards`` in ``--json``).

Pure functions over the status documents (``dataclasses.asdict`` of the states), so the
rules are tested from tables of cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sentinel_platform.cli import output

#: Each shard's figures in the breakdown (those of the ``--json`` document's model).
SHARD_FIELDS = tuple(output.ShardStatus.model_fields)
#: Summed over the shards, the base key's own added (what waits for its forwarders).
SUMMED_WITH_BASE = ("lag", "backlog", "pending")
#: Summed over the shards; unknown (None) only when no shard knows it.
SUMMED = ("dlq_depth", "processed", "rate_per_s", "drain_rate_per_s", "in_flight_allowance")


def merged(
    base: dict[str, Any], shards: Sequence[dict[str, Any]], zone_order: Sequence[str]
) -> dict[str, Any]:
    """The stream's status from its base key's (``base``) and its shards' documents."""
    doc = dict(base)
    for name in SUMMED_WITH_BASE:
        doc[name] = base[name] + sum(shard[name] for shard in shards)
    for name in SUMMED:
        doc[name] = _sum_known(shard.get(name) for shard in shards)
    work = [shard["work_s"] for shard in shards if shard["work_s"] is not None]
    doc["work_s"] = max(work) if work else None
    doc["zone"] = max((shard["zone"] for shard in shards), key=zone_order.index)
    doc["live_workers"] = min(shard["live_workers"] for shard in shards)
    doc["consumers"] = merged_consumers([shard["consumers"] for shard in shards])
    doc["retained"] = _retained([shard["retained"] for shard in shards])
    doc["shards"] = [{name: shard[name] for name in SHARD_FIELDS} for shard in shards]
    return doc


def merged_consumers(by_shard: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One line per consumer name: alive only if alive on every shard, its pending summed,
    its idle time the shortest, its published limit summed (a share per shard)."""
    names = sorted({c["name"] for consumers in by_shard for c in consumers})
    out = []
    for name in names:
        seen = [c for consumers in by_shard for c in consumers if c["name"] == name]
        alive = len(seen) == len(by_shard) and all(c["lease"] == "alive" for c in seen)
        idle = [c["idle_ms"] for c in seen if c["idle_ms"] is not None]
        registered = next((c["registered"] for c in seen if c["registered"]), None)
        out.append(
            {
                "name": name,
                "lease": "alive" if alive else "dead",
                "pending": sum(c["pending"] for c in seen),
                "idle_ms": min(idle) if idle else None,
                "registered": registered,
                "holds": _sum_known(c.get("holds") for c in seen),
            }
        )
    return out


def _sum_known(values: Any) -> Any:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _retained(parts: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    known = [part for part in parts if part]
    if not known:
        return None
    ages = [part["oldest_age_s"] for part in known if part["oldest_age_s"] is not None]
    return {
        **known[0],
        "entries": sum(part["entries"] for part in known),
        "oldest_age_s": max(ages) if ages else None,
    }


def shard_lines(doc: dict[str, Any]) -> list[str]:
    """The breakdown's lines of one stream (``--shards``); none for a stream of one."""
    lines = []
    for number, shard in enumerate(doc.get("shards") or []):
        dlq = "?" if shard["dlq_depth"] is None else shard["dlq_depth"]
        work = "-" if shard["work_s"] is None else f"{shard['work_s']} s"
        lines.append(
            f"  shard {number} {shard['stream']}  {shard['zone'].replace('_', ' ')}  "
            f"lag {shard['lag']} = backlog {shard['backlog']} + pending {shard['pending']}  "
            f"work {work}  workers {shard['live_workers']}  dead letters {dlq}"
        )
    return lines
