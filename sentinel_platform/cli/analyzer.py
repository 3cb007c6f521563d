"""``sentinel analyzer release``: end the fleet's hold on the analyzer.

A hold (``sentinel status`` lists them) stops every call of every worker to one
analyzer: for its ``Retry-After``, or until released when nothing but an operator can
say the analyzer is usable again (an exhausted quota). This command deletes every hold
of one analyzer (``--analyzer ID``) or of every analyzer the workers registered and the
one the settings name: the analyzer's own and those of its rejected keys; ``--key`` (a
fingerprint as ``sentinel status`` shows it, ``sk-...abcd``, or its digest) ends only
that key's. Each worker sees the release at its next read of the hold (within its
refresh interval) and its held messages are tried again within a second or so.

Releasing a hold the analyzer still means (it is still throttling) costs one refused
call: the answer sets the hold again. Exit status 0 whether or not a hold was there (a
release is idempotent); 1 when Redis cannot be reached.
"""

from __future__ import annotations

import argparse
import contextlib

import redis

from sentinel_platform.cli.common import CliError, open_client, print_json, settings_from_env
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    analyzer = subparsers.add_parser(
        "analyzer",
        help="the fleet's hold on the analyzer (see `sentinel status`)",
        description="Operate the analyzer's fleet-wide hold.",
    )
    actions = analyzer.add_subparsers(dest="analyzer_action", metavar="ACTION", required=True)
    release = actions.add_parser(
        "release",
        help="end the hold: every worker may call the analyzer again",
        description="Delete the hold of one analyzer (--analyzer) or of every known one; "
        "the workers resume their calls within about a second.",
    )
    release.add_argument(
        "--analyzer",
        metavar="ID",
        default=None,
        help="the analyzer's id as `sentinel status` shows it (default: every analyzer)",
    )
    release.add_argument(
        "--key",
        metavar="FINGERPRINT",
        default=None,
        help="only the hold of this rejected key (`sk-...abcd` as `sentinel status` shows "
        "it, or its digest); default: every hold, the analyzer's and its keys'",
    )
    release.add_argument("--json", action="store_true", help="one JSON document on stdout")
    release.set_defaults(handler=run_release)


def known_ids(client: RedisClient, settings: Settings) -> list[str]:
    """Every analyzer a worker registered, and the one these settings name."""
    return sorted(set(holds.registered(client)) | set(holds.configured_ids(settings)))


def run_release(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    client = open_client(settings)
    try:
        ids = [args.analyzer] if args.analyzer else known_ids(client, settings)
        found = [hold for i in ids for hold in holds.holds_of(client, i)]
        if args.key:
            found = [hold for hold in found if holds.matches_key(hold, args.key)]
        ended = holds.release_holds(client, found)
    except redis.RedisError as exc:
        raise CliError(f"releasing the analyzer hold failed: {exc}") from None
    finally:
        with contextlib.suppress(Exception):
            client.close()
    if args.json:
        keys = [hold.key or hold.key_digest for hold in ended if hold.key_digest]
        doc: dict[str, list[str]] = {"released": list(dict.fromkeys(h.analyzer_id for h in ended))}
        print_json({**doc, "keys": keys} if keys else doc)
    else:
        lines = [f"released: {holds.hold_text(hold)}" for hold in ended]
        print("\n".join(lines or ["no analyzer hold to release"]))
    return 0
