"""A worker of a sharded stream: one consumer per shard, in one process, with one limit.

Every worker serves every shard of its stream; shards are not dealt out to workers. Each
shard is a stream and a group of its own, so each keeps every promise of a stream as
it is: a dead worker's messages are recovered through its expired lease by the workers
of that shard, which are all the live workers; a live worker is never robbed; the
delivery limit, dead letters and effects are counted per shard, where the copies of a
key meet. So no shard waits for an assignment after a worker dies, and nothing is handed
over when one joins: no rebalancing, no second lease. What it costs is a read per shard:
N dedicated connections and N blocked reads per worker, cheap beside the calls.

The shards share the worker's limit (``calling.shared_limit``): the analyzer behind
them is one. Each shard's consumer runs on a thread of its own, owned here: whatever a
consumer ends with (a stop, a refusal, an error), the others are stopped too and the
worker exits with the first shard's status that is not OK. A worker with a shard
unserved must not look alive.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from functools import partial

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.zones import auto_maximum
from sentinel_platform.streams.consumer.calling.adaptive_limit import limit_for
from sentinel_platform.streams.consumer.calling.shared_limit import LimitShare, SharedLimit
from sentinel_platform.streams.plumbing.keys import StreamKeys

log = logging.getLogger(__name__)

#: Run shard ``k``'s consumer with its share of the limit; its exit status.
ConsumeShard = Callable[[int, LimitShare], int]

#: How often the main thread wakes while it waits for the shards (signals run there).
JOIN_POLL_S = 0.5


def consume_shards(
    shards: Sequence[StreamKeys],
    settings: Settings,
    consume: ConsumeShard,
    base: Callable[[], int],
    stop: threading.Event,
    fields: dict[str, str],
) -> int:
    """Run ``consume`` for every shard, and ``base`` (the base key's forwarder,
    ``workers.forwarding``), each on a thread of its own until each has returned; the
    first status that is not OK, in shard order (the base last), else OK. Any one's end
    sets ``stop`` for all."""
    shared = SharedLimit(
        limit_for(settings.worker_concurrency_pinned, auto_maximum(settings)), len(shards)
    )
    jobs: list[Callable[[], int]] = [
        partial(consume, shard, shared.for_shard(shard)) for shard in range(len(shards))
    ]
    jobs.append(base)
    statuses = [EXIT_OK] * len(jobs)
    worker_log = BoundLogger(log, fields)

    names = [f"shard-{shard}" for shard in range(len(shards))] + ["base"]

    def serve(job: int) -> None:
        try:
            statuses[job] = jobs[job]()
        except BaseException:  # the thread's owner: logged, never a silent death
            worker_log.exception("shard_part_failed", extra={"part": names[job]})
            statuses[job] = EXIT_ERROR
        finally:
            stop.set()

    threads = [
        threading.Thread(target=serve, args=(job,), name=name, daemon=True)
        for job, name in enumerate(names)
    ]
    worker_log.info("serving_shards", extra={"shards": [keys.stream for keys in shards]})
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # in steps, so the main thread takes its signals
            thread.join(JOIN_POLL_S)
    return next((status for status in statuses if status != EXIT_OK), EXIT_OK)
