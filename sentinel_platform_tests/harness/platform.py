"""The browser tests' platform: ``sentinel up`` on a free port, headless Chromium's
settings, and where screenshots go (the fixtures are registered by the suite's plugin).

Chromium is Debian's package (``/usr/bin/chromium``), driven by Playwright with
``executable_path``: no browser is downloaded. The flags keep it off the network (the
machine has none, and without them Chromium retries background connections endlessly).
Screenshots go to the test's temporary directory, or to ``docs/ui/`` when
``UPDATE_SCREENSHOTS=1`` (that is how the README's pictures are refreshed; not a
``SENTINEL_*`` name, since the test session clears those).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentinel_platform.cli.dagster_home import ensure_dagster_home
from sentinel_platform.settings import Settings
from sentinel_platform_tests.harness.sentinel_up import (
    SENTINEL,
    dagster_log_tail,
    http_ok,
    start_sentinel_up,
)
from sentinel_platform_tests.harness.strategies import valid_transaction
from sentinel_platform_tests.harness.waits import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOCATION = "sentinel_platform"
#: Small limits and a slow worker, so a small flood makes a short backpressure spike.
SPIKE_ENV = {
    "SENTINEL_LAG_WARN": "20",
    "SENTINEL_LAG_PAUSE": "50",
    # reads of 10: the workers' in-flight share stays below the pause limit, which
    # `sentinel up` and the workers refuse otherwise
    "SENTINEL_READ_COUNT": "10",
    "SENTINEL_SIMULATE_LATENCY_MS": "20",
}


@dataclass
class Platform:
    """A running ``sentinel up``: its webserver and the environment its CLI needs."""

    port: int
    env: dict[str, str]
    home: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())["data"]

    def sentinel(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SENTINEL), *argv], env=self.env, capture_output=True, text=True, timeout=60
        )

    def dagster_log_tail(self, lines: int = 40) -> str:
        return dagster_log_tail(self.home, lines)


LAUNCH = """mutation($p: ExecutionParams!) { launchPipelineExecution(executionParams: $p) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
RUN_STATUS = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
RUN_EVENTS = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection {
  events { __typename ... on MessageEvent { message stepKey timestamp } } } } }"""
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")


def launch(
    platform: Platform,
    job: str,
    partition: str | None = None,
    run_config: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
    **selector: Any,
) -> str:
    """Launch ``job`` through the webserver's GraphQL API, as the UI does; its run id.
    ``tags``: the run's tags besides its partition's (the launch dialog's)."""
    params: dict[str, Any] = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": "__repository__",
            "pipelineName": job,
            **selector,
        },
        "runConfigData": run_config or {},
    }
    run_tags = {**(tags or {}), **({"dagster/partition": partition} if partition else {})}
    if run_tags:
        pairs = [{"key": key, "value": value} for key, value in run_tags.items()]
        params["executionMetadata"] = {"tags": pairs}
    launched = platform.graphql(LAUNCH, {"p": params})["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return str(launched["run"]["runId"])


def run_status(platform: Platform, run_id: str, allow_failure: bool = False) -> str:
    """The run's status; a failed or canceled run fails the test unless ``allow_failure``."""
    status = platform.graphql(RUN_STATUS, {"id": run_id})["runOrError"].get("status", "")
    if not allow_failure:
        assert status not in ("FAILURE", "CANCELED"), f"run {run_id}: {status}\n" + (
            platform.dagster_log_tail()
        )
    return str(status)


def wait_for_run(
    platform: Platform, run_id: str, timeout_s: float, allow_failure: bool = False
) -> str:
    """Wait until the run has finished and return its status (a failed or canceled run
    fails the test unless ``allow_failure``). At the deadline, fail with what explains a
    run that never finished: its status, its last events (a step waiting for a pool or
    paused by backpressure says so there) and the tails of ``sentinel up``'s logs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = run_status(platform, run_id, allow_failure)
        if status in FINISHED:
            return status
        time.sleep(1)
    raise AssertionError(
        f"run {run_id} not finished within {timeout_s}s: "
        f"{run_status(platform, run_id, True)}\n{run_diagnosis(platform, run_id)}"
    )


def run_diagnosis(platform: Platform, run_id: str, events: int = 25, lines: int = 30) -> str:
    """What explains a run's state, for a failure message: its last ``events`` messages,
    ``sentinel status`` (the streams' lag, pause flags, holds: what a publish waits on)
    and the last ``lines`` of each log of the platform's home (supervisor, Dagster,
    workers)."""
    found = platform.graphql(RUN_EVENTS, {"id": run_id})["logsForRun"].get("events") or []
    said = [f"  {e.get('stepKey') or '-'}: {e.get('message')}" for e in found if e.get("message")]
    status = platform.sentinel("status")
    parts = ["last events of the run:", *said[-events:], "--- sentinel status", status.stdout]
    for log in sorted((platform.home / "logs").glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        parts += [f"--- {log.name}", *tail]
    return "\n".join(parts)


def land_transactions(settings: Settings, partition: str, rows: int, prefix: str) -> list[str]:
    """``rows`` valid transactions (ids ``<prefix>-<n>``, stamped at noon of ``partition``)
    as the landing file of ``partition`` (JSON lines), as a user's own data would be: a
    publish run of that day sends these instead of the 20,000 it generates without one.
    Their ids, in order."""
    day = settings.home_dir / "landing" / "transactions" / partition
    day.mkdir(parents=True, exist_ok=True)
    ids = [f"{prefix}-{n}" for n in range(rows)]
    noon = f"{partition}T12:00:00Z"
    lines = (json.dumps({**valid_transaction(txn_id), "timestamp": noon}) for txn_id in ids)
    (day / "transactions.jsonl").write_text("\n".join(lines) + "\n")
    return ids


def start_platform(
    settings: Settings, settings_env: dict[str, str], extra_env: dict[str, str]
) -> tuple[Platform, subprocess.Popen[bytes]]:
    """``sentinel up`` on a fresh home and a free port, nothing set up beforehand: what
    runs is what a user gets (the lag gate launches no publish run on a fresh start)."""
    env = {**settings_env, **extra_env, "DAGSTER_HOME": str(settings.dagster_home)}
    ensure_dagster_home(settings.dagster_home)
    port, up = start_sentinel_up(env)
    return Platform(port, env, settings.home_dir), up


@contextmanager
def serving_platform(
    settings: Settings, settings_env: dict[str, str], extra_env: dict[str, str]
) -> Iterator[Platform]:
    """:func:`start_platform` with ``extra_env`` over the test settings, once its UI
    answers (within 120 s); SIGTERM on leaving, waiting up to 120 s for it to stop."""
    running, up = start_platform(settings, settings_env, extra_env)
    try:
        wait_until(lambda: http_ok(running.url), timeout_s=120, interval_s=0.5)
        yield running
    finally:
        up.send_signal(signal.SIGTERM)
        up.communicate(timeout=120)
