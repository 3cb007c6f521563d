"""``sentinel shards raise STREAM``: switch a drained stream to the shard count its spec
now declares (``streams.sharding.resize``).

The procedure (docs/scaling.md): pause the producers, let the workers drain the stream
(``sentinel status --shards`` shows every shard at lag 0), stop them, declare the new
count in the stream's ``StreamSpec``, run this, start the workers. It refuses, naming
what is in the way, while a shard has lag or a live worker, or when the declared count
is not above the recorded one; exit status 1 then, 0 once switched.
"""

from __future__ import annotations

import argparse
import contextlib

import redis

from sentinel_platform.cli.common import CliError, open_client, settings_from_env
from sentinel_platform.registry import UnknownStreamError, resolve_stream
from sentinel_platform.streams.operators.group_view import lag_snapshot
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for, shard_keys
from sentinel_platform.streams.sharding.resize import (
    ResizeRefused,
    ShardState,
    raise_shards,
    recorded_shards,
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    shards = subparsers.add_parser(
        "shards",
        help="a sharded stream's shard count (see docs/scaling.md)",
        description="Change the shard count of a sharded stream.",
    )
    actions = shards.add_subparsers(dest="shards_action", metavar="ACTION", required=True)
    raised = actions.add_parser(
        "raise",
        help="switch a drained stream to the shard count its spec declares",
        description="Move the idempotency markers of the keys that change shard and record "
        "the declared count. The stream must be drained and its workers stopped.",
    )
    raised.add_argument("stream", help="the stream's name or Redis key")
    raised.set_defaults(handler=run_raise)


def _state(client: RedisClient, keys: StreamKeys) -> ShardState:
    snapshot = lag_snapshot(client, keys)
    return ShardState(keys.stream, snapshot.reading.lag, snapshot.consumers_alive)


def run_raise(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    try:
        spec = resolve_stream(args.stream, settings)
    except UnknownStreamError as exc:
        raise CliError(str(exc)) from None
    client = open_client(settings)
    try:
        olds = [shard_keys(settings, spec, tag) for tag in recorded_shards(client, settings, spec)]
        states = [_state(client, keys) for keys in (keys_for(settings, spec), *olds)]
        done = raise_shards(client, settings, spec, states)
    except (ResizeRefused, ValueError) as exc:
        raise CliError(f"not switched: {exc}") from None
    except redis.RedisError as exc:
        raise CliError(f"switching the shards failed: {exc}") from None
    finally:
        with contextlib.suppress(Exception):
            client.close()
    print(
        f"{spec.stream_key(settings)}: {done.before} -> {done.after} shards; "
        f"{done.markers_moved} marker(s) copied to their key's new shard; start the workers"
    )
    return 0
