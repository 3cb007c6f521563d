"""``sentinel up`` refuses a server that may evict any key before it starts anything."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.eviction_policy import ALLOW_SETTING
from sentinel_platform_tests.harness.sentinel_up import SENTINEL

#: Far longer than a refusal takes; a ``sentinel up`` that did not refuse runs until stopped.
REFUSAL_TIMEOUT_S = 60


def test_up_refuses_an_allkeys_evicting_server_before_starting_anything(
    settings_env: dict[str, str],
    redis_client: RedisClient,
    eviction_policy: Callable[[str], None],
) -> None:
    eviction_policy("allkeys-random")
    home = Path(settings_env["SENTINEL_HOME"])

    process = subprocess.Popen(
        [str(SENTINEL), "up", "--no-dagster", "--transaction-workers", "1", "--axiom-workers", "0"],
        env=settings_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output, _ = process.communicate(timeout=REFUSAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.terminate()  # stops its workers too
        output, _ = process.communicate(timeout=60)
        pytest.fail(f"sentinel up started on an allkeys-random server:\n{output}")

    assert process.returncode == 1, output
    for name in ("maxmemory-policy", "allkeys-random", "noeviction", ALLOW_SETTING):
        assert name in output
    assert not list((home / "logs").glob("worker-*.log")), "a worker was started"
    assert not redis_client.exists("transactions")
