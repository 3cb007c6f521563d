"""Cost of one lag measurement at a large backlog, against the bounded client-side count.

One throw-away server, one stream with ``--backlog`` undelivered entries behind a group
that read 100 of them. Three ways to measure the lag are timed side by side in the same
run (median of ``--repeat`` calls each):

* ``bookkeeping``: :func:`measure_lag` when the server reports ``lag`` (the normal case);
* ``counted``: :func:`measure_lag` after an ``XDEL`` in the backlog made ``lag`` nil, so
  the backlog is counted inside the server;
* ``worst``: the same with the group in the middle of the stream (half of it counted);
* ``baseline``: the former approach for that case, an ``XRANGE`` after the group's
  last-delivered id capped at 10,000 entries, read into the client (and wrong above it).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from bench._common import (
    base_parser,
    emit_json,
    fill_stream,
    machine_info,
    print_table,
    raw_client,
    redis_server,
)
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.keys import transaction_keys
from sentinel_platform.streams.lag import measure_lag

NAME = "lag_cost"
BASELINE_CAP = 10_000


def _median_ms(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 3)


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=15_000)
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args()
    repeat = args.repeat or (50 if args.quick else 300)
    with redis_server() as server:
        client = raw_client(server.url)
        keys = transaction_keys(load_settings(redis_url=server.url))
        client.xgroup_create(keys.stream, keys.group, "0", mkstream=True)
        ids = fill_stream(client, keys.stream, ({"k": str(n)} for n in range(args.backlog)))
        client.xreadgroup(keys.group, "reader", {keys.stream: ">"}, count=100)
        last = ids[99]
        bookkeeping = _median_ms(lambda: measure_lag(client, keys), repeat)
        exact = measure_lag(client, keys).lag
        client.xdel(keys.stream, ids[len(ids) // 2])
        counted = _median_ms(lambda: measure_lag(client, keys), repeat)
        counted_lag = measure_lag(client, keys).lag
        # Worst case: the group sits mid-stream, so either side holds half the entries.
        middle = replace(keys, group="middle")
        client.xgroup_create(keys.stream, middle.group, ids[len(ids) // 2 - 1])
        worst = _median_ms(lambda: measure_lag(client, middle), repeat)
        worst_lag = measure_lag(client, middle).lag

        def baseline() -> int:
            return len(client.xrange(keys.stream, min=f"({last}", max="+", count=BASELINE_CAP))

        baseline_ms = _median_ms(baseline, repeat)
        baseline_lag = baseline() + 100
        info = machine_info(client)
    rows = [
        ("bookkeeping (lag reported)", bookkeeping, exact),
        ("counted in server (lag nil)", counted, counted_lag),
        ("counted, group mid-stream (worst)", worst, worst_lag),
        ("baseline: capped XRANGE", baseline_ms, baseline_lag),
    ]
    print_table(
        f"lag measurement at a backlog of {args.backlog} (median of {repeat})",
        ["method", "ms", "lag reported", "vs baseline"],
        [(name, ms, lag, round(ms / baseline_ms, 3)) for name, ms, lag in rows],
    )
    emit_json(
        NAME,
        {
            "backlog": args.backlog,
            "bookkeeping_ms": bookkeeping,
            "counted_ms": counted,
            "counted_worst_ms": worst,
            "baseline_ms": baseline_ms,
            "lag_exact": exact,
            "lag_counted": counted_lag,
            "lag_baseline": baseline_lag,
            "machine": info,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
