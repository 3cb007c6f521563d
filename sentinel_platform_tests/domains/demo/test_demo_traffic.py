"""The demo job, run through the real ``dagster job execute`` on the real code location:
it publishes synthetic traffic to the real streams and materialises none of the data
assets, so what a user's own runs produced (row counts, partitions) is never overwritten;
every entry it publishes carries the demo's mark, and the streams' last-publish records
(``sentinel status``) stay the user's."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
import yaml

from sentinel_platform.domains.demo import schedule as demo
from sentinel_platform.domains.demo.traffic import ASSET_NAME
from sentinel_platform.schemas import Transaction, is_demo
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.progress import last_publish, record_publish
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.harness.dagster_cli import DAGSTER

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]
DATA_ASSETS = {
    "raw_transactions",
    "enriched_transactions",
    "transaction_stream",
    "telemetry_readings",
    "axioms",
    "axiom_stream",
}


def _execute_demo_job(env: dict[str, str], home: Path, partition: str, seed: int) -> str:
    """One run of ``demo_publish`` as the schedule launches it; returns the CLI's output."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "demo.yaml"
    config.write_text(yaml.safe_dump(demo.demo_run_config(seed)))
    tags = {"dagster/partition": partition}
    done = subprocess.run(
        [DAGSTER, "job", "execute", "-m", "sentinel_platform.definitions", "-j", demo.JOB_NAME,
         "-c", str(config), "--tags", json.dumps(tags)],
        env={**env, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=480,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def test_demo_run_publishes_to_the_streams_and_materialises_no_data_asset(
    settings: Settings, settings_env: dict[str, str], redis_client: RedisClient, tmp_path: Path
) -> None:
    users_publish = {"run_id": "users-run", "partition": "2026-11-20", "rows": "20000"}
    for keys in (transaction_keys(settings), axiom_keys(settings)):
        redis_client.set(keys.lag, 0)  # an idle consumer: publishing may proceed
        record_publish(redis_client, keys, users_publish)
    today = datetime.now(UTC).date().isoformat()
    home = tmp_path / "dagster"

    env = {**settings_env, "SENTINEL_LAG_WARN": "5000", "SENTINEL_LAG_PAUSE": "10000"}
    _execute_demo_job(env, home, today, seed=4242)

    published = [
        Transaction.from_fields(fields).id
        for _, fields in redis_client.xrange(transaction_keys(settings).stream)
    ]
    assert len(set(published)) == demo.TRANSACTIONS_PER_TICK
    assert redis_client.xlen(axiom_keys(settings).stream) > 0
    for keys in (transaction_keys(settings), axiom_keys(settings)):
        entries = [fields for _, fields in redis_client.xrange(keys.stream)]
        assert entries and all(is_demo(fields) for fields in entries), keys.stream
        assert last_publish(redis_client, keys) == users_publish, "the user's, not the demo's"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        materialised = {
            key.to_user_string()
            for key in instance.get_asset_keys()
            if instance.get_latest_materialization_event(key) is not None
        }
        (run,) = instance.get_runs(limit=1)
    assert materialised == {ASSET_NAME}, materialised
    assert not DATA_ASSETS & materialised
    # a publish of both streams for the run queue (their pools, from the run's plan): it
    # never runs beside a user's publish of either
    assert run.run_op_concurrency is not None
    assert run.run_op_concurrency.all_pools == {
        "sentinel/publish/transactions",
        "sentinel/publish/axioms",
    }
