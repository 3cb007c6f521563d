"""A closing fleet leaves no process of its own behind: a worker's batch lane process is
killed with it, also one whose worker was SIGKILLed earlier in the test."""

from __future__ import annotations

import sys
from pathlib import Path

from sentinel_platform.cli.proctree import alive
from sentinel_platform_tests.harness.processes import Fleet

SLEEP = "import time; time.sleep(120)"


def test_a_lane_process_outliving_its_killed_worker_is_killed_when_the_fleet_closes(
    tmp_path: Path,
) -> None:
    with Fleet(tmp_path) as fleet:
        worker = fleet.spawn("worker", [sys.executable, "-c", SLEEP], {})
        # started as the worker starts its lane, by command line only: not a descendant
        lane = fleet.spawn(
            "lane-stand-in",
            [sys.executable, "-c", SLEEP, "workers.batchlane", "--parent-pid", str(worker.pid)],
            {},
        )
        fleet.children.remove(lane)  # the fleet knows only its worker
        worker.kill()
        assert alive(lane.pid)
    assert not alive(lane.pid)
    lane.proc.wait(5)
