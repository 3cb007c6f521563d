"""Cost of one lag measurement at a large backlog, against the bounded client-side count.

One throw-away server, one stream of ``--backlog`` entries, measured side by side in the
same run (median of ``--repeat`` calls each, client wall time, and the server time of
the scripts per call from ``INFO commandstats``):

* ``bookkeeping``: :func:`measure_lag` when the server reports ``lag`` (the normal case);
* ``before``: the nil-``lag`` path as it was, an exact count inside the server on every
  measurement: :func:`measure_lag` with the remembered count deleted before each call.
  The group was created behind the head, so its read counter is unknown (as after
  reading past a tombstone) and the whole backlog is counted;
* ``now``: :func:`measure_lag` with the count remembered, the group reading
  ``--read-per-write`` entries between two measurements (a worker between lag writes);
* ``worst``: a group mid-stream, counted exactly every time: either side of it is half
  the stream;
* ``baseline``: the approach before the in-server count, an ``XRANGE`` after the group's
  last-delivered id capped at 10,000 entries, read into the client (and wrong above it).

The line ``per-write cost, before / now`` is the ratio of the ``before`` and ``now`` rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import redis

from bench._common import (
    base_parser,
    emit_json,
    machine_info,
    print_table,
    ratio,
    raw_client,
    redis_server,
)
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.backlog.lag import baseline_key, measure_lag
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.streams import fill_stream

NAME = "lag_cost"
BASELINE_CAP = 10_000


def _script_usec(client: redis.Redis) -> int:
    """Server time spent in scripts so far (``EVALSHA``), in microseconds."""
    stats: dict[str, Any] = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("usec", 0))


@dataclass
class Timing:
    """Median client wall time and mean server script time of one way to measure."""

    ms: float
    server_ms: float
    lag: int


def _time(
    client: redis.Redis,
    measure: Callable[[], int],
    repeat: int,
    between: Callable[[], object] = lambda: None,
) -> Timing:
    """``measure`` ``repeat`` times, ``between`` (untimed) before each call."""
    times, server_usec, lag = [], 0, 0
    for _ in range(repeat):
        between()
        before = _script_usec(client)
        started = time.perf_counter()
        lag = measure()
        times.append((time.perf_counter() - started) * 1000)
        server_usec += _script_usec(client) - before
    return Timing(round(statistics.median(times), 3), round(server_usec / repeat / 1000, 3), lag)


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=None, help="15,000 quick, 100,000 full")
    parser.add_argument("--repeat", type=int, default=None, help="50 quick, 300 full")
    parser.add_argument("--read-per-write", type=int, default=100)
    args = parser.parse_args()
    repeat = args.repeat or (50 if args.quick else 300)
    size = args.backlog or (15_000 if args.quick else 100_000)
    size = max(size, 2 * repeat * args.read_per_write + 200)  # never read the group dry
    with redis_server() as server:
        client = raw_client(server.url)
        keys = transaction_keys(load_settings(redis_url=server.url))
        client.xgroup_create(keys.stream, keys.group, "0", mkstream=True)
        ids = fill_stream(client, keys.stream, ({"key": str(n)} for n in range(size)))
        client.xreadgroup(keys.group, "reader", {keys.stream: ">"}, count=100)

        def lag_of(of: StreamKeys) -> Callable[[], int]:
            return lambda: measure_lag(client, of).lag

        bookkeeping = _time(client, lag_of(keys), repeat)
        # A group behind the head with an unknown read counter, an entry deleted ahead.
        behind = replace(keys, group="behind")
        client.xgroup_create(keys.stream, behind.group, ids[99])
        client.xdel(keys.stream, ids[-100])

        def read() -> None:
            client.xreadgroup(behind.group, "r", {behind.stream: ">"}, count=args.read_per_write)

        def read_and_forget() -> None:  # the former path: nothing remembered, count it all
            read()
            client.delete(baseline_key(behind))

        before = _time(client, lag_of(behind), repeat, read_and_forget)
        now = _time(client, lag_of(behind), repeat, read)
        client.delete(baseline_key(behind))
        exact_now = measure_lag(client, behind).lag
        # Worst case of one count: the group mid-stream, either side half the stream.
        middle = replace(keys, group="middle")
        client.xgroup_create(keys.stream, middle.group, ids[len(ids) // 2 - 1])
        worst = _time(client, lag_of(middle), repeat, lambda: client.delete(baseline_key(middle)))
        last = ids[99]

        def baseline() -> int:
            entries = client.xrange(keys.stream, min=f"({last}", max="+", count=BASELINE_CAP)
            return len(entries or [])

        capped = _time(client, lambda: baseline() + 100, repeat)
        info = machine_info(client)
    rows = [
        ("bookkeeping (lag reported)", bookkeeping),
        ("before: counted every write (lag nil)", before),
        ("now: remembered count, derived (lag nil)", now),
        ("counted, group mid-stream (worst count)", worst),
        ("baseline: capped XRANGE", capped),
    ]
    print_table(
        f"lag measurement, stream of {size:,} entries (median of {repeat})",
        ["method", "ms", "server ms", "lag reported", "vs baseline"],
        [
            (name, t.ms, t.server_ms if t is not capped else None, t.lag, ratio(t.ms, capped.ms))
            for name, t in rows
        ],
    )
    per_write = ratio(before.ms, now.ms, 1)
    per_write_server = ratio(before.server_ms, now.server_ms, 1)
    print(
        f"\nper-write cost, before / now: {per_write}x client time, {per_write_server}x server"
        f" script time; exact lag at the end {exact_now:,}, derived {now.lag:,}",
        flush=True,
    )
    emit_json(
        NAME,
        {
            "stream_length": size,
            "repeat": repeat,
            "read_per_write": args.read_per_write,
            "bookkeeping_ms": bookkeeping.ms,
            "before_ms": before.ms,
            "before_server_ms": before.server_ms,
            "now_ms": now.ms,
            "now_server_ms": now.server_ms,
            "per_write_ratio": per_write,
            "per_write_server_ratio": per_write_server,
            "counted_worst_ms": worst.ms,
            "baseline_ms": capped.ms,
            "lag_exact": exact_now,
            "lag_derived": now.lag,
            "lag_baseline": capped.lag,
            "machine": info,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
