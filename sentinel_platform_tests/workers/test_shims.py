"""The ``python -m workers.watch_<stream>`` entry points users run still start a worker.

The harness starts workers through ``python -m sentinel_platform.workers <stream>``; this
starts each shim once, so both stay proven: ready (``started`` logged, lease held), then
a clean exit on SIGTERM.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sentinel_platform.registry import spec_for
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.processes import (
    FAST_TIMINGS,
    NOOP_PROCESSOR,
    Fleet,
    WorkerProcess,
)


@pytest.mark.parametrize("stream", ["transactions", "axioms"])
def test_each_shim_starts_a_ready_worker_that_stops_cleanly(
    stream: str, settings_env: dict[str, str], redis_client: RedisClient, tmp_path: Path
) -> None:
    env = {**settings_env, **FAST_TIMINGS}
    module = f"workers.watch_{spec_for(stream).name}"
    command = [sys.executable, "-m", module, "--consumer", f"shim-{stream}"]
    command += ["--processor", NOOP_PROCESSOR]
    with Fleet(tmp_path) as fleet:
        child = fleet.spawn(f"shim-{stream}", command, env)
        worker = WorkerProcess(child.proc, child.name, None, child.log_path, env, stream)
        worker.wait_ready(redis_client, timeout_s=60)
        assert worker.stop() == 0, worker.tail()
