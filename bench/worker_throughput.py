"""Worker throughput: messages/s of our worker against the original's loop and the raw ceiling.

Contenders, each a separate process against the same stream on the same redis-server:

* ``baseline``: the original Sentinel-L7 loop (seed 000/004): XAUTOCLAIM idle 30 s COUNT 10,
  an XPENDING per claimed message, XREADGROUP COUNT 10 BLOCK 2000, one XACK per message,
  and an XPENDING summary written to the lag key after every cycle.
* ``ceiling``: a pipelined XREADGROUP COUNT 100 + XACK of the previous batch in one round
  trip, with no recovery, no leases, no lag, no results: what Redis and redis-py allow.
* ``ours``: ``python -m workers.watch_transactions --processor bench.processors:noop``
  (recovery, lease, lag key, atomic result + idempotency marker + batched XACK), with 1, 2
  and 4 processes.

How a run is timed, identically for every contender: the stream is filled first and the
group created at ``$`` so nothing is readable; the processes start and report ready (a
lease key, or a ready key for the two loops written here); then one pipeline moves the
group to ``0`` and adds the last message, and the clock runs until the group has every
entry delivered and acknowledged. Start-up and import time are never counted. The
ceiling drains ``CEILING_FACTOR`` times as many messages, or its run would be too short
to time reliably; every figure is still messages divided by seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import statistics
import time
from collections.abc import Callable, Iterator

import redis

from bench._common import (
    PYTHON,
    BenchTimeout,
    Child,
    Fleet,
    base_parser,
    bench_settings,
    child_env,
    emit_json,
    fill_stream,
    group_drained,
    machine_info,
    print_table,
    ratio,
    raw_client,
    redis_server,
    scratch_dir,
    wait_leases,
    wait_until,
)
from sentinel_platform.streams.keys import StreamKeys, transaction_keys

NAME = "worker_throughput"
PAYLOAD = (
    '{"id":"%s","merchant":"ACME Corp","category":"retail","currency":"EUR",'
    '"amount":123.45,"message":"bench","source":"bench","timestamp":"2026-01-01T00:00:00Z"}'
)
READY_PREFIX = "bench:ready:"
ORIGINAL_LAG_KEY = "sentinel:consumer_lag"
#: The ceiling drains this many times more messages, so its run lasts long enough to time.
CEILING_FACTOR = 4


# --- the two loops written here (run as child processes via --role) --------------------


def _noop(fields: dict[str, str]) -> None:
    """The baseline's 'processing': nothing, like our noop processor."""


def _ensure_group(client: redis.Redis, stream: str, group: str) -> None:
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def run_baseline(client: redis.Redis, stream: str, group: str, consumer: str) -> Iterator[int]:
    """The original's loop (seed 000 and 004), one iteration per yield."""
    while True:
        _, claimed, *_ = client.xautoclaim(stream, group, consumer, 30_000, "0-0", count=10)
        for message_id, fields in claimed:
            entry = client.xpending_range(stream, group, message_id, message_id, 1, idle=0)
            if entry and entry[0]["times_delivered"] >= 3:
                client.xack(stream, group, message_id)  # "dead-letter": a log line + ACK
                continue
            _noop(fields)
            client.xack(stream, group, message_id)
        reply = client.xreadgroup(group, consumer, {stream: ">"}, count=10, block=2000)
        done = 0
        for _, messages in reply or []:
            for message_id, fields in messages:
                _noop(fields)
                client.xack(stream, group, message_id)
                done += 1
        client.set(ORIGINAL_LAG_KEY, client.xpending(stream, group)["pending"], ex=10)
        yield done


def run_ceiling(client: redis.Redis, stream: str, group: str, consumer: str) -> Iterator[int]:
    """Read a batch and acknowledge the previous one in the same round trip."""
    previous: list[str] = []
    while True:
        pipe = client.pipeline(transaction=False)
        if previous:
            pipe.xack(stream, group, *previous)
        pipe.xreadgroup(group, consumer, {stream: ">"}, count=100, block=1000)
        reply = pipe.execute()[-1]
        previous = [message_id for _, messages in reply or [] for message_id, _ in messages]
        for _, messages in reply or []:
            for _, fields in messages:
                _noop(fields)
        yield len(previous)


LOOPS: dict[str, Callable[[redis.Redis, str, str, str], Iterator[int]]] = {
    "baseline": run_baseline,
    "ceiling": run_ceiling,
}


def role_main(args: argparse.Namespace) -> int:
    client = redis.Redis.from_url(args.url, decode_responses=True)
    _ensure_group(client, args.stream, args.group)
    client.set(READY_PREFIX + args.consumer, 1)
    deadline = time.monotonic() + args.max_seconds
    for _ in LOOPS[args.role](client, args.stream, args.group, args.consumer):
        if time.monotonic() > deadline:
            break
    return 0


# --- the measurement ---------------------------------------------------------------------


def _messages(count: int, start: int = 0) -> Iterator[dict[str, str]]:
    for index in range(start, start + count):
        key = f"m{index}"
        yield {"k": key, "data": PAYLOAD % key}


def _prepare(client: redis.Redis, keys: StreamKeys, total: int) -> None:
    """All but the last message in the stream, the group parked at its end."""
    client.flushdb()
    fill_stream(client, keys.stream, _messages(total - 1))
    client.xgroup_create(keys.stream, keys.group, id="$")


def _release_and_time(client: redis.Redis, keys: StreamKeys, total: int, timeout_s: float) -> float:
    """Make everything readable at once; seconds until all of it is acknowledged."""
    pipe = client.pipeline(transaction=True)
    pipe.xgroup_setid(keys.stream, keys.group, "0", entries_read=0)
    pipe.xadd(keys.stream, next(_messages(1, total - 1)))
    started = time.monotonic()
    pipe.execute()
    wait_until(
        lambda: group_drained(client, keys.stream, keys.group),
        timeout_s,
        interval_s=0.005,
        what="group drained",
    )
    return time.monotonic() - started


def _start_loop(fleet: Fleet, role: str, url: str, keys: StreamKeys, env: dict) -> Child:
    consumer = f"{role}-1"
    argv = [PYTHON, __file__, "--role", role, "--url", url, "--stream", keys.stream]
    argv += ["--group", keys.group, "--consumer", consumer]
    return fleet.spawn(consumer, argv, env)


def _wait_loop_ready(client: redis.Redis, child: Child) -> None:
    def ready() -> bool:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited:\n{child.log_tail()}")
        return bool(client.exists(READY_PREFIX + child.name))

    wait_until(ready, 60, interval_s=0.05, what=f"{child.name} ready")


def measure(
    contender: str,
    processes: int,
    total: int,
    url: str,
    home: Path,
    log_dir: Path,
) -> float:
    """One timed run: messages per second."""
    client = raw_client(url)
    keys = transaction_keys(bench_settings(url, home))
    _prepare(client, keys, total)
    env = child_env(url, home, lag_key_ttl_s=10)
    with Fleet(log_dir) as fleet:
        if contender == "ours":
            workers = [
                fleet.worker("transactions", f"ours-{processes}-{i}", env, "bench.processors:noop")
                for i in range(processes)
            ]
            wait_leases(client, keys, workers)
        else:
            _wait_loop_ready(client, _start_loop(fleet, contender, url, keys, env))
        seconds = _release_and_time(client, keys, total, timeout_s=max(60, total / 500))
        for child in fleet.children:
            child.stop()
    return total / seconds


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=None, help="messages per run")
    parser.add_argument("--repeats", type=int, default=None, help="runs per contender")
    parser.add_argument(
        "--only", default="", help="comma-separated subset: baseline,ceiling,ours1,ours2,ours4"
    )
    parser.add_argument("--role", choices=sorted(LOOPS), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--stream", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--consumer", help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=float, default=600, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        return role_main(args)

    total = args.messages or (30_000 if args.quick else 200_000)
    repeats = args.repeats or (2 if args.quick else 5)
    contenders = [("baseline", 1), ("ceiling", 1), ("ours", 1), ("ours", 2), ("ours", 4)]
    if args.only:
        wanted = set(args.only.split(","))
        contenders = [c for c in contenders if f"{c[0]}{c[1] if c[0] == 'ours' else ''}" in wanted]
    rates: dict[str, list[float]] = {}
    with redis_server() as server, scratch_dir("bench-throughput-") as tmp:
        info = machine_info(raw_client(server.url))
        try:
            for repeat in range(repeats):  # interleaved, so drift hits every contender alike
                for contender, processes in contenders:
                    label = contender if contender != "ours" else f"ours x{processes}"
                    size = total * CEILING_FACTOR if contender == "ceiling" else total
                    rate = measure(contender, processes, size, server.url, tmp, tmp)
                    rates.setdefault(label, []).append(rate)
                    print(f"  run {repeat + 1}/{repeats} {label:<10} {rate:>10,.0f} msg/s")
        except BenchTimeout as exc:
            emit_json(NAME, {"error": str(exc), "machine": info})
            return 1

    median = {label: statistics.median(values) for label, values in rates.items()}
    ours = median.get("ours x1")
    rows = [
        (
            label,
            value,
            ratio(value, median.get("baseline")),
            ratio(value, median.get("ceiling")),
            ratio(value, ours),
        )
        for label, value in median.items()
    ]
    print_table(
        f"{total:,} messages per run ({total * CEILING_FACTOR:,} for the ceiling), "
        f"median of {repeats} run(s), no-op processing",
        ["contender", "msg/s", "x baseline", "x ceiling", "x ours x1"],
        rows,
    )
    emit_json(
        NAME,
        {
            "messages": total,
            "repeats": repeats,
            "msgs_per_s": {label: round(value) for label, value in median.items()},
            "ours_vs_baseline": ratio(ours, median.get("baseline")),
            "ours_vs_ceiling": ratio(ours, median.get("ceiling")),
            "scaling": {
                str(n): ratio(median[f"ours x{n}"], ours)
                for n in (1, 2, 4)
                if f"ours x{n}" in median
            },
            "machine": info,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
