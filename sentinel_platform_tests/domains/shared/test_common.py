"""What a publish run shows: figures that never contradict each other, and every check on
the stream asset that can be judged in the publish run evaluated by it."""

from __future__ import annotations

import dagster as dg
import pytest

from sentinel_platform.definitions import defs
from sentinel_platform.domains.operations.stream_health import EVICTION_CHECK
from sentinel_platform.domains.shared.common import publish_figures
from sentinel_platform.streams.producer.publish import PublishStats

FIGURE_CASES = [
    # one partition that paused most of the run
    PublishStats(rows=500, wall_s=10.0, duration_s=10.0, paused_s=9.5, slowed_s=0.4),
    # four partitions paused at the same time: 4 x 17.3 s of waits in a 60.8 s run
    PublishStats(
        rows=20_000, wall_s=60.819, duration_s=60.5, paused_s=69.264, slowed_s=12.0, partitions=4
    ),
    # nothing published
    PublishStats(partitions=0),
]


@pytest.mark.parametrize("stats", FIGURE_CASES)
def test_no_time_figure_exceeds_the_runs_duration(stats: PublishStats) -> None:
    figures = {name: value.value for name, value in publish_figures(stats).items()}
    seconds = {  # seconds, not rates (``rows_per_s``)
        name: v
        for name, v in figures.items()
        if name.endswith(("_s", "_s_per_partition")) and not name.endswith("per_s")
    }
    assert seconds.keys() >= {"duration_s", "paused_s_per_partition", "slowed_s_per_partition"}
    for name, value in seconds.items():
        assert isinstance(value, float) and value <= figures["duration_s"], (name, figures)


def test_the_guards_episodes_are_named_for_what_they_count() -> None:
    """A pacing episode happens in the nominal zone: named "backpressure" it read as a
    contradiction of the zone."""
    figures = publish_figures(PublishStats(rows=1, soft_events=9, hard_events=1))
    assert (figures["pacing_episodes"].value, figures["pause_episodes"].value) == (9, 1)
    assert not [name for name in figures if "backpressure" in name]


def test_a_sharded_publish_shows_each_shards_rows_and_one_stream_has_none() -> None:
    parts = [PublishStats(rows=5, shard_rows="2,0,3"), PublishStats(rows=4, shard_rows="1,2,1")]
    figures = publish_figures(PublishStats.combine(parts))
    shards = {name: value.value for name, value in figures.items() if name.startswith("shard_")}
    assert shards == {"shard_0_rows": 3, "shard_1_rows": 2, "shard_2_rows": 4}
    assert figures["rows_published"].value == sum(shards.values())
    assert not [name for name in publish_figures(PublishStats(rows=9)) if "shard" in name]


@pytest.mark.parametrize(
    ("job", "stream_asset"),
    [("publish_transactions", "transaction_stream"), ("publish_axioms", "axiom_stream")],
)
def test_the_publish_job_evaluates_the_eviction_check_but_not_the_consumers_checks(
    job: str, stream_asset: str
) -> None:
    """A check the run does not evaluate reads "Not evaluated" after its materialisation;
    the server's eviction policy can be judged in the run, the consumers' backlog cannot
    (the run just made it)."""
    location = defs() if callable(defs) else defs
    checks = location.resolve_job_def(job).asset_layer.asset_graph.asset_check_keys
    on_stream = {key.name for key in checks if key.asset_key == dg.AssetKey(stream_asset)}
    assert on_stream == {EVICTION_CHECK}
