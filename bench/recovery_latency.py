"""Recovery latency: how long a SIGKILLed worker's messages wait for a survivor.

Each trial, against one redis-server: a victim worker (every message takes "forever":
``--simulate-latency-ms 600000``) reads M messages into its pending list; a survivor
worker starts and proves it is live (lease key); the victim is SIGKILLed; the clock runs
from the kill (server time, ``TIME``) to the server-assigned id of the last result entry
the survivor writes for those M messages. Trials run at the default lease
(``SENTINEL_LEASE_TTL_MS``) and at a short one; the target is lease TTL + 2 s.

The "slow but alive" trial gives the victim a service time of 3 x
``SENTINEL_RECLAIM_IDLE_MS`` instead and never kills it: the original stole such
messages (seed 002). ``bench.processors:counting`` counts every processing in Redis, so
a stolen message shows up as a processing count above 1. The figure must be 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from typing import Any

import redis

from bench._common import (
    BenchTimeout,
    Fleet,
    base_parser,
    bench_settings,
    child_env,
    distribution,
    emit_json,
    fill_stream,
    machine_info,
    print_table,
    raw_client,
    redis_server,
    scratch_dir,
    wait_leases,
    wait_until,
)
from bench.processors import CALLS_KEY
from sentinel_platform.settings import Settings
from sentinel_platform.streams.keys import StreamKeys, transaction_keys

NAME = "recovery_latency"
PROCESSOR = "bench.processors:counting"
FOREVER_MS = 600_000


def server_ms(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return seconds * 1000 + micros / 1000


def id_ms(stream_id: str) -> int:
    return int(stream_id.split("-", 1)[0])


def _hold_messages(
    fleet: Fleet,
    client: redis.Redis,
    keys: StreamKeys,
    env: dict[str, str],
    victim_ms: int,
    held: int,
    trial: str,
) -> Any:
    """Start the victim alone and let it take ``held`` messages into its pending list."""
    victim = fleet.worker(
        "transactions", f"victim-{trial}", env, PROCESSOR, count=held, simulate_latency_ms=victim_ms
    )
    wait_leases(client, keys, [victim])
    fill_stream(client, keys.stream, ({"k": f"{trial}-{i}"} for i in range(held)), atomic=True)

    def holding() -> bool:
        consumers = client.xinfo_consumers(keys.stream, keys.group)
        mine = next((c for c in consumers if c["name"] == victim.name), None)
        return bool(mine and mine["pending"] == held)

    wait_until(holding, 30, what="victim holds its messages")
    return victim


def kill_trial(url: str, home: Path, settings: Settings, held: int, trial: str) -> float:
    """Seconds from SIGKILL of the victim until a survivor has processed all it held."""
    client = raw_client(url)
    client.flushdb()
    keys = transaction_keys(settings)
    env = child_env(url, home, lease_ttl_ms=settings.lease_ttl_ms)
    with Fleet(home) as fleet:
        victim = _hold_messages(fleet, client, keys, env, FOREVER_MS, held, trial)
        survivor = fleet.worker("transactions", f"survivor-{trial}", env, PROCESSOR)
        wait_leases(client, keys, [survivor])
        killed_at = server_ms(client)
        victim.kill()
        timeout = settings.lease_ttl_ms / 1000 + 30
        wait_until(lambda: client.xlen(keys.results) >= held, timeout, 0.01, "recovered")
        last = client.xrevrange(keys.results, count=1)[0][0]
        survivor.stop()
    return (id_ms(last) - killed_at) / 1000


def slow_alive_trial(url: str, home: Path, held: int) -> dict[str, int]:
    """A live worker 3x slower than the reclaim idle time: nothing may be processed twice."""
    idle_ms = 500
    settings = bench_settings(url, home, reclaim_idle_ms=idle_ms)
    client = raw_client(url)
    client.flushdb()
    keys = transaction_keys(settings)
    env = child_env(url, home, reclaim_idle_ms=idle_ms)
    with Fleet(home) as fleet:
        slow = _hold_messages(fleet, client, keys, env, 3 * idle_ms, held, "slow")
        survivor = fleet.worker("transactions", "survivor-slow", env, PROCESSOR)
        wait_leases(client, keys, [survivor])
        wait_until(
            lambda: client.xlen(keys.results) >= held,
            held * 3 * idle_ms / 1000 + 30,
            0.05,
            "slow worker finished",
        )
        calls = {k: int(v) for k, v in client.hgetall(CALLS_KEY).items()}
        results = client.xrange(keys.results)
        survivor.stop()
        slow.stop()
    return {
        "messages": held,
        "processings": sum(calls.values()),
        "duplicate_processings": sum(max(0, n - 1) for n in calls.values()),
        "duplicate_effects": len(results) - len({fields["k"] for _, fields in results}),
    }


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=None, help="kill trials per lease")
    parser.add_argument("--held", type=int, default=20, help="messages the victim holds")
    parser.add_argument("--short-lease-ms", type=int, default=1000)
    args = parser.parse_args()
    trials = args.trials or (4 if args.quick else 20)

    with redis_server() as server, scratch_dir("bench-recovery-") as tmp:
        info = machine_info(raw_client(server.url))
        default = bench_settings(server.url, tmp)
        leases = {
            "default": default,
            "short": bench_settings(server.url, tmp, lease_ttl_ms=args.short_lease_ms),
        }
        latencies: dict[str, list[float]] = {name: [] for name in leases}
        try:
            for trial in range(trials):  # interleaved, so drift hits both alike
                for name, settings in leases.items():
                    seconds = kill_trial(server.url, tmp, settings, args.held, f"{name}{trial}")
                    latencies[name].append(seconds)
                    print(f"  trial {trial + 1}/{trials} lease {name:<7} {seconds:6.2f} s")
            slow = slow_alive_trial(server.url, tmp, held=4)
        except BenchTimeout as exc:
            emit_json(NAME, {"error": str(exc), "machine": info})
            return 1

    figures: dict[str, Any] = {}
    rows = []
    for name, settings in leases.items():
        target = settings.lease_ttl_ms / 1000 + 2
        dist = distribution(latencies[name], digits=2)
        within = sum(1 for s in latencies[name] if s <= target) / len(latencies[name])
        figures[name] = {"lease_ttl_ms": settings.lease_ttl_ms, **dist, "within_target": within}
        rows.append((name, settings.lease_ttl_ms, dist["p50"], dist["p95"], dist["max"], target))
    print_table(
        f"{trials} SIGKILL trials per lease, {args.held} messages held by the victim",
        ["lease", "ttl ms", "p50 s", "p95 s", "max s", "target s"],
        rows,
    )
    print_table(
        "slow but alive: service time 3 x reclaim idle (500 ms), a live survivor beside it",
        ["messages", "processings", "duplicate processings", "duplicate effects"],
        [tuple(slow.values())],
    )
    emit_json(
        NAME, {"trials": trials, "held": args.held, **figures, "slow_alive": slow, "machine": info}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
