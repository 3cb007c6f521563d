"""The operations domain as its tests drive it: small real stand-ins for the publish
assets and job, a capturing webhook server (healthy, hanging or failing), a settable
clock, one real sensor tick, one real run of the checks job, and the alerts read back
from the Redis alert stream.

The fixtures built on them (``webhook_factory``, ``make_resources``, ``clock``, ...) are
registered by the suite's plugin.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import dagster as dg

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.stream_health import (
    build_checks_schedule,
    build_stream_health_checks,
)
from sentinel_platform.domains.operations.targets import (
    AXIOM_STREAM_ASSET,
    TRANSACTION_STREAM_ASSET,
    TRANSACTIONS,
)
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient

DAILY = dg.DailyPartitionsDefinition(start_date="2026-01-01")


@dg.asset(key=TRANSACTION_STREAM_ASSET, partitions_def=DAILY)
def transaction_stream() -> None:
    """Stand-in for the Spark publish asset: the gate only launches it."""


@dg.asset(key=AXIOM_STREAM_ASSET, partitions_def=DAILY)
def axiom_stream() -> None:
    """Stand-in for the Spark publish asset."""


publish_transactions = dg.define_asset_job(
    "publish_transactions", selection=[TRANSACTION_STREAM_ASSET], partitions_def=DAILY
)


class WebhookServer:
    """A real HTTP server on localhost; ``mode`` is ok, hang or fail (HTTP 500)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.bodies: list[dict[str, Any]] = []
        self.attempts = 0
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.attempts += 1
                if server.mode == "hang":
                    server.release.wait(10)
                    return
                if server.mode == "fail":
                    self.send_response(500)
                    self.end_headers()
                    return
                server.bodies.append(body)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        # A token in the path, as in a real Slack URL: it must never reach a log line.
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks/T0SECRET/B0TOKEN"

    def __enter__(self) -> WebhookServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def read_alerts(client: RedisClient, settings: Settings, source: str | None = None) -> list[Alert]:
    alerts = [Alert.from_fields(f) for _, f in client.xrange(settings.alerts_stream)]
    return [a for a in alerts if source is None or a.source == source]


class Clock:
    """The wall clock the lag gate reads, set by the test (partitions come due on demand)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def tick(
    sensor: dg.SensorDefinition,
    instance: dg.DagsterInstance,
    resources: dict[str, Any],
    cursor: str | None,
    definitions: dg.Definitions | None = None,
) -> Any:
    """Evaluate one real sensor tick against the instance; returns SensorExecutionData."""
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources=resources, definitions=definitions
    ) as context:
        return sensor.evaluate_tick(context)


def run_checks_job(instance: dg.DagsterInstance, resources: dict[str, Any]) -> Any:
    """Execute the scheduled stream-health checks job of the transactions stream for real
    (its stand-in asset, every check, the checks schedule's job), a failing run not
    raised; returns Dagster's ``ExecuteInProcessResult``."""
    checks = build_stream_health_checks([TRANSACTIONS])
    schedule = build_checks_schedule(checks)
    defs = dg.Definitions(
        assets=[transaction_stream],
        asset_checks=checks,
        schedules=[schedule],
        resources=resources,
    )
    return defs.resolve_job_def(schedule.job_name).execute_in_process(
        instance=instance, raise_on_error=False
    )


#: Lag thresholds the lag-sensor tests drive through: warn above 5, pause above 10.
LAG_THRESHOLDS = {"lag_warn": 5, "lag_pause": 10}


def observations(data: Any, asset_key: dg.AssetKey) -> list[dict[str, Any]]:
    """The metadata of every observation of ``asset_key`` a sensor tick returned."""
    return [
        {k: v.value for k, v in event.metadata.items()}
        for event in data.asset_events
        if isinstance(event, dg.AssetObservation) and event.asset_key == asset_key
    ]
