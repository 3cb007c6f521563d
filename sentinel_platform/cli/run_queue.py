"""The run queue: Dagster's queued run coordinator, plus one tag per stream a run publishes.

Every run, whoever launches it (the lag gate, the demo schedule, a click in the UI, a job
or asset backfill, the GraphQL API), is submitted through the instance's run coordinator,
which ``dagster.yaml`` names (see :mod:`sentinel_platform.cli.dagster_home`). Before the
run is queued, this coordinator looks at the steps it will execute: a run that executes
``transaction_stream`` gets ``sentinel/publishes.transactions=true``, one that executes
``axiom_stream`` gets ``sentinel/publishes.axioms=true`` (the demo job gets both), and a
run that publishes one stream and has no ``sentinel/stream`` tag gets that too. The tag
concurrency limits of ``dagster.yaml`` (limit 1 per publish tag) then keep a second publish
of one stream queued until the first ends, and ``max_concurrent_runs`` caps the Spark
driver JVMs of all runs together.

Tags derived from steps rather than set on the jobs: a click on *Materialize* or an asset
backfill runs Dagster's implicit asset job, which carries no job tags.

This module is loaded by the webserver and the daemon (they build the instance), so it
imports nothing heavier than Dagster.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg

from sentinel_platform.registry import stream_specs
from sentinel_platform.settings import SettingsError, load_settings

STREAM_TAG = "sentinel/stream"
PUBLISH_TAG_PREFIX = "sentinel/publishes."
#: At most this many publish runs of one stream are in progress at once.
PUBLISH_RUNS_PER_STREAM = 1


def publish_tag(stream: str) -> str:
    return f"{PUBLISH_TAG_PREFIX}{stream}"


@functools.cache
def publish_steps() -> dict[str, str]:
    """The step (the asset's op) that publishes each declared stream -> the stream's name.

    Read once per process (the coordinator calls it for every submitted run): the
    declared streams do not change while an instance runs.
    """
    try:
        specs = stream_specs(load_settings())  # with SENTINEL_STREAM_MODULES' streams
    except SettingsError:
        specs = stream_specs()
    return {spec.asset: spec.name for spec in specs}


def streams_published(step_keys: Iterable[str]) -> list[str]:
    """The streams a run with these steps publishes, in declaration order."""
    keys = set(step_keys)
    return [stream for step, stream in publish_steps().items() if step in keys]


def queue_tags(existing: Mapping[str, str], streams: Sequence[str]) -> dict[str, str]:
    """Tags to add to a run publishing ``streams``: one publish tag per stream, and the
    stream tag when there is exactly one stream and the run has none yet."""
    tags = {publish_tag(stream): "true" for stream in streams}
    if len(streams) == 1 and STREAM_TAG not in existing:
        tags[STREAM_TAG] = streams[0]
    return {key: value for key, value in tags.items() if existing.get(key) != value}


def tag_concurrency_limits() -> list[dict[str, Any]]:
    """The ``tag_concurrency_limits`` of ``dagster.yaml``: one publish run per stream."""
    return [
        {"key": publish_tag(stream), "limit": PUBLISH_RUNS_PER_STREAM}
        for stream in publish_steps().values()
    ]


class StreamRunCoordinator(dg.QueuedRunCoordinator):
    """``QueuedRunCoordinator`` that tags each run with the streams it publishes."""

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        tags = queue_tags(run.tags, streams_published(self._step_keys(run)))
        if tags:
            self._instance.add_run_tags(run.run_id, tags)
        return super().submit_run(context)

    def _step_keys(self, run: dg.DagsterRun) -> list[str]:
        if run.step_keys_to_execute:
            return list(run.step_keys_to_execute)
        if not run.execution_plan_snapshot_id:
            return []
        plan = self._instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
        if plan.step_keys_to_execute:
            return list(plan.step_keys_to_execute)
        return [step.key for step in plan.steps]
