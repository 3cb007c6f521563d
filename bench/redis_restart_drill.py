"""Redis restart drill: SIGKILL the server mid-run, restart it on the same port and data.

A redis-server with AOF ``appendfsync always`` (an acknowledged write is on disk), two
workers (the harness's ``counting`` processor) and a producer publishing through the platform's
publish path (:class:`bench._faults.LedgerProducer`, which records a message only once
Redis has answered its batch). While both run, the server is SIGKILLed (no shutdown, no
final fsync) and a new one started on the same port and data directory, ``--restarts``
times. Workers and producer must reconnect with backoff on their own. At the end:

* every message Redis acknowledged to the producer has exactly one effect (none lost,
  none applied twice, even though a batch resent after an outage may sit twice in the
  stream),
* the pending list drains, and the workers are the same processes (none crashed).

The drill test (``sentinel_platform_tests/streams/consumer/test_redis_restart.py``) runs
:func:`run_drill` with one restart; this script is the long version.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import time
from typing import Any

from bench._common import (
    base_parser,
    bench_settings,
    emit_json,
    external_url,
    machine_info,
    print_table,
    raw_client,
    scratch_dir,
)
from bench._faults import LedgerProducer, audit, bench_message
from sentinel_platform.redis_server import RedisServer, find_redis_server
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.processes import TEST_PROCESSOR, Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import group_drained
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until

NAME = "redis_restart_drill"
PROCESSOR = TEST_PROCESSOR
AOF_ALWAYS = {"appendfsync": "always"}
DRILL_SETTINGS = {"lease_ttl_ms": 1000, "retry_backoff_ms": 100}


def run_drill(
    tmp: Path,
    messages: int = 3000,
    restarts: int = 1,
    workers: int = 2,
    down_s: float = 2.0,
    binary: str | None = None,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """Run the drill; return the audit (``lost``/``duplicated``/``pending`` must be 0)."""
    binary = binary or find_redis_server(load_settings())
    data_dir = tmp / "redis"
    server = RedisServer(binary, data_dir, config=AOF_ALWAYS).start()
    home = tmp / "home"
    settings = bench_settings(server.url, home, **DRILL_SETTINGS)
    keys = transaction_keys(settings)
    env = child_env(server.url, home, **DRILL_SETTINGS)
    batch = 50
    producer = LedgerProducer(
        settings,
        keys,
        [bench_message(i) for i in range(messages)],
        batch=batch,
        pause_s=0.01,
        deadline_s=timeout_s,
    )
    started = time.monotonic()
    try:
        with Fleet(tmp) as fleet:
            pool = [
                fleet.worker("transactions", f"drill-{n}", env, PROCESSOR) for n in range(workers)
            ]
            wait_leases(raw_client(server.url), keys, pool)
            producer.start()
            acked_at_kills: list[int] = []
            for restart in range(restarts):
                # Spread the kills over the publish: after 1/(restarts+1), 2/(restarts+1), ...
                mark = messages * (restart + 1) // (restarts + 1)
                wait_until(
                    lambda mark=mark: len(producer.acknowledged) >= mark or not producer.is_alive(),
                    timeout_s,
                    0.005,
                    "producer progress",
                )
                acked_at_kills.append(len(producer.acknowledged))
                server.kill()
                time.sleep(down_s)
                server = RedisServer(binary, data_dir, port=server.port, config=AOF_ALWAYS)
                server.start()
            producer.join(timeout_s)
            if producer.is_alive() or producer.error:
                raise WaitTimeout(f"producer did not finish: {producer.error!r}")
            client = raw_client(server.url)
            wait_until(
                lambda: group_drained(client, keys.stream, keys.group),
                timeout_s,
                0.05,
                "pending list drained after the restarts",
            )
            crashed = [child.name for child in pool if not child.alive()]
            saw_outage = [child.name for child in pool if "redis_unavailable" in child.log_text()]
            exits = [child.stop() for child in pool]
            wall = time.monotonic() - started
            result = audit(client, keys, CALLS_KEY)
            stream_entries = int(client.xlen(keys.stream))
    finally:
        producer.stop()
        server.stop()
    acked = producer.acknowledged
    return {
        "messages": messages,
        "acknowledged": len(acked),
        "stream_entries": stream_entries,
        "batches_resent": producer.batches_retried,
        "restarts": restarts,
        "acknowledged_at_kills": acked_at_kills,
        "workers_saw_outage": saw_outage,
        "lost": len(result.lost(acked)),
        "duplicated": len(result.applied_twice()),
        "dead_lettered": sum(result.dead_letters.values()),
        "pending": result.pending,
        "duplicate_processings": sum(max(0, n - 1) for n in result.processings.values()),
        "workers_crashed": crashed,
        "worker_exit_codes": exits,
        "wall_s": round(wall, 2),
    }


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--restarts", type=int, default=None)
    args = parser.parse_args()
    messages = args.messages or (5_000 if args.quick else 50_000)
    restarts = args.restarts or (3 if args.quick else 10)
    with scratch_dir("bench-restart-") as tmp:
        if external_url():
            print("note: this drill SIGKILLs and restarts its server: it runs on the embedded")
            print("      server, not on REDIS_URL")
        probe = RedisServer(find_redis_server(load_settings()), tmp / "probe").start()
        info = machine_info(raw_client(probe.url), source="embedded")
        probe.stop()
        try:
            figures = run_drill(tmp, messages, restarts, timeout_s=120 if args.quick else 900)
        except WaitTimeout as exc:
            emit_json(NAME, {"error": str(exc), "machine": info})
            return 1
    ok = (
        figures["lost"] == 0
        and figures["duplicated"] == 0
        and figures["pending"] == 0
        and figures["acknowledged"] == figures["messages"]
        and not figures["workers_crashed"]
    )
    print_table(
        f"{restarts} SIGKILL + restart(s) of redis-server (AOF appendfsync always)",
        ["acknowledged", "stream entries", "resent batches", "lost", "duplicated", "pending"],
        [
            (
                figures["acknowledged"],
                figures["stream_entries"],
                figures["batches_resent"],
                figures["lost"],
                figures["duplicated"],
                figures["pending"],
            )
        ],
    )
    print(
        f"  wall {figures['wall_s']} s, workers crashed {figures['workers_crashed'] or 'none'}, "
        f"exit codes {figures['worker_exit_codes']}, verdict {'OK' if ok else 'FAILED'}"
    )
    emit_json(NAME, {**figures, "ok": ok, "machine": info})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
