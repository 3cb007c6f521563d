"""A third stream declared in one place drives the whole platform, end to end.

``sentinel_platform_tests.harness.third_stream`` declares the ``payments`` stream (spec,
wire model and processor in :mod:`~sentinel_platform_tests.harness.third_stream.payments`,
the Spark source asset and its publish job in
:mod:`~sentinel_platform_tests.harness.third_stream.assets`, which the spec names) and names
nothing else: the platform's own code location picks it up through ``SENTINEL_STREAM_MODULES``.
Through real processes only: ``sentinel up`` starts its worker from the registry
(``--payments-workers``), the Spark asset is materialised through the code location by Dagster's CLI
and published by the executors, the worker writes one decision per payment, the lag sensor and the
stream-health checks of the location see the stream, and ``sentinel status`` lists it with no lag.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg
import pytest
import redis

from sentinel_platform.cli.common import ZONE_EXIT
from sentinel_platform.cli.dagster_home import ensure_dagster_home
from sentinel_platform.cli.up_children import repo_root
from sentinel_platform.domains.operations.lag_gate import SENSOR_NAME
from sentinel_platform.domains.operations.stream_health import (
    AI_CHECK,
    DELIVERY_CHECK,
    DLQ_CHECK,
    EVICTION_CHECK,
    LAG_CHECK,
)
from sentinel_platform.registry import register, stream_specs, unregister
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.plumbing.replies import entries, text
from sentinel_platform_tests.harness.sentinel_up import SENTINEL
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until

pytestmark = pytest.mark.slow

STREAM_MODULE = "sentinel_platform_tests.harness.third_stream.payments"
#: The platform's own code location: the stream reaches it through the registry only.
LOCATION_MODULE = "sentinel_platform.definitions"
ASSET = dg.AssetKey("payment_stream")
HEALTH_CHECKS = {LAG_CHECK, DLQ_CHECK, DELIVERY_CHECK, EVICTION_CHECK, AI_CHECK}
ROWS = 12
ID_PREFIX = "e2e"

T = TypeVar("T")


@dataclass(frozen=True)
class Deployment:
    """The environment of every process of the deployment, and where its logs go."""

    env: dict[str, str]
    keys: StreamKeys
    dagster_home: Path
    logs: Path


def _pythonpath() -> str:
    # Spark's Python workers and the CLI subprocesses import sentinel_platform_tests,
    # which is not installed: the repository root goes on their path.
    existing = os.environ.get("PYTHONPATH")
    return os.pathsep.join(p for p in (str(repo_root()), existing) if p)


@pytest.fixture
def deployment(
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Deployment]:
    """The test Redis plus ``SENTINEL_STREAM_MODULES`` naming the payments module, for child
    processes and (monkeypatched) for this one; the stream is declared in this process
    for the test only."""
    dagster_home = ensure_dagster_home(settings.dagster_home, settings)
    extra = {
        "SENTINEL_STREAM_MODULES": STREAM_MODULE,
        "DAGSTER_HOME": str(dagster_home),
        "SENTINEL_SPARK_MASTER": "local[2]",
        "PYTHONPATH": _pythonpath(),
    }
    for name, value in extra.items():
        monkeypatch.setenv(name, value)
    payments = importlib.import_module(STREAM_MODULE)
    register(payments.PAYMENTS)  # a no-op on first import; again after an earlier test
    logs = settings.home_dir / "test-logs"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        yield Deployment(
            {**settings_env, **extra}, keys_for(settings, "payments"), dagster_home, logs
        )
    finally:
        unregister("payments")
    assert "payments" not in {spec.name for spec in stream_specs()}


def _tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(errors="replace") if path.exists() else f"({path} missing)"
    return "\n".join(text.splitlines()[-lines:])


@pytest.fixture
def sentinel_up(deployment: Deployment, settings: Settings) -> Iterator[subprocess.Popen[bytes]]:
    """``sentinel up`` with one payments worker and none of the built-in streams';
    SIGTERM at teardown must stop it cleanly (exit 0)."""
    output = deployment.logs / "sentinel-up.log"
    argv = [str(SENTINEL), "up", "--no-dagster", "--payments-workers", "1"]
    argv += ["--transaction-workers", "0", "--axiom-workers", "0"]
    with output.open("wb") as sink:
        process = subprocess.Popen(
            argv, env=deployment.env, cwd=repo_root(), stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        worker_log = settings.home_dir / "logs" / "worker-pay-1.log"
        assert code == 0, f"{_tail(output)}\n--- worker log:\n{_tail(worker_log)}"


def _live_consumers(client: RedisClient, keys: StreamKeys) -> list[str]:
    """Consumers of the payments group holding a live lease (the group must exist): the
    consumers a worker registers, and those the group lists, as ``sentinel status``."""
    try:
        groups = [text(g["name"]) for g in client.xinfo_groups(keys.stream)]
        listed = {text(c["name"]) for c in client.xinfo_consumers(keys.stream, keys.group)}
    except redis.ResponseError:  # the worker has not created the stream and group yet
        return []
    if keys.group not in groups:
        return []
    names = listed | {text(name) for name in client.hkeys(keys.consumers)}
    return sorted(name for name in names if client.exists(keys.lease(name)))


def _wait(condition: Callable[[], T], timeout_s: float, what: str, log: Path) -> T:
    """``wait_until`` with the tail of ``log`` (read at the deadline) in its failure."""
    try:
        return wait_until(condition, timeout_s=timeout_s, interval_s=0.2, what=what)
    except WaitTimeout as exc:
        raise AssertionError(f"{exc}\nlast lines of {log}:\n{_tail(log)}") from None


def _materialise(deployment: Deployment) -> subprocess.CompletedProcess[str]:
    config = {"ops": {"payments": {"config": {"rows": ROWS, "id_prefix": ID_PREFIX}}}}
    argv = [sys.executable, "-m", "dagster", "asset", "materialize"]
    argv += ["--select", "payments,payment_stream", "-m", LOCATION_MODULE]
    argv += ["--config-json", json.dumps(config)]
    return subprocess.run(
        argv,
        env=deployment.env,
        cwd=repo_root(),
        capture_output=True,
        text=True,
        timeout=420,
    )


def _location_defs() -> dg.Definitions:
    """The code location's definitions, built in this process with the stream declared
    (the module may have been imported earlier, by another test, without it)."""
    location = importlib.import_module(LOCATION_MODULE)
    defs: dg.Definitions = location.build_definitions()
    return defs


def _metadata(event: Any) -> dict[str, Any]:
    return {name: value.value for name, value in event.metadata.items()}


def test_a_third_stream_declared_in_one_place_runs_end_to_end(
    deployment: Deployment,
    sentinel_up: subprocess.Popen[bytes],
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    keys = deployment.keys
    assert (keys.stream, keys.group, keys.results) == (
        "payments",
        "payment-workers",
        "sentinel:payment_decisions",
    )

    # a. `sentinel up` started the stream's worker from the registry.
    worker_log = settings.home_dir / "logs" / "worker-pay-1.log"
    consumers = _wait(
        lambda: _live_consumers(redis_client, keys), 90, "a live payments worker", worker_log
    )
    assert len(consumers) == 1 and consumers[0].endswith("-pay-1"), consumers
    assert sentinel_up.poll() is None, _tail(deployment.logs / "sentinel-up.log")

    # b. The Spark asset, materialised through the code location, publishes the payments.
    run = _materialise(deployment)
    assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
    published = [fields for _, fields in entries(redis_client.xrange(keys.stream))]
    assert len(published) == ROWS
    expected_ids = {f"{ID_PREFIX}-{n:04d}" for n in range(ROWS)}
    assert {fields["id"] for fields in published} == expected_ids
    assert all(set(fields) == {"id", "payer", "amount", "currency"} for fields in published)

    # c. The worker writes exactly one decision per payment; nothing is dead-lettered.
    _wait(lambda: redis_client.xlen(keys.results) >= ROWS, 60, f"{ROWS} decisions", worker_log)
    decisions = [fields for _, fields in entries(redis_client.xrange(keys.results))]
    assert sorted(d["payment_id"] for d in decisions) == sorted(expected_ids)
    by_id = {fields["id"]: fields for fields in published}
    for decision in decisions:
        payment = by_id[decision["payment_id"]]
        held = float(payment["amount"]) > 1000
        assert decision["decision"] == ("review" if held else "approved"), decision
        assert (decision["amount"], decision["currency"]) == (
            payment["amount"],
            payment["currency"],
        )
    assert {d["decision"] for d in decisions} == {"approved", "review"}
    assert redis_client.xlen(keys.dlq) == 0
    wait_until(
        lambda: redis_client.xpending(keys.stream, keys.group)["pending"] == 0,
        timeout_s=30,
        what="every payment acknowledged",
    )

    # d. The location's lag sensor and health checks cover the stream.
    defs = _location_defs()
    check_keys = {
        key.name for key in defs.resolve_asset_graph().asset_check_keys if key.asset_key == ASSET
    }
    assert check_keys == HEALTH_CHECKS
    job = defs.resolve_job_def("publish_payments")
    assert job.asset_layer.asset_graph.get_all_asset_keys() >= {ASSET}
    # its publish step is in the stream's pool, which `sentinel up` limits to one slot
    assert defs.resolve_assets_def(ASSET).op.pool == "sentinel/publish/payments"
    sensor = defs.resolve_sensor_def(SENSOR_NAME)
    location_resources = defs.resources or {}
    resources = {
        name: location_resources[name] for name in ("settings", "alerts", "stream_inspector")
    }
    with dg.DagsterInstance.from_config(str(deployment.dagster_home)) as instance:
        materialised = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=ASSET), limit=1
        ).records
        assert materialised, "the CLI run recorded no materialisation in DAGSTER_HOME"
        metadata = _metadata(materialised[0].event_log_entry.asset_materialization)
        assert metadata["rows_published"] == ROWS and metadata["stream"] == "payments"

        with dg.build_sensor_context(
            instance=instance, cursor=None, resources=resources, definitions=defs
        ) as context:
            tick = sensor.evaluate_tick(context)
        observed = [
            _metadata(event)
            for event in tick.asset_events
            if isinstance(event, dg.AssetObservation) and event.asset_key == ASSET
        ]
        assert len(observed) == 1, tick.asset_events
        card = observed[0]
        assert card["zone"] == "nominal" and card["lag"] == 0, card
        assert card["consumers_alive"] == 1 and card["entries_processed"] == ROWS, card
        sensor_checks = [
            event
            for event in tick.asset_events
            if isinstance(event, dg.AssetCheckEvaluation) and event.asset_key == ASSET
        ]
        assert [(e.check_name, e.passed) for e in sensor_checks] == [(LAG_CHECK, True)]
        assert not [r for r in tick.run_requests or [] if r.job_name == "publish_payments"]
        assert "payments: nominal (lag 0" in (tick.skip_message or ""), tick.skip_message

        # The scheduled checks job: the payments checks pass; the built-in streams have no
        # worker in this deployment, so their blocking lag check fails the run.
        result = defs.resolve_job_def("stream_health_checks_job").execute_in_process(
            instance=instance, raise_on_error=False
        )
        evaluations = result.get_asset_check_evaluations()
        mine = {e.check_name: e for e in evaluations if e.asset_key == ASSET}
        assert set(mine) == HEALTH_CHECKS
        failed = {name: e.description for name, e in mine.items() if not e.passed}
        assert not failed, failed
        lag = _metadata(mine[LAG_CHECK])
        assert lag["zone"] == "nominal" and lag["lag"] == 0 and lag["consumers_alive"] == 1
        assert _metadata(mine[DLQ_CHECK])["recent_dead_letters"] == 0
        others = {
            e.asset_key.to_user_string(): _metadata(e)["zone"]
            for e in evaluations
            if e.check_name == LAG_CHECK and e.asset_key != ASSET
        }
        assert others == {"transaction_stream": "worker_off", "axiom_stream": "worker_off"}

    # e. `sentinel status` lists the stream with its worker and no lag.
    status = subprocess.run(
        [str(SENTINEL), "status", "--json"],
        env=deployment.env,
        cwd=repo_root(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(status.stdout)
    assert status.returncode == ZONE_EXIT[doc["zone"]], status.stderr
    streams = {entry["stream"]: entry for entry in doc["streams"]}
    assert set(streams) >= {"payments", settings.transactions_stream, settings.axioms_stream}
    payments = streams["payments"]
    assert payments["group"] == "payment-workers"
    assert (payments["zone"], payments["lag"], payments["pending"]) == ("nominal", 0, 0)
    assert payments["live_workers"] == 1 and payments["processed"] == ROWS
    assert payments["dlq_depth"] == 0
    assert payments["last_publish"]["outcome"] == "success", payments["last_publish"]
    assert int(payments["last_publish"]["rows"]) == ROWS
