"""Worker throughput: messages/s of our worker against the original's loop and its ceiling.

Contenders, each a separate process against the same stream on the same redis-server:

* ``baseline``: the original Sentinel-L7 loop ("Self-Healing Worker Pools", "Graduated
  Backpressure"): XAUTOCLAIM idle 30 s COUNT 10,
  an XPENDING per claimed message, XREADGROUP COUNT 10 BLOCK 2000, one XACK per message,
  and an XPENDING summary written to the lag key after every cycle.
* ``same-work``: one round trip per batch, XREADGROUP COUNT n plus, per message of the
  previous batch, the writes our worker makes for it (marker ``SET NX EX``, result ``XADD
  MAXLEN ~``, XACK), packed by hiredis into one socket write, with no bookkeeping at all:
  no recovery probe, no lease, no lag key, no metrics, no script. The ceiling of *our*
  work.
* ``ours``: the worker with the harness's no-op processor (recovery, lease, lag key, atomic
  result + idempotency marker + batched XACK), 1 and 2 processes (and 4 in a full run).
* ``ours@REV`` (``--against REV``): the worker of another commit (:func:`~bench.timing.checkout`),
  one process, interleaved with the others: a before/after of a change in one run.

Every contender is timed alike (:func:`~bench.timing.park`, then
:func:`~bench.timing.release`): the clock runs from the release until the group has every
entry acknowledged, so start-up is never counted. Each drains a number of messages scaled
to its speed (``SIZE_FACTOR``), so every run lasts long enough to time. The user + system
CPU of the contender's processes and of the embedded server around the timed window gives
CPU per message, what a busy machine cannot hide. The batch size n (``--count``, default
``SENTINEL_READ_COUNT``) is the same for ours and the ceiling.

Goals (issue 16), printed with PASS/MISS: ours x1 >= 0.7x the same-work ceiling and
>= 10x the original's loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import redis

from bench.timing import (
    Goal,
    base_parser,
    bench_settings,
    checkout,
    emit_json,
    machine_info,
    park,
    print_goals,
    print_table,
    ratio,
    raw_client,
    redis_server,
    release,
    scratch_dir,
    tree_env,
)
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.proc_stats import cpu_seconds
from sentinel_platform_tests.harness.processes import (
    NOOP_PROCESSOR,
    PYTHON,
    Fleet,
    child_env,
    wait_leases,
)
from sentinel_platform_tests.harness.streams import group_drained
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until

NAME = "worker_throughput"
PAYLOAD = (
    '{"id":"%s","merchant":"ACME Corp","category":"retail","currency":"EUR",'
    '"amount":123.45,"message":"bench","source":"bench","timestamp":"2026-01-01T00:00:00Z"}'
)
READY_PREFIX = "bench:ready:"
ORIGINAL_LAG_KEY = "sentinel:consumer_lag"
#: Messages drained by each contender, as a multiple of ``--messages`` (about its speed).
SIZE_FACTOR = {"baseline": 0.25, "same-work": 2.0, "ours": 1.0}
GOAL_VS_SAME_WORK, GOAL_VS_BASELINE = 0.7, 10.0


# --- the two loops written here (run as child processes via --role) --------------------


def _noop(fields: dict[str, str]) -> None:
    """The baseline's 'processing': nothing, like our noop processor."""


def run_baseline(client: redis.Redis, keys: StreamKeys, consumer: str) -> Iterator[int]:
    """The original's loop (its two write-ups' worker and lag key), one iteration per yield."""
    stream, group = keys.stream, keys.group
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


def run_same_work(client: redis.Redis, keys: StreamKeys, consumer: str) -> Iterator[int]:
    """Our per-message writes (marker, result, ack) with the next read, one round trip a batch.

    Batch n's writes travel with the read of batch n+1: every command packed into one
    buffer by hiredis and written to the socket at once, the replies read back raw, so
    the client spends on each message no more than the server needs. Nothing else is
    sent: no recovery probe, no lease, no lag key, no script.
    """
    settings = load_settings()
    ttl, maxlen = str(settings.idempotency_ttl_s), str(settings.results_maxlen)
    read = ("XREADGROUP", "GROUP", keys.group, consumer, "COUNT", settings.read_count)
    read += ("BLOCK", 1000, "STREAMS", keys.stream, ">")
    connection = client.connection_pool.get_connection()
    previous: list[tuple[str, str]] = []  # (message id, natural key)
    while True:
        commands: list[tuple[object, ...]] = []
        for message_id, key in previous:
            commands.append(("SET", keys.marker(key), message_id, "NX", "EX", ttl))
            fields = ("key", key, "source_message_id", message_id)
            commands.append(("XADD", keys.results, "MAXLEN", "~", maxlen, "*", *fields))
        if previous:
            commands.append(("XACK", keys.stream, keys.group, *(i for i, _ in previous)))
        commands.append(read)
        connection.send_packed_command(connection.pack_commands(commands))
        replies = [connection.read_response() for _ in commands]
        previous = []
        streams = replies[-1] or []
        for entries in streams.values() if isinstance(streams, dict) else (e for _, e in streams):
            for message_id, flat in entries:
                _noop(flat)
                previous.append((message_id, flat[flat.index("key") + 1]))
        yield len(previous)


LOOPS: dict[str, Callable[[redis.Redis, StreamKeys, str], Iterator[int]]] = {
    "baseline": run_baseline,
    "same-work": run_same_work,
}


def role_main(role: str) -> int:
    """One loop as a child process, on the server, keys and batch size of its environment;
    it reports ready (a key) and runs until stopped (or for at most 10 minutes)."""
    settings = load_settings()
    client = redis.Redis.from_url(settings.redis_url_value, decode_responses=True)
    client.set(READY_PREFIX + role, 1)
    deadline = time.monotonic() + 600
    for _ in LOOPS[role](client, transaction_keys(settings), role):
        if time.monotonic() > deadline:
            break
    return 0


# --- the measurement ---------------------------------------------------------------------


def messages(count: int) -> list[dict[str, str]]:
    """The bench's messages (the natural key ``key``, a transaction-sized payload)."""
    return [{"key": f"m{index}", "data": PAYLOAD % f"m{index}"} for index in range(count)]


def _start_loop(fleet: Fleet, client: redis.Redis, role: str, env: dict[str, str]) -> None:
    """One of :data:`LOOPS` as a child process (consumer name: the role), once ready."""
    child = fleet.spawn(role, [PYTHON, "-m", "bench.worker_throughput", "--role", role], env)

    def ready() -> bool:
        if not child.alive():
            raise RuntimeError(f"{role} exited:\n{child.tail()}")
        return bool(client.exists(READY_PREFIX + role))

    wait_until(ready, 60, interval_s=0.05, what=f"{role} ready")


@dataclass(frozen=True)
class Run:
    """One timed run: wall-clock rate, and CPU per message of the contender and the server."""

    rate: float
    client_cpu_us: float | None
    server_cpu_us: float | None


def _cpu_of(pids: list[int | None]) -> float | None:
    values = [cpu_seconds(pid) for pid in pids]
    return None if None in values else sum(v for v in values if v is not None)


def _per_message_us(before: float | None, after: float | None, total: int) -> float | None:
    return None if before is None or after is None else round((after - before) / total * 1e6, 1)


def measure(
    contender: str,
    processes: int,
    total: int,
    url: str,
    home: Path,
    count: int | None = None,
    server_pid: int | None = None,
) -> Run:
    """One timed run: messages per second and CPU microseconds per message."""
    client = raw_client(url)
    keys = transaction_keys(bench_settings(url, home))
    batch = messages(total)
    park(client, keys, batch)
    env = child_env(url, home, lag_key_ttl_s=10, **({"read_count": count} if count else {}))
    if contender.startswith("ours@"):  # another commit's worker: its tree first on the path
        env.update(tree_env(home / contender))
    with Fleet(home) as fleet:
        if contender.startswith("ours"):
            workers = [
                fleet.worker("transactions", f"ours-{processes}-{i}", env, NOOP_PROCESSOR)
                for i in range(processes)
            ]
            wait_leases(client, keys, workers)
        else:
            _start_loop(fleet, client, contender, env)
        pids: list[int | None] = [child.pid for child in fleet.children]
        client_before, server_before = _cpu_of(pids), cpu_seconds(server_pid)
        started = time.monotonic()  # until all of it is acknowledged
        release(client, keys, batch[-1])
        drained = lambda: group_drained(client, keys.stream, keys.group)  # noqa: E731
        wait_until(drained, max(60, total / 500), 0.005, "group drained")
        seconds = time.monotonic() - started
        client_after, server_after = _cpu_of(pids), cpu_seconds(server_pid)
        for child in fleet.children:
            child.stop()
    return Run(
        total / seconds,
        _per_message_us(client_before, client_after, total),
        _per_message_us(server_before, server_after, total),
    )


def _median_cpu(runs: list[Run]) -> float | None:
    """Median CPU per message, contender + server (None when either is unknown)."""
    totals = [
        r.client_cpu_us + r.server_cpu_us
        for r in runs
        if r.client_cpu_us is not None and r.server_cpu_us is not None
    ]
    return statistics.median(totals) if totals else None


def _label(contender: str, processes: int) -> str:
    return f"ours x{processes}" if contender == "ours" else contender


def _report(
    total: int,
    repeats: int,
    count: int,
    median: dict[str, float],
    cpu: dict[str, float | None],
    info: dict,
) -> None:
    ours, same_work, baseline = (median.get(k) for k in ("ours x1", "same-work", "baseline"))
    anchors = [baseline, same_work]
    print_table(
        f"{total:,} messages per run for ours (scaled by speed for the others: "
        f"{SIZE_FACTOR}), batches of {count}, median of {repeats} run(s), no-op processing",
        ["contender", "msg/s", "x baseline", "x same-work", "cpu us/msg"],
        [[k, v, *(ratio(v, a) for a in anchors), cpu.get(k)] for k, v in median.items()],
    )
    vs_same_work, vs_baseline = ratio(ours, same_work), ratio(ours, baseline)
    goals = print_goals(
        [
            Goal(
                f"ours x1 >= {GOAL_VS_SAME_WORK}x same-work ceiling",
                vs_same_work,
                GOAL_VS_SAME_WORK,
            ),
            Goal(
                f"ours x1 >= {GOAL_VS_BASELINE:g}x the original's loop",
                vs_baseline,
                GOAL_VS_BASELINE,
            ),
        ]
    )
    processes = [n for n in (1, 2, 4) if f"ours x{n}" in median]
    scaling = {str(n): ratio(median[f"ours x{n}"], same_work) for n in processes}
    for n, value in scaling.items():
        print(f"  scale ours x{n} = {value}x same-work ceiling (1 process)")
    # CPU per message (worker + server) is what a busy machine cannot hide: the same-work
    # ceiling's CPU over ours is the throughput ratio a saturated host would show.
    cpu_ratio = ratio(cpu.get("same-work"), cpu.get("ours x1"))
    print(f"  cpu: same-work / ours x1 per message = {cpu_ratio} (1.0 = no overhead)")
    for other in [label for label in median if label.startswith("ours@")]:  # --against
        rate = ratio(median.get("ours x1"), median[other])
        cpu_us = ratio(cpu.get(other), cpu.get("ours x1"))
        print(f"  ours x1 / {other}: msg/s {rate}, cpu per message {other} / ours {cpu_us}")
    emit_json(
        NAME,
        {
            "messages": total,
            "repeats": repeats,
            "count": count,
            "msgs_per_s": {label: round(value) for label, value in median.items()},
            "ours_vs_baseline": vs_baseline,
            "ours_vs_same_work": vs_same_work,
            "goals": goals,
            "scaling_vs_same_work": scaling,
            "cpu_us_per_msg": {k: None if v is None else round(v, 1) for k, v in cpu.items()},
            "cpu_same_work_over_ours": cpu_ratio,
            "scaling_vs_ours_x1": {str(n): ratio(median[f"ours x{n}"], ours) for n in processes},
            "machine": info,
        },
    )


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__)
    parser.add_argument("--messages", type=int, default=None, help="messages per run of ours")
    parser.add_argument("--repeats", type=int, default=None, help="runs per contender")
    parser.add_argument("--only", default="", help="a subset: baseline,same-work,ours1,ours2,ours4")
    parser.add_argument("--count", type=int, help="batch size of ours and same-work")
    parser.add_argument("--against", help="also run the worker of this commit, interleaved")
    parser.add_argument("--role", choices=sorted(LOOPS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        return role_main(args.role)

    total = args.messages or (15_000 if args.quick else 200_000)
    repeats = args.repeats or (2 if args.quick else 5)
    contenders = [("baseline", 1), ("same-work", 1), ("ours", 1), ("ours", 2)]
    if not args.quick:
        contenders.append(("ours", 4))
    if args.only:
        wanted = set(args.only.split(","))
        contenders = [c for c in contenders if _label(*c).replace(" x", "") in wanted]
    runs: dict[str, list[Run]] = {}
    with (
        redis_server() as server,
        scratch_dir("bench-throughput-") as tmp,
        checkout(tmp, args.against) as other,
    ):
        if other is not None:
            contenders.insert(contenders.index(("ours", 1)) + 1, (other, 1))
        info = machine_info(raw_client(server.url))
        process = getattr(server, "process", None)  # None: REDIS_URL, not ours to measure
        server_pid = process.pid if process is not None else None
        try:
            for repeat in range(repeats):  # interleaved, so drift hits every contender alike
                for contender, processes in contenders:
                    label = _label(contender, processes)
                    size = int(total * SIZE_FACTOR[contender.split("@")[0]])
                    run = measure(
                        contender, processes, size, server.url, tmp, args.count, server_pid
                    )
                    runs.setdefault(label, []).append(run)
                    print(
                        f"  run {repeat + 1}/{repeats} {label:<10} {run.rate:>10,.0f} msg/s"
                        f"  cpu/msg: {run.client_cpu_us} us client, {run.server_cpu_us} us server"
                    )
        except WaitTimeout as exc:
            emit_json(NAME, {"error": str(exc), "machine": info})
            return 1
    median = {label: statistics.median(r.rate for r in values) for label, values in runs.items()}
    cpu = {label: _median_cpu(values) for label, values in runs.items()}
    _report(total, repeats, args.count or load_settings().read_count, median, cpu, info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
