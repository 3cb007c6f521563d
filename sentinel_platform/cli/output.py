"""The ``--json`` documents of ``sentinel``: one pydantic model per command, the schema itself.

Each command builds its document from these models and prints ``model_dump(mode="json")``,
so what a script reads is what the model declares: numbers are JSON numbers, nested
records are objects (never JSON text inside a string), and every time is an ISO-8601
string in UTC. The models forbid unknown fields and validate strictly, so a test can check
the real output against them, and the field tables of docs/cli.md are generated from them
(:func:`field_table`; ``python -m sentinel_platform.cli.output`` rewrites them).

The status document's verdict and quality parts
(:mod:`~sentinel_platform.cli.output_quality`), its batch lane
(:mod:`~sentinel_platform.cli.output_batch`), the ``dlq`` commands' documents
(:mod:`~sentinel_platform.cli.output_dlq`) and ``verdict``'s
(:mod:`~sentinel_platform.cli.output_verdict`) live in modules of their own; this one
holds the status document's frame and the table generator.
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import AwareDatetime, Field

from sentinel_platform.cli.document import Document
from sentinel_platform.cli.output_batch import BatchLane
from sentinel_platform.cli.output_dlq import DlqEntry, Import, Purge, ReplayOutcome
from sentinel_platform.cli.output_quality import Provisional, RecentQuality, VerdictMix
from sentinel_platform.cli.output_verdict import VerdictLookup

Zone = Literal["nominal", "elevated", "backpressure", "worker_off"]


# ``sentinel status --json`` ----------------------------------------------------------


class Limits(Document):
    unit: str = Field(description="what the zones count: `seconds` of work, or `entries`")
    lag_warn_s: float = Field(description="seconds of work from which a stream is elevated")
    lag_pause_s: float = Field(description="seconds of work from which producers pause")
    lag_warn: int | None = Field(description="count limit for elevated, when set")
    lag_pause: int | None = Field(description="count limit for backpressure, when set")
    in_flight_per_worker: int = Field(
        description="most messages one worker holds at once by its settings (its read at a "
        "concurrency of 1, its threads above)"
    )
    text: str = Field(description="the limits in words")


class Eviction(Document):
    policy: str | None = Field(description="the server's `maxmemory-policy`; null: hidden")
    verdict: Literal["ok", "unknown", "warn", "refuse"] = Field(description="what it means")
    accepted: bool = Field(description="an evicting policy runs only because a setting allows")
    message: str = Field(description="why, and the remedy")


class Registration(Document):
    pid: int | None = Field(description="the worker's process id")
    host: str | None = Field(description="the worker's host name")
    started: AwareDatetime | None = Field(description="when the worker registered")


class Consumer(Document):
    name: str = Field(description="consumer name in the group")
    lease: Literal["alive", "dead"] = Field(description="whether it holds its lease")
    pending: int = Field(description="entries delivered to it and not acknowledged")
    idle_ms: int | None = Field(description="ms since it last read; null: unknown")
    registered: Registration | None = Field(description="what the worker registered")
    holds: int | None = Field(
        None,
        description="its in-flight limit in force: the most messages it may hold now, as it "
        "published it (what it holds now is `pending`); null: none published",
    )


class LastPublish(Document):
    run_id: str | None = Field(description="the Dagster run that published")
    partition: str | None = Field(description="the partition published; null: none")
    rows: int | None = Field(description="rows published")
    at: AwareDatetime | None = Field(description="when it finished")
    outcome: str | None = Field(description="`success` or `failed`")
    error: str | None = Field(description="first line of the error, when it failed")
    lane: str | None = Field(
        None, description="`realtime` (the stream) or `batch` (its batch lane); null: not recorded"
    )


class Retention(Document):
    entries: int = Field(description="entries the stream holds")
    oldest_age_s: float | None = Field(description="age of the oldest one in seconds")
    window_s: int = Field(description="how long acknowledged entries are kept")
    enabled: bool = Field(description="whether acknowledged entries are trimmed")


class StreamFigures(Document):
    """What a stream and each shard of a sharded one report alike."""

    stream: str = Field(description="its Redis key")
    zone: Zone = Field(description="its zone")
    lag: int = Field(description="backlog + pending")
    backlog: int = Field(description="entries not yet delivered to the group")
    pending: int = Field(description="entries delivered and not acknowledged")
    live_workers: int = Field(description="consumers holding a lease (on every shard)")
    work_s: float | None = Field(description="seconds of work queued at the drain rate")
    dlq_depth: int | None = Field(description="its dead letters; null: DLQ too big to count")
    processed: int | None = Field(description="entries the group has read (`entries-read`)")


class ShardStatus(StreamFigures):
    """One shard of a sharded stream."""


class StreamStatus(StreamFigures):
    name: str = Field(description="the stream's name (`--stream`, the worker argument)")
    group: str = Field(description="its consumer group")
    published_lag: int | None = Field(description="the lag the workers published")
    producer_paused: bool = Field(description="whether producers are paused")
    drain_rate_per_s: float | None = Field(description="the fleet's measured rows/s")
    consumers: list[Consumer] = Field(description="one per consumer")
    dlq: str = Field(description="the DLQ stream its dead letters go to")
    rate_per_s: float | None = Field(description="entries read per second, last minute")
    last_publish: LastPublish | None = Field(description="the stream's last publish")
    retained: Retention | None = Field(description="retention of the stream")
    in_flight_allowance: int = Field(
        0, description="what the live workers published they hold in flight, summed"
    )
    verdicts: VerdictMix | None = Field(
        None, description="who decided the last minutes' verdicts, and their tokens"
    )
    provisional: Provisional | None = Field(
        None,
        description="the re-screen queue (a sharded stream's summed); a warning while the "
        "oldest waits over 10 minutes",
    )
    quality: RecentQuality | None = Field(
        None, description="the last hours' model verdicts against the truth and the rules"
    )
    batch: BatchLane | None = Field(
        None,
        description="the batch lane (a sharded stream's summed): never lag; a warning once "
        "the oldest batch is past its 24 h completion window",
    )
    drain_advice: str | None = Field(
        None,
        description="when the analyzer's capacity limits the drain (a hold, waiting for a "
        "down analyzer, its call rate, its pace): what limits it and what to do; null: "
        "the analyzer is not shown to be the limit",
    )
    shards: list[ShardStatus] | None = Field(
        None,
        description="a sharded stream's shards (the stream's figures are theirs summed, "
        "its zone and seconds of work the worst shard's); null: one shard",
    )


class DlqFill(Document):
    entries: int = Field(description="entries in the DLQ stream")
    cap: int = Field(description="`SENTINEL_DLQ_MAXLEN`")
    percent: int = Field(description="entries / cap, whole percent rounded down")
    level: Literal["ok", "warning", "error"] = Field(description="fill level")


class AlertRecord(Document):
    id: str = Field(description="the alert stream entry id")
    at: AwareDatetime = Field(description="when it was recorded")
    severity: str = Field(description="`info`, `warning` or `error`")
    source: str = Field(description="what raised it")
    stream: str | None = Field(description="the stream it concerns")
    summary: str = Field(description="the alert in words")
    condition: str = Field(description="the condition it reports")
    details: dict[str, Any] = Field(description="structured details (an object)")


class AnalyzerHold(Document):
    analyzer_id: str = Field(description="the analyzer's id (`SENTINEL_ANALYZER_ID` or a hash)")
    analyzer: str = Field(description="its URL, redacted")
    cause: str = Field(
        description="`retry_after` (it asked for quiet), `announced_limit` (an announced "
        "budget refills for the next call), `exhausted` (with the reason's cause: "
        "`daily_tokens`, `insufficient_quota`, `rejected_key`, ...)"
    )
    reason: str = Field(description="why, in words")
    seconds_left: float | None = Field(description="until it ends; null: until released")
    set_at: float | None = Field(description="when it was set, Unix seconds")
    key: str = Field(
        "", description="a key's hold: the refused key's fingerprint (`sk-...abcd`); '': all keys"
    )
    key_digest: str = Field("", description="a key's hold: its name in Redis (`--key` takes it)")


class Status(Document):
    """``sentinel status --json``."""

    zone: Zone = Field(
        description="the worst stream's zone, at least `elevated` while a warning stands"
    )
    exit_code: int = Field(description="the command's exit code")
    warnings: list[str] = Field(
        [], description="analyzer conditions that make it a warning (fallbacks, exhaustion)"
    )
    redis: str = Field(description="the server, URL redacted")
    limits: Limits = Field(description="the zone limits")
    redis_eviction: Eviction = Field(description="the server's eviction policy")
    streams: list[StreamStatus] = Field(description="one per declared stream")
    dlq: dict[str, int] = Field(description="entries per DLQ stream")
    dlq_fill: dict[str, DlqFill] = Field(description="per DLQ stream, against its cap")
    alerts: list[AlertRecord] = Field(description="the last alerts, newest first")
    analyzer_holds: list[AnalyzerHold] = Field(
        description="the fleet's holds on the analyzer: no worker calls it meanwhile"
    )


#: The documents, by the command that prints them (the keys of docs/cli.md's tables).
DOCUMENTS: dict[str, type[Document]] = {
    "status": Status,
    "dlq list": DlqEntry,
    "dlq show": DlqEntry,
    "dlq replay": ReplayOutcome,
    "dlq purge": Purge,
    "dlq import": Import,
    "verdict": VerdictLookup,
}
#: Commands whose document is a JSON array of the model.
ARRAYS = frozenset({"dlq list", "dlq replay"})


# docs/cli.md field tables ------------------------------------------------------------------


def _type_name(annotation: Any) -> tuple[str, type[Document] | None]:
    """A JSON type in words, and the model to describe below it (objects and arrays)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        name, model = _type_name(inner[0])
        return (f"{name} or null" if len(inner) < len(args) else name), model
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args), None
    if origin is list:
        name, model = _type_name(args[0])
        return f"array of {name}", model
    if origin is dict:
        name, model = _type_name(args[1])
        return ("object" if name == "any" else f"object of {name}"), model
    if isinstance(annotation, type) and issubclass(annotation, Document):
        return "object", annotation
    names = {int: "integer", float: "number", str: "string", bool: "boolean"}
    if annotation is AwareDatetime:
        return "time (ISO-8601, UTC)", None
    return names.get(annotation, "any"), None


def _rows(model: type[Document], prefix: str) -> list[str]:
    rows = []
    for name, info in model.model_fields.items():
        kind, nested = _type_name(info.annotation)
        path = f"{prefix}{name}"
        rows.append(f"| `{path}` | {kind} | {info.description or ''} |")
        if nested is not None:
            suffix = "[]." if kind.startswith("array") else ("{}." if "object of" in kind else ".")
            rows.extend(_rows(nested, path + suffix))
    return rows


def field_table(command: str) -> str:
    """The markdown table of one command's document (docs/cli.md holds it verbatim)."""
    model = DOCUMENTS[command]
    shape = "an array of objects" if command in ARRAYS else "one object"
    head = [
        f"`sentinel {command} --json` prints {shape}:",
        "",
        "| field | type | meaning |",
        "|---|---|---|",
    ]
    prefix = "[]." if command in ARRAYS else ""
    return "\n".join(head + _rows(model, prefix))


def _marker(command: str) -> tuple[str, str]:
    return f"<!-- json:{command} -->", f"<!-- /json:{command} -->"


def _literal(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement that inserts ``text`` as is (no backslash escapes)."""
    return lambda _: text


def with_tables(markdown: str) -> str:
    """``markdown`` with every command's table between its markers regenerated."""
    for command in DOCUMENTS:
        start, end = _marker(command)
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        block = f"{start}\n{field_table(command)}\n{end}"
        if not pattern.search(markdown):
            raise ValueError(f"docs/cli.md has no {start} ... {end} block")
        markdown = pattern.sub(_literal(block), markdown)
    return markdown


def main(argv: list[str] | None = None) -> int:
    """``python -m sentinel_platform.cli.output [docs/cli.md]``: rewrite the tables."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0] if args else "docs/cli.md")
    path.write_text(with_tables(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
