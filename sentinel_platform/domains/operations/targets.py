"""Which streams the operations layer watches, and which jobs publish to them.

Both are read off the stream registry (:mod:`sentinel_platform.registry`): each declared
stream is watched through the asset its spec names, and gated through its publish job,
which :func:`publish_targets` finds among the data domains' definitions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import dagster as dg

from sentinel_platform.registry import AXIOMS as AXIOM_SPEC
from sentinel_platform.registry import TRANSACTIONS as TRANSACTION_SPEC
from sentinel_platform.registry import StreamSpec, stream_specs
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for

TRANSACTION_STREAM_ASSET = dg.AssetKey(TRANSACTION_SPEC.asset)
AXIOM_STREAM_ASSET = dg.AssetKey(AXIOM_SPEC.asset)
DEAD_LETTER_QUEUE_ASSET = dg.AssetKey("dead_letter_queue")
OPERATIONS_GROUP = "operations"

#: The dead-letter queue as an external asset: nothing materialises it, the DLQ sensor
#: records observations on it (depth, new entries) so the UI plots it over time.
dead_letter_queue = dg.AssetSpec(
    DEAD_LETTER_QUEUE_ASSET,
    group_name=OPERATIONS_GROUP,
    description="Dead letters of every stream (Redis stream `sentinel:dlq`). Nothing "
    "materialises it: `dead_letter_queue_sensor` records an observation (depth, new entries) "
    "every 30 s, plotted under Overview → Metadata → Plots and listed under Events.",
    kinds={"redis"},
)

#: A job the lag gate launches: a ``dg.JobDefinition`` or what ``dg.define_asset_job``
#: returns (a type Dagster exports under no public name, so it is not spelled out).
PublishJob = Any


@dataclass(frozen=True)
class StreamTarget:
    """One watched stream: its spec, a short name for run keys, and its asset."""

    spec: StreamSpec

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def asset_key(self) -> dg.AssetKey:
        return dg.AssetKey(self.spec.asset)

    def keys_of(self, settings: Settings) -> StreamKeys:
        return keys_for(settings, self.spec)


@dataclass(frozen=True)
class PublishTarget:
    """The job that publishes one stream, as the lag gate launches it.

    ``asset_selection`` narrows a job that publishes several streams to this one;
    ``partitions_def`` lets the gate launch each new partition once it is due.
    """

    job: PublishJob
    partitions_def: dg.PartitionsDefinition | None = None
    asset_selection: tuple[dg.AssetKey, ...] | None = None
    launch_due_partitions: bool = True

    @property
    def job_name(self) -> str:
        return self.job.name


TRANSACTIONS = StreamTarget(TRANSACTION_SPEC)
AXIOMS = StreamTarget(AXIOM_SPEC)


def stream_targets(specs: Iterable[StreamSpec] | None = None) -> tuple[StreamTarget, ...]:
    """One target per declared stream, in declaration order (read when called, so a
    stream registered before the definitions are built is watched)."""
    return tuple(StreamTarget(spec) for spec in (stream_specs() if specs is None else specs))


def publish_targets(data: dg.Definitions) -> dict[str, PublishTarget]:
    """The lag gate's job for each declared stream: the job its spec names, from ``data``.

    A spec naming a job that ``data`` does not define is an error at load time (the gate
    could never resume that stream's publishing).
    """
    jobs = {job.name: job for job in data.jobs or ()}
    targets = {}
    for spec in stream_specs():
        job = jobs.get(spec.publish_job)
        if job is None:
            raise ValueError(
                f"stream {spec.name}: publish job {spec.publish_job!r} is not defined "
                f"(defined jobs: {', '.join(sorted(jobs)) or 'none'}); name the "
                "dg.Definitions holding it in the stream's StreamSpec.definitions"
            )
        targets[spec.name] = PublishTarget(job, getattr(job, "partitions_def", None))
    return targets
