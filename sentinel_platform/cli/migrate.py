"""``sentinel migrate-storage``: move a Dagster home from SQLite to PostgreSQL, cursors kept.

A home that ran on SQLite holds what the platform must not lose: every sensor's cursor
(the DLQ sensor's last seen entry: without it every old dead letter is alerted again; the
lag gate's held partitions and pause episode), the schedules' and sensors' on/off state,
and the run history with its events (materialised partitions, which the lag gate reads to
decide what is due). This command copies all of it, through Dagster's own instance API,
into the empty (or partly copied) PostgreSQL database of ``SENTINEL_DAGSTER_POSTGRES_URL``,
then rewrites ``dagster.yaml`` to point there. It is idempotent: what is already there is
skipped, and a run cut short mid-copy (killed, database gone) is copied again whole (see
:func:`copy_run`), so an interrupted copy is finished by running it again, every event
exactly once. Pool limits set in the database come along. The SQLite files are left in
place (``history/``, ``schedules/``), unused, as a backup.

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
from typing import TYPE_CHECKING

from sentinel_platform.cli.common import CliError, settings_from_env
from sentinel_platform.cli.dagster_home import (
    POSTGRES_ENV,
    is_managed,
    render_dagster_yaml,
    sqlite_history,
    storage_kind,
)
from sentinel_platform.exit_codes import EXIT_OK
from sentinel_platform.redaction import scrub
from sentinel_platform.settings import Settings

if TYPE_CHECKING:  # imported where used: every `sentinel` command would pay a second for it
    import dagster as dg

log = logging.getLogger("sentinel.migrate")


@dataclass
class Copied:
    instigators: int = 0
    pools: int = 0
    runs: int = 0
    events: int = 0
    backfills: int = 0

    def __str__(self) -> str:
        return (
            f"{self.instigators} sensor/schedule state(s), {self.runs} run(s) with "
            f"{self.events} event(s), {self.backfills} backfill(s), {self.pools} pool limit(s)"
        )


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "migrate-storage",
        help="copy the Dagster home's SQLite history and sensor cursors into PostgreSQL",
        description=f"Copies sensor cursors, schedule/sensor state, pool limits, runs with "
        f"their events and backfills from $SENTINEL_HOME/dagster (SQLite) into {POSTGRES_ENV}, "
        "then points dagster.yaml there. Run it with the platform stopped; running it again "
        "copies only what is missing and finishes a run whose copy was cut short.",
    )
    parser.set_defaults(handler=run)


def copy_instance(source: dg.DagsterInstance, target: dg.DagsterInstance) -> Copied:
    """Copy instigator state, pool limits, runs (snapshots, events) and backfills; skip what
    is already complete, finish what is not. Each run is copied by :func:`copy_run`."""
    copied = Copied()
    for state in source.all_instigator_state():
        existing = target.get_instigator_state(state.instigator_origin_id, state.selector_id)
        if existing is None:
            target.add_instigator_state(state)
        else:
            target.update_instigator_state(state)
        copied.instigators += 1
    copied.pools = copy_pool_limits(source, target)
    for run in reversed(source.get_runs()):  # oldest first, as they happened
        events = copy_run(source, target, run)
        if events is not None:
            copied.runs += 1
            copied.events += events
    known = {backfill.backfill_id for backfill in target.get_backfills()}
    for backfill in source.get_backfills():
        if backfill.backfill_id not in known:
            target.add_backfill(backfill)
            copied.backfills += 1
    return copied


def copy_run(
    source: dg.DagsterInstance, target: dg.DagsterInstance, run: dg.DagsterRun
) -> int | None:
    """Copy one run with all its events, exactly once; the number of events copied, or None
    if the target already held the run complete.

    Event storage does not deduplicate, and one event is several writes (the event row,
    then the asset index: the materialised partition, its tags), so a copy cut short may
    end inside an event; appending "the missing tail" could not tell a half-written last
    event from a whole one. So the run record is the commit mark: it is added only after
    every event is stored, and a run that is absent, or present (an older copy added it
    first) with a different number of events, has whatever events the target holds
    deleted (``delete_events``: the rows and their asset tags) and all of them copied again,
    in the source's order. Rerunning after any interruption therefore converges on one
    complete copy.
    """
    events = source.all_logs(run.run_id)
    present = target.has_run(run.run_id)
    if present and len(target.all_logs(run.run_id)) == len(events):
        return None
    if run.job_snapshot_id and not target.has_job_snapshot(run.job_snapshot_id):
        target.add_snapshot(source.get_job_snapshot(run.job_snapshot_id))
    plan_id = run.execution_plan_snapshot_id
    if plan_id and not target.run_storage.has_execution_plan_snapshot(plan_id):
        target.add_snapshot(source.get_execution_plan_snapshot(plan_id))
    target.event_log_storage.delete_events(run.run_id)
    for event in events:
        target.event_log_storage.store_event(event)
    if not present:
        record = source.get_run_record_by_id(run.run_id)
        created = record.create_timestamp if record else None
        if created is None:
            target.add_run(run)
        else:  # keeps when the run was created, not when it was copied
            target.run_storage.add_historical_run(run, created)
    return len(events)


def copy_pool_limits(source: dg.DagsterInstance, target: dg.DagsterInstance) -> int:
    """Copy the pool (op concurrency) limits set in the database (``dagster instance
    concurrency set``); limits that come from the default in ``dagster.yaml`` are not data."""
    storage = source.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return 0
    limits = [pool for pool in storage.get_pool_limits() if not pool.from_default]
    for pool in limits:
        target.event_log_storage.set_concurrency_slots(pool.name, pool.limit)
    return len(limits)


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
    import dagster as dg

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
