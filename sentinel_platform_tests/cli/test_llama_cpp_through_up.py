"""A real model through ``sentinel up``: docs/analyzer.md's llama.cpp recipe exported as a
user does, ``sentinel up --no-dagster`` (Redis and the workers: the lightest layout that runs
the real worker fleet), and a real Spark partition of ``transaction_stream`` published the way
a user does, with ``dagster asset materialize`` on the code location and ``sentinel up``'s
Dagster home (``make test-llm``; skipped without the ``llm`` extra unless
``REQUIRE_LLM_TESTS=1``).

What is promised is what the worker-alone test promises
(:mod:`~sentinel_platform_tests.harness.llama_verdicts`), here for every published row: each
is decided once, by the model (``driver_used=analyzer``), schema-valid, with ``model``,
``prompt_version`` and tokens recorded; the server's queue is met by the adaptive limit, not
by fallbacks, timeouts or the breaker. A worker log line showing any of those ends the wait
at once, so a wrong recipe fails in seconds, naming what the worker logged.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sentinel_platform.cli.dagster_home import ensure_dagster_home
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.dagster_cli import materialize
from sentinel_platform_tests.harness.llama_server import LlamaServer
from sentinel_platform_tests.harness.llama_verdicts import (
    RESULTS_TIMEOUT_S,
    assert_the_models_verdicts,
    recipe_env,
    trouble,
)
from sentinel_platform_tests.harness.sentinel_up import SENTINEL
from sentinel_platform_tests.harness.waits import wait_until

#: The model's start, a Spark run of three steps and a verdict every 2-13 s.
pytestmark = [pytest.mark.llm, pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1800)]

DAY = "2026-03-02"
#: Few rows: each costs a call to a server that answers one at a time.
ROWS = 10
SMALL = {"ops": {"raw_transactions": {"config": {"rows": ROWS, "spark_partitions": 2}}}}
#: Spark's start and three steps, on a loaded 2-core machine beside the model's server.
PUBLISH_TIMEOUT_S = 600.0
WORKER = "tx-1"  # ``sentinel up``'s slot name for the first transactions worker


@dataclass(frozen=True)
class Up:
    """A running ``sentinel up``: its process, the environment its commands share, and its
    worker's log."""

    process: subprocess.Popen[bytes]
    env: dict[str, str]
    output: Path
    worker_log: Path

    def worker_text(self) -> str:
        return self.worker_log.read_text(errors="replace") if self.worker_log.exists() else ""

    def worker_tail(self, lines: int = 40) -> str:
        return "\n".join(self.worker_text().splitlines()[-lines:])

    def stop(self) -> tuple[int, str]:
        """SIGTERM, as Ctrl-C does: its exit status and output (bounded by up's own
        stop timeout, which ends a worker that does not drain)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(timeout=120)
        return status, self.output.read_text(errors="replace")


@pytest.fixture
def up_on_the_recipe(
    llama_server: LlamaServer,
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
    tmp_path: Path,
) -> Iterator[Up]:
    """``sentinel up --no-dagster`` with the recipe against ``llama_server``, one worker of
    transactions and none of axioms; waited for (its worker started), stopped at teardown unless
    the test stopped it."""
    env = {**settings_env, **recipe_env(llama_server), "DAGSTER_HOME": str(settings.dagster_home)}
    ensure_dagster_home(settings.dagster_home)
    argv = [str(SENTINEL), "up", "--no-dagster", "--axiom-workers", "0"]
    output = tmp_path / "sentinel-up.out"
    with output.open("wb") as out:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    up = Up(process, env, output, settings.home_dir / "logs" / f"worker-{WORKER}.log")
    try:
        wait_until(
            lambda: process.poll() is not None or '"event": "started"' in up.worker_text(),
            timeout_s=120,
            interval_s=0.5,
            what="sentinel up's transactions worker started",
        )
        assert process.poll() is None, output.read_text(errors="replace")[-4000:]
        yield up
    finally:
        if process.returncode is None:  # the test stops it itself when it gets that far
            up.stop()


def _decided_or_in_trouble(up: Up, client: RedisClient, results: str, published: int) -> bool:
    """Every published row has a verdict, or the worker logged a fallback, a timeout, the
    breaker or a refused recipe (which no wait would mend)."""
    return client.xlen(results) >= published or bool(trouble(up.worker_text()))


def test_every_verdict_of_a_published_partition_is_the_real_models(
    up_on_the_recipe: Up,
    llama_server: LlamaServer,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    up, keys = up_on_the_recipe, transaction_keys(settings)
    done = materialize(
        "*transaction_stream", DAY, up.env, settings.dagster_home, SMALL, PUBLISH_TIMEOUT_S
    )
    assert done.returncode == 0, done.stdout[-5000:]
    published = {Transaction.from_fields(f).id for _, f in redis_client.xrange(keys.stream)}
    assert len(published) == ROWS, "the partition's rows, each published once"

    wait_until(
        lambda: _decided_or_in_trouble(up, redis_client, keys.results, ROWS),
        timeout_s=RESULTS_TIMEOUT_S,
        interval_s=0.5,
        what=f"{ROWS} verdicts from the real model",
    )
    logged = trouble(up.worker_text())
    assert not logged, "the worker fell back, timed out, opened its breaker or was refused:\n" + (
        "\n".join(logged[:5]) + f"\n--- llama.cpp's server:\n{llama_server.tail(10)}"
    )
    results = [fields for _, fields in redis_client.xrange(keys.results)]
    assert sorted(r["txn_id"] for r in results) == sorted(published), "one verdict per row"
    context = f"{up.worker_tail()}\n{llama_server.tail()}"
    assert_the_models_verdicts(results, llama_server, settings.home_dir, context)
    status, output = up.stop()
    assert status == 0, output[-4000:]
    assert not trouble(up.worker_text()), up.worker_tail()
