"""``sentinel dlq list|show|replay|purge|export|import``: the operator's hands on dead letters.

The safety rules live in :mod:`sentinel_platform.streams.operators.dlq_admin` (atomic, idempotent
replay); this module only turns command lines into filters, asks for confirmation where
data would be destroyed, and prints results for people (or JSON for scripts).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any, get_args

from sentinel_platform import argtypes
from sentinel_platform.cli import output
from sentinel_platform.cli.common import (
    CliError,
    open_client,
    print_json,
    settings_from_env,
    stream_option,
)
from sentinel_platform.cli.progress import Progress
from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from sentinel_platform.schemas import DeadLetterReason
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators import dlq_admin, dlq_export, dlq_import
from sentinel_platform.streams.operators.dlq_admin import (
    DlqError,
    DlqFilter,
    ReplayOutcome,
)
from sentinel_platform.streams.operators.dlq_entry import DlqEntry
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.sharding.shards import dlq_streams_of

REASONS: tuple[str, ...] = get_args(DeadLetterReason)


def _add_filters(parser: argparse.ArgumentParser, limit_default: int | None) -> None:
    parser.add_argument(
        "--stream",
        help="only dead letters from this stream: its name (transactions, axioms, ...) or "
        "its Redis key",
    )
    parser.add_argument("--reason", choices=REASONS, help="only dead letters with this reason")
    parser.add_argument(
        "--since", help="only entries dead-lettered since an ISO time or a duration (15m, 2h, 1d)"
    )
    parser.add_argument(
        "--limit",
        type=argtypes.positive,
        default=limit_default,
        metavar="N",
        help="at most N entries (oldest first)",
    )


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    dlq = subparsers.add_parser(
        "dlq", help="list, show, replay, purge, export or import dead letters"
    )
    actions = dlq.add_subparsers(dest="dlq_action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="dead letters, oldest first")
    _add_filters(listing, limit_default=50)
    listing.add_argument("--json", action="store_true", help="JSON array on stdout")
    listing.set_defaults(handler=run_list)

    show = actions.add_parser("show", help="one dead letter with its payload")
    show.add_argument("id", help="DLQ entry id (DLQ_STREAM/ID when several DLQs exist)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=run_show)

    replay = actions.add_parser(
        "replay",
        help="re-publish dead letters onto their source stream as new messages",
        description="Each entry is re-published with a fresh delivery count and the original "
        f"id in field {dlq_admin.REPLAYED_FROM_FIELD}, then removed from the DLQ, atomically: "
        "replaying the same entry twice publishes it once.",
    )
    replay.add_argument("ids", nargs="*", help="DLQ entry ids; or use --all with filters")
    replay.add_argument("--all", action="store_true", help="every entry matching the filters")
    _add_filters(replay, limit_default=None)
    replay.add_argument("--dry-run", action="store_true", help="show what would be replayed")
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(handler=run_replay)

    purge = actions.add_parser("purge", help="delete dead letters for good (needs --yes)")
    _add_filters(purge, limit_default=None)
    purge.add_argument("--yes", action="store_true", help="confirm the deletion")
    purge.add_argument("--json", action="store_true")
    purge.set_defaults(handler=run_purge)

    export = actions.add_parser(
        "export",
        help="write every dead letter (all fields, verbatim) as JSON Lines",
        description="One line per DLQ entry, oldest first: {dlq, id, fields}. Run it before "
        "the DLQ reaches SENTINEL_DLQ_MAXLEN, past which its oldest entries are trimmed.",
    )
    export.add_argument(
        "--output", "-o", default="-", help="a new file (never overwritten); default stdout"
    )
    export.add_argument(
        "--since", metavar="ID", help="only entries after this id (the last one exported before)"
    )
    export.add_argument(
        "--delete-exported",
        action="store_true",
        help="make room: delete each exported entry once its line is written and flushed",
    )
    export.set_defaults(handler=run_export)

    imports = actions.add_parser(
        "import",
        help="put the lines of an export back into the DLQ",
        description="Each line becomes a new entry of its DLQ with every field as exported "
        f"and its old id in field {dlq_import.IMPORTED_FROM_FIELD}. The whole file is checked "
        "first (a bad line imports nothing); an entry imported before, or still in the DLQ, "
        "is skipped, so importing a file twice adds it once.",
    )
    imports.add_argument("file", help="a file written by `sentinel dlq export`, or - for stdin")
    imports.add_argument("--json", action="store_true")
    imports.set_defaults(handler=run_import)


def _filter(args: argparse.Namespace, settings: Settings) -> DlqFilter:
    """The filters of the command line; checked before Redis is asked anything."""
    try:
        since = dlq_admin.parse_since(args.since) if args.since else None
    except DlqError as exc:
        raise CliError(str(exc), code=EXIT_USAGE) from None
    stream = stream_option(settings, args.stream) if args.stream is not None else None
    return DlqFilter(stream=stream, reason=args.reason, since=since, limit=args.limit)


def entry_document(entry: DlqEntry) -> output.DlqEntry:
    """One dead letter as ``dlq list``/``dlq show`` print it (the documented schema)."""
    letter, fields = entry.letter, entry.fields
    encoded = fields.get("payload_encoding") == "base64"
    return output.DlqEntry(
        dlq=entry.dlq,
        id=entry.entry_id,
        dead_lettered_at=entry.dead_lettered_at,
        stream=entry.source_stream,
        group=letter.group if letter else fields.get("group"),
        message_id=letter.message_id if letter else fields.get("message_id"),
        reason=entry.reason,
        error=letter.error if letter else fields.get("error"),
        deliveries=letter.deliveries if letter else _number(fields.get("deliveries")),
        consumer=letter.consumer if letter else fields.get("consumer"),
        imported_from=entry.imported_from,
        payload=entry.payload(),
        payload_encoding=fields.get("payload_encoding"),
        payload_raw=fields.get("payload") if encoded and entry.payload() is not None else None,
        fields=dict(fields),
        problem=entry.problem,
    )


def _number(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _summary_line(entry: DlqEntry) -> str:
    letter = entry.letter
    when = entry.dead_lettered_at.strftime("%Y-%m-%d %H:%M:%S")
    imported = "  (imported)" if entry.imported_from else ""
    if letter is None:
        return f"{entry.entry_id}  {when}  (unreadable: {entry.problem}){imported}"
    error = letter.error if len(letter.error) <= 60 else letter.error[:57] + "..."
    return (
        f"{entry.entry_id}  {when}  {letter.stream:<16} {letter.reason:<24} "
        f"deliveries {letter.deliveries}  from {letter.message_id}  {error}{imported}"
    )


def run_list(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    filt = _filter(args, settings)
    client = open_client(settings)
    entries = dlq_admin.list_entries(client, settings, filt)
    if args.json:
        print_json([entry_document(e).model_dump(mode="json") for e in entries])
        return EXIT_OK
    if not entries:
        print("no dead letters match")
    for entry in entries:
        print(_summary_line(entry))
    return EXIT_OK


def _lookup(client: Any, settings: Any, ref: str) -> DlqEntry:
    try:
        return dlq_admin.get_entry(client, settings, ref)
    except DlqError as exc:
        raise CliError(str(exc)) from None


def run_show(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    client = open_client(settings)
    entry = _lookup(client, settings, args.id)
    doc = entry_document(entry).model_dump(mode="json")
    if args.json:
        print_json(doc)
        return EXIT_OK
    payload = doc.pop("payload", None)
    shown = {k: v for k, v in doc.items() if v is not None and k not in ("fields", "payload_raw")}
    width = max(len(k) for k in shown)
    for name, value in shown.items():
        print(f"{name:<{width}}  {value}")
    print("payload:")
    if isinstance(payload, dict):
        for name, value in payload.items():
            print(f"  {name}: {value}")
    else:
        print("  (not a JSON object)")
    return EXIT_OK


def _check_selection(args: argparse.Namespace, settings: Settings) -> DlqFilter | None:
    """The filter of ``--all``, or None for entry ids; a wrong command line exits 2
    before Redis is asked anything."""
    if args.ids and args.all:
        raise CliError("give entry ids or --all with filters, not both", code=EXIT_USAGE)
    if args.ids:
        if args.stream or args.reason or args.since or args.limit:
            raise CliError("filters only apply with --all", code=EXIT_USAGE)
        return None
    if not args.all:
        raise CliError("nothing selected: give entry ids, or --all (with filters)", EXIT_USAGE)
    return _filter(args, settings)


def _by_id(client: RedisClient, settings: Settings, ref: str) -> DlqEntry | ReplayOutcome:
    """The entry ``ref`` names, or, for an id an earlier replay took out of the DLQ, that
    replay's outcome: retrying a replay is no error."""
    try:
        return dlq_admin.get_entry(client, settings, ref)
    except DlqError as exc:
        before = dlq_admin.replayed_before(client, settings, ref)
        if before is None:
            raise CliError(str(exc)) from None
        return before


def _replay_line(outcome: ReplayOutcome) -> str:
    target = f" -> {outcome.stream} {outcome.new_id or ''}".rstrip() if outcome.stream else ""
    when = outcome.replayed_at.strftime("%Y-%m-%d %H:%M:%S UTC") if outcome.replayed_at else ""
    detail = outcome.detail or (f"at {when}" if when else "")
    status = outcome.status.replace("_", " ")
    return f"{outcome.entry_id}  {status}{target}" + (f"  ({detail})" if detail else "")


def run_replay(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    filt = _check_selection(args, settings)
    client = open_client(settings)
    if filt is None:
        picked = [_by_id(client, settings, ref) for ref in args.ids]
    else:
        picked = list(dlq_admin.list_entries(client, settings, filt))
    entries = [p for p in picked if isinstance(p, DlqEntry)]
    label = "dry run" if args.dry_run else "replay"
    done: Iterator[ReplayOutcome] = iter(())
    if entries:  # only ids replayed before: nothing to draw progress of
        with Progress(len(entries), label) as bar:
            summary = dlq_admin.replay(client, settings, entries, args.dry_run, bar.update)
        done = iter(summary.outcomes)
    # In the order given: an already replayed id where it was named.
    outcomes = [p if isinstance(p, ReplayOutcome) else next(done) for p in picked]
    documents = [output.ReplayOutcome.model_validate(vars(o)) for o in outcomes]
    if args.json:
        print_json([d.model_dump(mode="json") for d in documents])
    else:
        for outcome in outcomes:
            print(_replay_line(outcome))
        counts = Counter(o.status for o in outcomes)
        print(
            f"{counts['replayed']} replayed, {counts['would_replay']} would be replayed, "
            f"{counts['already_replayed']} already replayed, {counts['gone']} gone, "
            f"{counts['refused']} refused"
        )
    return EXIT_ERROR if any(o.status == "refused" for o in outcomes) else EXIT_OK


def run_purge(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    filt = _filter(args, settings)
    if not args.yes:
        scope = "every dead letter" if filt.is_empty else "the matching dead letters"
        print(
            f"refusing to purge {scope} without --yes (purged entries cannot be replayed; "
            "see them first with `sentinel dlq list` with the same filters)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    client = open_client(settings)
    entries = dlq_admin.list_entries(client, settings, filt)
    with Progress(len(entries), "purge") as bar:
        deleted = dlq_admin.purge(client, entries, bar.update)
    if args.json:
        print_json(output.Purge(purged=deleted).model_dump(mode="json"))
    else:
        print(f"purged {deleted} dead letter(s)")
    return EXIT_OK


def _export_to(
    output: str, client: RedisClient, settings: Settings, since: str | None, delete: bool
) -> dlq_export.ExportSummary:
    """Export to stdout (``-``) or to a new file, fsynced before each page is deleted."""
    if output == "-":
        return dlq_export.export(client, settings, sys.stdout, since, delete)
    try:
        target = open(output, "x", encoding="utf-8", newline="\n")  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"cannot create {output}: {exc.strerror or exc}") from None
    with target:
        return dlq_export.export(
            client, settings, target, since, delete, sync=lambda: os.fsync(target.fileno())
        )


def run_export(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    try:
        since = dlq_export.check_since(args.since) if args.since else None
    except dlq_export.ExportError as exc:
        raise CliError(str(exc), code=EXIT_USAGE) from None
    client = open_client(settings)
    where = "stdout" if args.output == "-" else args.output
    try:
        summary = _export_to(args.output, client, settings, since, args.delete_exported)
    except OSError as exc:  # disk full, a closed pipe: what was not written stays in the DLQ
        raise CliError(
            f"writing to {where} failed ({exc.strerror or exc}); every entry not yet written "
            "is still in the DLQ"
        ) from None
    last = ", ".join(f"{dlq} {entry_id}" for dlq, entry_id in summary.last_ids.items())
    deleted = f"; deleted {summary.deleted} from the DLQ" if args.delete_exported else ""
    print(
        f"exported {summary.exported} dead letter(s) to {where}"
        + (f" (last id: {last}; next time --since it)" if last else "")
        + deleted,
        file=sys.stderr,
    )
    return EXIT_OK


def _read_export(path: str, dlqs: list[str]) -> list[dlq_import.ImportEntry]:
    if path == "-":
        return dlq_import.read_export(sys.stdin, dlqs)
    try:
        with open(path, encoding="utf-8") as source:
            return dlq_import.read_export(source, dlqs)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CliError(f"{path} is not UTF-8 text (an export is JSON Lines)") from None


def run_import(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    client = open_client(settings)
    try:
        entries = _read_export(args.file, dlq_streams_of(client, settings))
    except dlq_import.ImportFileError as exc:
        raise CliError(f"{args.file}: {exc}; nothing was imported", code=EXIT_USAGE) from None
    with Progress(len(entries), "importing") as bar:
        summary = dlq_import.import_entries(client, entries, bar.update)
    if args.json:
        document = output.Import(imported=summary.imported, skipped=summary.skipped)
        print_json(document.model_dump(mode="json"))
    else:
        print(
            f"imported {summary.imported} dead letter(s); {summary.skipped} skipped "
            "(imported before or still in the DLQ)"
        )
    return EXIT_OK
