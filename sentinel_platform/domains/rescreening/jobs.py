"""A day's re-screening, launched from the Dagster UI: one daily partitioned job per stream
whose workers ask the analyzer.

``rescreen_<stream>`` (``rescreen_transactions``, ``rescreen_axioms``), launched for a
day's partition (the publish assets' :data:`~sentinel_platform.domains.shared.common.DAILY`),
queues that day's provisional verdicts that are neither superseded nor waiting into the
stream's re-screen queue (:func:`~sentinel_platform.domains.rescreening.queueing.queue_day`);
the workers re-screen them as they do every queued verdict. Launching it twice queues
nothing the second time. Its step's output metadata say what it did, and name the
verdicts whose message is gone from its source stream, which stay provisional.
"""

# No postponed annotations here: Dagster reads the op's ``context`` annotation as a type.
from typing import Any

import dagster as dg

from sentinel_platform.domains.rescreening.queueing import Queued, queue_day
from sentinel_platform.domains.shared.common import DAILY
from sentinel_platform.registry import AXIOMS, TRANSACTIONS, StreamSpec
from sentinel_platform.resources.redis_publisher import RedisPublisherResource

#: The streams whose workers ask the analyzer, so whose verdicts may be provisional.
ANALYZED: tuple[StreamSpec, ...] = (TRANSACTIONS, AXIOMS)
#: At most this many results entry ids of gone messages are named in the metadata.
SHOWN_GONE = 20


def job_name(spec: StreamSpec) -> str:
    return f"rescreen_{spec.name}"


def queued_metadata(queued: Queued, queue: str, day: str) -> dict[str, Any]:
    """A launch's figures, each named for what it counts."""
    gone = ", ".join(queued.source_gone[:SHOWN_GONE])
    more = len(queued.source_gone) - SHOWN_GONE
    return {
        "day": dg.MetadataValue.text(day),
        "queue": dg.MetadataValue.text(queue),
        "queued": dg.MetadataValue.int(queued.queued),
        "source_gone": dg.MetadataValue.int(len(queued.source_gone)),
        "source_gone_ids": dg.MetadataValue.text(gone + (f" (+{more} more)" if more > 0 else "")),
        "already_superseded": dg.MetadataValue.int(queued.superseded),
        "already_waiting": dg.MetadataValue.int(queued.waiting),
    }


def rescreen_job(spec: StreamSpec) -> dg.JobDefinition:
    """The daily partitioned job ``rescreen_<stream>`` of ``spec``."""

    @dg.op(name=f"queue_provisional_{spec.name}")
    def queue_provisional(
        context: dg.OpExecutionContext, redis_publisher: RedisPublisherResource
    ) -> dg.Output[int]:
        day = context.partition_key
        keys = redis_publisher.stream_keys(spec.name)
        client = redis_publisher.connect()
        try:
            queued = queue_day(client, keys, day, owner=f"run {context.run_id}")
        finally:
            client.close()
        context.log.info(f"queued {queued.queued} provisional {spec.name} verdicts of {day}")
        if queued.source_gone:
            context.log.warning(
                f"{len(queued.source_gone)} provisional verdicts of {day} stay provisional: "
                f"their message is gone from {keys.stream}"
            )
        return dg.Output(queued.queued, metadata=queued_metadata(queued, keys.rescreen, day))

    @dg.job(
        name=job_name(spec),
        partitions_def=DAILY,
        description=(
            f"Queue the day's provisional {spec.name} verdicts (rules fallbacks the model "
            "has not decided again) for re-screening; launching twice queues them once."
        ),
    )
    def rescreen() -> None:
        queue_provisional()

    return rescreen


JOBS = [rescreen_job(spec) for spec in ANALYZED]
