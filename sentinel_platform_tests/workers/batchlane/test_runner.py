"""A sharded stream's lanes run as one (:func:`~workers.batchlane.runner.every_lane`): each
on a thread of its own, the first to end stopping the others, the first failure the
status."""

from __future__ import annotations

import threading

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from workers.batchlane.runner import Lane, every_lane


def serving(stop: threading.Event, served: list[str], name: str) -> Lane:
    """A lane that notes it ran and serves until stopped."""

    def run() -> int:
        served.append(name)
        stop.wait(30)
        return EXIT_OK

    return run


def test_no_lane_and_one_lane_are_themselves() -> None:
    stop = threading.Event()
    only = serving(stop, [], "only")
    assert every_lane([None, None], stop, 1.0) is None
    assert every_lane([None, only], stop, 1.0) is only


def test_every_shards_lane_runs_and_one_failing_ends_them_all_with_its_status() -> None:
    stop, served = threading.Event(), list[str]()

    def failing() -> int:
        served.append("failing")
        raise RuntimeError("the provider's answer was unreadable")

    lanes = [serving(stop, served, "shard-0"), serving(stop, served, "shard-1"), failing]
    run = every_lane(lanes, stop, 1.0)
    assert run is not None
    assert run() == EXIT_ERROR and stop.is_set()
    assert sorted(served) == ["failing", "shard-0", "shard-1"]


def test_lanes_stopped_from_outside_end_ok() -> None:
    stop, served = threading.Event(), list[str]()
    run = every_lane([serving(stop, served, "a"), serving(stop, served, "b")], stop, 1.0)
    assert run is not None
    timer = threading.Timer(0.2, stop.set)
    timer.start()
    try:
        assert run() == EXIT_OK
    finally:
        timer.cancel()
    assert sorted(served) == ["a", "b"]
