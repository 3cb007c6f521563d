"""``sentinel verdict ID``: why a message was decided as it was.

The narrative, model and tokens of a verdict live only in the stream's results; this
command shows one message's: the input it judged, each verdict (the decision, who made
it, the narrative, tokens and cost), whether a verdict is provisional, superseded or a
re-screen, and which one is in force. ``ID`` is a natural key (a transaction's id;
an axiom's ``source_id|emitted_at``) or a results entry id. Finding it is bounded
(:mod:`~sentinel_platform.cli.verdict_lookup`); what it shows is built purely
(:mod:`~sentinel_platform.cli.verdict_view`).

Nothing found is an error (:data:`~sentinel_platform.exit_codes.EXIT_ERROR`) naming
what was searched, so a script can tell "no such verdict" from a verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import redis

from sentinel_platform import argtypes
from sentinel_platform.cli import verdict_lookup, verdict_view
from sentinel_platform.cli.common import CliError, open_client, print_json, settings_from_env
from sentinel_platform.cli.output_verdict import VerdictLookup
from sentinel_platform.exit_codes import EXIT_USAGE
from sentinel_platform.registry import UnknownStreamError, resolve_stream
from sentinel_platform.settings import Settings
from sentinel_platform.streams.sharding.shards import recorded_keys

#: Results entries a lookup reads at most, by default (``--scan``).
DEFAULT_SCAN = 200_000


def pricing(settings: Settings) -> verdict_view.Pricing:
    """The cost of a verdict's tokens at the settings' prices for its lane (a batch
    verdict's at the batch share), as the reporting computes it; without an input and
    an output price, no cost. The reporting's module loads Dagster and Spark, so it is
    imported only when prices are set."""
    if settings.analyzer_price_input_per_mtok is None:
        return lambda *_: None
    if settings.analyzer_price_output_per_mtok is None:
        return lambda *_: None
    from sentinel_platform.domains.reporting.cost import lane_cost, prices_from

    prices = prices_from(settings)
    return lambda i, o, c, lane: lane_cost(i, o, c, lane, prices)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "verdict",
        help="one message's verdicts: input, decision, who made it, narrative, tokens, cost",
        description="Exit code: 0 found, 1 not found (or Redis unreachable, bad settings), "
        "2 usage error.",
    )
    parser.add_argument(
        "id", help="a transaction's id (the stream's natural key) or a results entry id"
    )
    parser.add_argument(
        "--stream",
        default="transactions",
        help="the stream: its name (transactions, axioms, ...) or its key (default transactions)",
    )
    parser.add_argument(
        "--scan",
        type=argtypes.positive,
        default=DEFAULT_SCAN,
        metavar="N",
        help=f"read at most N results entries looking for it (default {DEFAULT_SCAN:,})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    try:
        spec = resolve_stream(args.stream, settings)
    except (UnknownStreamError, ValueError) as exc:
        raise CliError(f"--stream {exc}", code=EXIT_USAGE) from None
    client = open_client(settings)
    try:
        shards = recorded_keys(client, settings, spec)
        found = verdict_lookup.find(client, spec, shards, args.id, args.scan)
    except redis.RedisError as exc:
        raise CliError(f"reading the verdict from Redis failed: {exc}") from None
    finally:
        with contextlib.suppress(Exception):
            client.close()
    if found is None or not found.results:
        raise CliError(
            f"no verdict of {args.id!r} on {spec.name}: no results entry with that id, no "
            f"idempotency marker for that key, and none among the newest {args.scan:,} "
            "results (--scan)"
        )
    doc = verdict_view.document(spec.name, args.id, found, pricing(settings))
    doc = VerdictLookup.model_validate(doc).model_dump(mode="json")
    if args.json:
        print_json(doc)
    else:
        sys.stdout.write("\n".join(verdict_view.lines(doc)) + "\n")
    return 0
