"""Materialise through the real ``dagster asset materialize`` CLI and read what each step did.

The CLI loads the real code location (``sentinel_platform.definitions``) with the
executor, resources and IO manager users get, in a process of its own with its own
environment, so a test sees exactly what a user's run would do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

DAGSTER = str(Path(sys.executable).parent / "dagster")


def materialize(
    select: str,
    partition: str,
    env: Mapping[str, str],
    dagster_home: Path,
    run_config: Mapping[str, Any] | None = None,
    timeout_s: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion (killed at ``timeout_s``); stdout and stderr merged."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    command = [
        DAGSTER,
        *("asset", "materialize", "-m", "sentinel_platform.definitions"),
        *("--select", select, "--partition", partition),
    ]
    if run_config:
        command += ["--config-json", json.dumps(run_config)]
    full_env = {**env, "DAGSTER_HOME": str(dagster_home)}
    with subprocess.Popen(
        command, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        try:
            output, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    (dagster_home / "cli.log").write_text(output)
    return subprocess.CompletedProcess(command, process.returncode, output, "")


@dataclass(frozen=True)
class StepRecord:
    """A materialisation or check evaluation of the last run, with the step that made it."""

    step: str
    kind: str  # "materialization" or "check"
    metadata: dict[str, Any]


def last_run_records(dagster_home: Path) -> list[StepRecord]:
    """Every materialisation and check evaluation of the most recent run on the instance."""
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        (run,) = instance.get_runs(limit=1)
        records = []
        for entry in instance.all_logs(run.run_id):
            event = entry.dagster_event
            if event is None:
                continue
            if event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
                metadata = event.step_materialization_data.materialization.metadata
                records.append(StepRecord(str(event.step_key), "materialization", _plain(metadata)))
            elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
                metadata = event.event_specific_data.metadata
                records.append(StepRecord(str(event.step_key), "check", _plain(metadata)))
        return records


def _plain(metadata: Mapping[str, Any]) -> dict[str, Any]:
    return {key: getattr(value, "value", value) for key, value in metadata.items()}
