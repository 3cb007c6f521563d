"""Redis SIGKILLed and restarted mid-run: nothing acknowledged is lost or applied twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform_tests.harness.drills import run_drill

pytestmark = pytest.mark.slow


def test_redis_sigkill_and_restart_loses_and_doubles_nothing(
    tmp_path: Path, redis_binary: str
) -> None:
    outcome = run_drill(tmp_path, messages=1500, restarts=1, binary=redis_binary, timeout_s=60)

    # The kill really hit a running publish and running workers.
    assert 0 < outcome["acknowledged_at_kills"][0] < outcome["messages"]
    assert outcome["workers_saw_outage"], "no worker noticed the outage"
    # Everything Redis acknowledged to the producer has exactly one effect.
    assert outcome["acknowledged"] == outcome["messages"]
    assert outcome["lost"] == 0
    assert outcome["duplicated"] == 0
    assert outcome["dead_lettered"] == 0
    assert outcome["pending"] == 0
    # The workers rode it out: same processes, clean exit on SIGTERM.
    assert outcome["workers_crashed"] == []
    assert outcome["worker_exit_codes"] == [0, 0]
