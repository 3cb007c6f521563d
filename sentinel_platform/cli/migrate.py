"""``sentinel migrate-storage``: move a Dagster home from SQLite to PostgreSQL, cursors kept.

A home that ran on SQLite holds what the platform must not lose: every sensor's cursor
(the DLQ sensor's last seen entry: without it every old dead letter is alerted again; the
lag gate's held partitions and pause episode), the schedules' and sensors' on/off state,
and the run history with its events (materialised partitions, which the lag gate reads to
decide what is due). This command copies all of it, through Dagster's own instance API,
into the empty (or partly copied) PostgreSQL database of ``SENTINEL_DAGSTER_POSTGRES_URL``,
then rewrites ``dagster.yaml`` to point there. It is idempotent: what is already there is
skipped, so an interrupted copy is finished by running it again. The SQLite files are left
in place (``history/``, ``schedules/``), unused, as a backup.

Run it with the platform stopped; ``sentinel up`` refuses to switch storage until it ran.
Not copied: sensor and schedule tick history and runless observations (the lag plots
before the move): records of what happened, not state anything depends on.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from sentinel_platform.cli.common import EXIT_OK, CliError, settings_from_env
from sentinel_platform.cli.dagster_home import (
    POSTGRES_ENV,
    is_managed,
    render_dagster_yaml,
    sqlite_history,
    storage_kind,
)
from sentinel_platform.redaction import scrub
from sentinel_platform.settings import Settings

log = logging.getLogger("sentinel.migrate")


@dataclass
class Copied:
    instigators: int = 0
    runs: int = 0
    events: int = 0
    backfills: int = 0

    def __str__(self) -> str:
        return (
            f"{self.instigators} sensor/schedule state(s), {self.runs} run(s) with "
            f"{self.events} event(s), {self.backfills} backfill(s)"
        )


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "migrate-storage",
        help="copy the Dagster home's SQLite history and sensor cursors into PostgreSQL",
        description=f"Copies sensor cursors, schedule/sensor state, runs with their events "
        f"and backfills from $SENTINEL_HOME/dagster (SQLite) into {POSTGRES_ENV}, then points "
        "dagster.yaml there. Run it with the platform stopped; running it again copies only "
        "what is missing.",
    )
    parser.set_defaults(handler=run)


def copy_instance(source: dg.DagsterInstance, target: dg.DagsterInstance) -> Copied:
    """Copy instigator state, runs (snapshots, events) and backfills; skip what exists."""
    copied = Copied()
    for state in source.all_instigator_state():
        existing = target.get_instigator_state(state.instigator_origin_id, state.selector_id)
        if existing is None:
            target.add_instigator_state(state)
        else:
            target.update_instigator_state(state)
        copied.instigators += 1
    for run in reversed(source.get_runs()):  # oldest first, as they happened
        if target.has_run(run.run_id):
            continue
        if run.job_snapshot_id and not target.has_job_snapshot(run.job_snapshot_id):
            target.add_snapshot(source.get_job_snapshot(run.job_snapshot_id))
        plan_id = run.execution_plan_snapshot_id
        if plan_id and not target.run_storage.has_execution_plan_snapshot(plan_id):
            target.add_snapshot(source.get_execution_plan_snapshot(plan_id))
        events = source.all_logs(run.run_id)
        target.add_run(run)
        for event in events:
            target.event_log_storage.store_event(event)
        copied.runs += 1
        copied.events += len(events)
    known = {backfill.backfill_id for backfill in target.get_backfills()}
    for backfill in source.get_backfills():
        if backfill.backfill_id not in known:
            target.add_backfill(backfill)
            copied.backfills += 1
    return copied


def migrate(settings: Settings) -> Copied:
    """Copy the home's SQLite instance into PostgreSQL and rewrite ``dagster.yaml``."""
    if not settings.dagster_postgres_url_value:
        raise CliError(f"{POSTGRES_ENV} is not set: it names the PostgreSQL database to move to")
    home = settings.dagster_home
    config = home / "dagster.yaml"
    current = config.read_text() if config.exists() else ""
    if current and storage_kind(current) != "sqlite":
        raise CliError(f"{config} does not keep the instance in SQLite: nothing to migrate")
    if current and not is_managed(current):
        raise CliError(
            f"{config} is not managed by `sentinel up`: add `storage: postgres: postgres_url: "
            f"{{env: {POSTGRES_ENV}}}` to it yourself after the copy; or delete its first "
            "line's edits and rerun"
        )
    if not sqlite_history(home):
        raise CliError(f"{home} holds no SQLite history: nothing to migrate")
    target_yaml = render_dagster_yaml(settings)
    try:
        source = dg.DagsterInstance.from_config(str(home))
        with tempfile.TemporaryDirectory(prefix="sentinel-migrate-") as scratch:
            Path(scratch, "dagster.yaml").write_text(target_yaml)
            with source, dg.DagsterInstance.from_config(scratch) as target:
                copied = copy_instance(source, target)
    except CliError:
        raise
    except Exception as exc:  # a database error: say which setting, never the password
        raise CliError(
            f"migration to {POSTGRES_ENV} failed: {scrub(f'{type(exc).__name__}: {exc}')}"
        ) from None
    tmp = config.with_suffix(".yaml.tmp")
    tmp.write_text(target_yaml)
    tmp.replace(config)
    return copied


def run(args: argparse.Namespace) -> int:
    settings = settings_from_env()
    copied = migrate(settings)
    print(
        f"sentinel migrate-storage: copied {copied} into {POSTGRES_ENV}; dagster.yaml now "
        "points there (the SQLite files stay, unused)",
        file=sys.stderr,
    )
    return EXIT_OK
