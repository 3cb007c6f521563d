"""End to end with a real Prometheus: a real ``sentinel up --no-dagster`` serves its
workers' and its exporter's metrics and writes their targets for file-based discovery; a
real ``prometheus`` (Debian's, on a free port, its own data directory) scrapes them and
evaluates the shipped rules (deploy/prometheus/sentinel-rules.yml, unchanged).

The worker is stopped with SIGSTOP (the supervisor sees it running, so it is not
restarted; its lease lapses as a dead worker's would) while messages keep arriving: the
no-live-worker alert must fire. SIGCONT brings it back: the alert must resolve and the
backlog drain.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.cli.scrape_targets import targets_path
from sentinel_platform.registry import TRANSACTIONS, stream_specs
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.cli import SENTINEL, transaction_fields
from sentinel_platform_tests.harness.prometheus import PrometheusServer, binary
from sentinel_platform_tests.harness.waits import wait_until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "sentinel-rules.yml"
ALERT = "SentinelNoLiveWorker"
#: A short lease, so a stopped worker's lapses in seconds (the alert then waits its `for: 1m`).
LEASE_TTL_MS = "2000"
#: Generous for a loaded 2-core machine, and still far below "never".
START_TIMEOUT_S = 120.0
FIRE_TIMEOUT_S = 240.0
RESOLVE_TIMEOUT_S = 120.0

PROMETHEUS_CONFIG = """\
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: sentinel
    file_sd_configs:
      - files: [{targets}]
        refresh_interval: 2s
"""


def _state(home: Path) -> dict:
    path = home / "run" / "up.json"
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads(path.read_text()))
    return {}


def _metrics(address: str) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        return str(response.read().decode())


@pytest.fixture
def sentinel_up(settings_env: dict[str, str], settings: Settings) -> Iterator[Path]:
    """``sentinel up --no-dagster`` with one transactions worker (none for the other
    streams) on the test Redis; its home. SIGTERMed after the test."""
    env = {**settings_env, "SENTINEL_LEASE_TTL_MS": LEASE_TTL_MS}
    argv = [str(SENTINEL), "up", "--no-dagster", "--no-demo"]
    for spec in stream_specs(settings):
        argv += [spec.workers_flag, "1" if spec.name == TRANSACTIONS.name else "0"]
    up = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        yield settings.home_dir
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            output = up.communicate(timeout=90)[0].decode()
        except subprocess.TimeoutExpired:
            up.kill()
            output = up.communicate(timeout=30)[0].decode()
        assert up.returncode == 0, output


@pytest.fixture
def prometheus(tmp_path: Path, settings: Settings) -> Iterator[PrometheusServer]:
    binary("prometheus")  # skip (or fail in CI) before anything starts
    config = PROMETHEUS_CONFIG.format(
        rules=json.dumps(str(RULES)), targets=json.dumps(str(targets_path(settings.home_dir)))
    )
    server = PrometheusServer(tmp_path / "prometheus", config)
    try:
        yield server.start()
    finally:
        server.stop()


def _value(server: PrometheusServer, expr: str) -> float | None:
    result = server.query(expr)
    return float(result[0]["value"][1]) if result else None


@pytest.mark.slow
def test_no_live_worker_alert_fires_while_messages_arrive_and_resolves_when_it_is_back(
    sentinel_up: Path,
    prometheus: PrometheusServer,
    redis_client: RedisClient,
    settings: Settings,
) -> None:
    home = sentinel_up
    keys = transaction_keys(settings)

    # sentinel up wrote the targets: the exporter and the one worker, each serving metrics
    # (the worker's new series included) on its own port.
    groups = wait_until(
        lambda: targets_path(home).exists() and json.loads(targets_path(home).read_text()),
        timeout_s=START_TIMEOUT_S,
    )
    by_component = {g["labels"]["component"]: g for g in groups}
    assert set(by_component) == {"exporter", "worker"}
    assert by_component["worker"]["labels"]["worker"] == "tx-1"
    worker_address = by_component["worker"]["targets"][0]
    served = wait_until(
        lambda: _try(_metrics, worker_address), timeout_s=START_TIMEOUT_S, what="worker metrics"
    )
    assert f'stream="{keys.stream}"' in served
    for series in ("commit_age_seconds_bucket", "oldest_pending_age_seconds", "verdicts_total"):
        assert f"sentinel_worker_{series}" in served, series

    # Prometheus scrapes both and sees the live worker.
    live = f'sentinel:stream_live_workers:max{{stream="{keys.stream}"}}'
    wait_until(
        lambda: (
            _value(prometheus, live) == 1 and _value(prometheus, 'sum(up{job="sentinel"})') == 2
        ),
        timeout_s=START_TIMEOUT_S,
        interval_s=0.5,
        what=f"prometheus scrapes a live worker (log:\n{prometheus.log_tail()})",
    )
    assert prometheus.alerts(ALERT) == []

    # The worker stops (SIGSTOP: not dead to the supervisor, so not restarted) while
    # messages keep arriving: one per poll.
    pid = int(_state(home)["children"]["tx-1"]["pid"])
    os.kill(pid, signal.SIGSTOP)
    sent = 0
    try:

        def publish_and_check() -> bool:
            nonlocal sent
            redis_client.xadd(keys.stream, transaction_fields(f"e2e-{sent}"))
            sent += 1
            return any(a["state"] == "firing" for a in prometheus.alerts(ALERT))

        wait_until(publish_and_check, timeout_s=FIRE_TIMEOUT_S, interval_s=1.0, what=ALERT)
        (firing,) = [a for a in prometheus.alerts(ALERT) if a["state"] == "firing"]
        assert firing["labels"]["stream"] == keys.stream
        assert firing["labels"]["group"] == keys.group
        assert firing["labels"]["severity"] == "critical"
        lag = _value(prometheus, f'sentinel_stream_lag_messages{{stream="{keys.stream}"}}')
        assert lag is not None and lag > 0
    finally:
        os.kill(pid, signal.SIGCONT)

    # Back: the alert resolves and the worker drains what arrived meanwhile.
    wait_until(
        lambda: prometheus.alerts(ALERT) == [],
        timeout_s=RESOLVE_TIMEOUT_S,
        interval_s=0.5,
        what=f"{ALERT} resolved",
    )
    wait_until(
        lambda: _value(prometheus, f'sentinel_stream_lag_messages{{stream="{keys.stream}"}}') == 0,
        timeout_s=RESOLVE_TIMEOUT_S,
        interval_s=0.5,
        what="the backlog drained",
    )
    assert sent > 0
    # The lag's series and the live workers' come from two scrapes and a rule: the worker's
    # lease (lost while it was stopped) may show a scrape after the backlog drained.
    wait_until(
        lambda: _value(prometheus, live) == 1,
        timeout_s=RESOLVE_TIMEOUT_S,
        interval_s=0.5,
        what="prometheus sees the worker live again",
    )


def _try(read: object, *args: str) -> str | None:
    """``read(*args)``, or None while the server does not answer yet."""
    assert callable(read)
    try:
        return str(read(*args))
    except OSError:
        return None
