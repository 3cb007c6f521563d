"""A worker of a sharded stream stops in bound whatever Redis does (``workers.shards``):
SIGTERM while its server is frozen (SIGSTOP: connections accepted, never answered) ends
every shard's consumer and the base key's forwarder within the stop's bound, as a worker
of one stream does (``streams/consumer/stopping/test_stop_bounded.py``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.exit_codes import EXIT_UNCOMMITTED
from sentinel_platform.streams.consumer.stopping.deadline import STOP_MARGIN_S
from sentinel_platform_tests.harness.fixtures.services import SHARDED_MODULE
from sentinel_platform_tests.harness.frozen_server import FreezableServer, freezable_server
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.waits import wait_until

SHUTDOWN_TIMEOUT_S = 5.0
#: The most a stop may take (the timeout + 5 s), as for a worker of one stream.
REQUIRED_S = SHUTDOWN_TIMEOUT_S + 5.0


@pytest.fixture
def own_server(redis_binary: str, tmp_path: Path) -> Iterator[FreezableServer]:
    with freezable_server(redis_binary, tmp_path) as own:
        yield own


@pytest.mark.usefixtures("sharded_stream")  # the worker's events are read by its stream
def test_sigterm_on_a_frozen_server_stops_every_shard_and_the_forwarder_in_bound(
    own_server: FreezableServer, start_worker: StartWorker
) -> None:
    env = {
        "REDIS_URL": own_server.url,
        "SENTINEL_SHUTDOWN_TIMEOUT_S": str(SHUTDOWN_TIMEOUT_S),
        "SENTINEL_STREAM_MODULES": SHARDED_MODULE,
    }
    worker = start_worker("sharded", env=env)
    wait_until(lambda: len(worker.events("started")) == 3, 30)  # one consumer a shard

    own_server.freeze()
    worker.terminate()
    asked = time.monotonic()
    status = worker.wait(REQUIRED_S + 30)  # a worker that hangs fails below, not here
    took = time.monotonic() - asked
    own_server.thaw()
    assert took < REQUIRED_S, f"stopped after {took:.1f} s:\n{worker.tail(30)}"
    assert took < SHUTDOWN_TIMEOUT_S + STOP_MARGIN_S + 1.5  # the documented bound, + exit
    assert status == EXIT_UNCOMMITTED, worker.tail(30)
    assert worker.events("stop_overran"), worker.tail(30)  # it said why
