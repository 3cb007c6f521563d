"""A stream of three shards, declared by a module named in ``SENTINEL_STREAM_MODULES``
(the workers' shard tests, ``workers/test_workers_on_shards.py``; its Dagster side, which
the code location merges, is ``sentinel_platform_tests.sharded_assets``)."""

from __future__ import annotations

import dataclasses

from sentinel_platform.registry import TRANSACTIONS, register

SHARDS = 3

SHARDED = register(
    dataclasses.replace(
        TRANSACTIONS,
        name="sharded",
        stream="sharded",
        group="sharded-workers",
        results="sharded:results",
        recent=None,
        asset="sharded_stream",
        publish_job="publish_sharded",
        worker_prefix="shd",
        workers_option=None,
        shards=SHARDS,
        definitions="sentinel_platform_tests.sharded_assets:defs",
    )
)
