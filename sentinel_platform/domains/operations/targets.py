"""Which streams the operations layer watches, and which jobs publish to them.

Asset keys and job names live here as constants so the Spark side (which defines the
assets and jobs) and the operations side (which watches and gates them) meet in one
place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dagster as dg

from sentinel_platform.settings import Settings
from sentinel_platform.streams.keys import StreamKeys, axiom_keys, transaction_keys

TRANSACTION_STREAM_ASSET = dg.AssetKey("transaction_stream")
AXIOM_STREAM_ASSET = dg.AssetKey("axiom_stream")
DEAD_LETTER_QUEUE_ASSET = dg.AssetKey("dead_letter_queue")
OPERATIONS_GROUP = "operations"

#: The dead-letter queue as an external asset: nothing materialises it, the DLQ sensor
#: records observations on it (depth, new entries) so the UI plots it over time.
dead_letter_queue = dg.AssetSpec(
    DEAD_LETTER_QUEUE_ASSET,
    group_name=OPERATIONS_GROUP,
    description="Dead letters of both streams (Redis stream `sentinel:dlq`). Nothing "
    "materialises it: `dead_letter_queue_sensor` records an observation (depth, new entries) "
    "every 30 s, plotted under Overview → Metadata → Plots and listed under Events.",
    kinds={"redis"},
)

#: A job the lag gate launches: a ``dg.JobDefinition`` or what ``dg.define_asset_job``
#: returns (a type Dagster exports under no public name, so it is not spelled out).
PublishJob = Any


@dataclass(frozen=True)
class StreamTarget:
    """One watched stream: a short name for run keys, its asset, and its Redis keys."""

    name: str
    asset_key: dg.AssetKey
    keys_of: Callable[[Settings], StreamKeys]


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


TRANSACTIONS = StreamTarget("transactions", TRANSACTION_STREAM_ASSET, transaction_keys)
AXIOMS = StreamTarget("axioms", AXIOM_STREAM_ASSET, axiom_keys)
STREAM_TARGETS: tuple[StreamTarget, ...] = (TRANSACTIONS, AXIOMS)
