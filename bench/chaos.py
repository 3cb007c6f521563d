"""Worker chaos at scale: random SIGKILLs while a pool drains a large stream.

100,000 messages (``--quick``: 50,000), one in a thousand a poison pill (the processor
raises on every delivery) and one in a thousand invalid (fails validation), published in
batches over about a minute (``--quick``: 20 s). Three workers
(the harness's ``counting`` processor) consume while, every few seconds, a random worker is
SIGKILLed and a fresh one started in its place. When everything is published and the
group has every entry delivered and acknowledged, the pool is stopped and the audit counts, per
natural key: valid messages with no effect (lost), messages with more than one effect
(duplicated), dead letters (poison and invalid must have exactly one each), and the
pending list (must be empty). Duplicate *processings* (the processor ran again after a
kill, its effect deduplicated) are reported too: they are expected, and harmless.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import random
import time
from typing import Any

from bench._common import (
    base_parser,
    bench_settings,
    emit_json,
    machine_info,
    print_table,
    raw_client,
    redis_server,
    scratch_dir,
)
from bench._faults import LedgerProducer, audit, bench_message
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.processes import (
    TEST_PROCESSOR,
    Child,
    Fleet,
    child_env,
    wait_leases,
)
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import group_drained
from sentinel_platform_tests.harness.waits import WaitTimeout

NAME = "chaos"
PROCESSOR = TEST_PROCESSOR
#: Settings of the drill: short lease and backoff so recovery keeps up with the kills.
DRILL_SETTINGS = {"lease_ttl_ms": 1000, "retry_backoff_ms": 100, "reclaim_delivery_limit": 3}


def kind_of(index: int) -> str:
    if index % 1000 == 999:
        return "poison"
    if index % 1000 == 499:
        return "invalid"
    return "valid"


def run_chaos(
    url: str,
    tmp: Path,
    messages: int,
    workers: int,
    kill_every: tuple[float, float],
    publish_s: float,
    limit_s: float,
) -> dict[str, Any]:
    rng = random.Random(7)
    settings = bench_settings(url, tmp, **DRILL_SETTINGS)
    keys = transaction_keys(settings)
    client = raw_client(url)
    client.flushdb()
    kinds = {f"m{i}": kind_of(i) for i in range(messages)}
    batch = 500
    producer = LedgerProducer(
        settings,
        keys,
        [bench_message(i, kind=kind_of(i)) for i in range(messages)],
        batch=batch,
        pause_s=publish_s / max(1, messages // batch),
        deadline_s=limit_s,
    )
    env = child_env(url, tmp, **DRILL_SETTINGS)
    kills = 0
    with Fleet(tmp) as fleet:

        def spawn(n: int) -> Child:
            return fleet.worker("transactions", f"chaos-{n}", env, PROCESSOR)

        pool = [spawn(n) for n in range(workers)]
        wait_leases(client, keys, pool)
        started = time.monotonic()
        producer.start()
        next_kill = started + rng.uniform(*kill_every)
        while producer.is_alive() or not group_drained(client, keys.stream, keys.group):
            now = time.monotonic()
            if now - started > limit_s:
                raise WaitTimeout(f"chaos did not drain within {limit_s:.0f}s")
            if now >= next_kill:
                victim = pool.pop(rng.randrange(len(pool)))
                victim.kill()
                kills += 1
                pool.append(spawn(workers + kills))
                next_kill = now + rng.uniform(*kill_every)
            time.sleep(0.05)
        wall = time.monotonic() - started
        exits = [child.stop() for child in pool]
    if producer.error or len(producer.acknowledged) != messages:
        raise WaitTimeout(f"producer failed: {producer.error!r}")
    result = audit(client, keys, CALLS_KEY)
    summary = result.summary(
        valid=[k for k, kind in kinds.items() if kind == "valid"],
        poison=[k for k, kind in kinds.items() if kind == "poison"],
        invalid=[k for k, kind in kinds.items() if kind == "invalid"],
    )
    return {
        "messages": messages,
        "workers": workers,
        "kills": kills,
        "wall_s": round(wall, 2),
        **summary,
        "clean_exits": sum(1 for code in exits if code == 0),
    }


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args()
    messages = args.messages or (50_000 if args.quick else 100_000)
    kill_every = (0.5, 1.5) if args.quick else (2.0, 5.0)
    publish_s = 20.0 if args.quick else 60.0
    limit_s = 90.0 if args.quick else 900.0
    with redis_server() as server, scratch_dir("bench-chaos-") as tmp:
        info = machine_info(raw_client(server.url))
        try:
            figures = run_chaos(
                server.url, tmp, messages, args.workers, kill_every, publish_s, limit_s
            )
        except WaitTimeout as exc:
            emit_json(NAME, {"error": str(exc), "machine": info})
            return 1
    ok = (
        figures["lost"] == 0
        and figures["duplicated"] == 0
        and figures["bad_not_dead_lettered_once"] == 0
        and figures["bad_with_effect"] == 0
        and figures["wrong_reason"] == 0
        and figures["pending"] == 0
    )
    print_table(
        f"{figures['workers']} workers, a SIGKILL every {kill_every[0]}-{kill_every[1]} s",
        ["messages", "kills", "lost", "duplicated", "dead-lettered", "DLQ'd valid", "pending"],
        [
            (
                figures["messages"],
                figures["kills"],
                figures["lost"],
                figures["duplicated"],
                figures["dead_lettered"],
                figures["dead_lettered_valid"],
                figures["pending"],
            )
        ],
    )
    print(
        f"  wall {figures['wall_s']} s (publish paced over {publish_s:.0f} s), duplicate "
        f"processings (deduplicated) {figures['duplicate_processings']}, "
        f"verdict {'OK' if ok else 'FAILED'}"
    )
    emit_json(NAME, {**figures, "ok": ok, "machine": info})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
