"""``DAGSTER_HOME`` under ``SENTINEL_HOME``, and the ``dagster.yaml`` of the instance.

``dagster dev`` without a ``DAGSTER_HOME`` keeps everything in a temporary directory, and
a sensor that forgets its cursor on every restart re-alerts on old dead letters. So the
instance always lives in ``$SENTINEL_HOME/dagster``, and its ``dagster.yaml`` says:

- **storage**: PostgreSQL (``dagster-postgres``: runs, events, schedules and sensor
  state) when ``SENTINEL_DAGSTER_POSTGRES_URL`` is set; the file names the variable
  (``postgres_url: {env: ...}``), so the password is read from the environment by each
  Dagster process and never written anywhere. Without it, SQLite files in the home.
- **the run queue**: Dagster's ``QueuedRunCoordinator``, at most ``max_concurrent_runs``
  runs (each a Spark driver JVM) at once; and Dagster's concurrency **pools** at run
  granularity: each stream's publish asset declares its pool, a run waits in the queue
  until every pool its plan uses has a free slot, and holds them until it ends. At the
  default op granularity the queue would hold a run only while all its *root* steps'
  pools are full, and the publish step is not a root step of a publish job: the run
  would start (a JVM, a run slot) and block inside. The per-pool limits (one slot per
  stream) live in the instance's database, not here: ``sentinel up`` sets them
  (:mod:`sentinel_platform.cli.pools`).
- **run monitoring** (the daemon's): a run whose worker never came up is failed after
  :data:`RUN_MONITORING`'s start timeout, one stuck cancelling is marked cancelled, and
  the pool slots of a run that ended without freeing them (its worker killed) are freed.
  Without it such a run holds one of the few run slots and its stream's publish pool for
  good, and every later publish of that stream waits in the queue in silence.
- **no prompts**: telemetry off, and ``nux`` off (no "Join the Dagster community" dialog).

Who owns the file: one that starts with :data:`MANAGED_HEADER` (or is the unedited file
of earlier versions) is rewritten from the settings at every start, so it follows them.
Delete that first line to own the file: it is then never touched again, only checked;
an owned file that still names the run coordinator of earlier versions (removed: pools
replace it) is refused with what to change, instead of failing in Dagster's import.

Switching storage never happens silently. A home whose SQLite files hold history (runs,
sensor cursors, schedule state) is not pointed at PostgreSQL until ``sentinel
migrate-storage`` has copied that history over (:mod:`sentinel_platform.cli.migrate`):
a sensor that lost its cursor would re-alert every old dead letter. Likewise a home on
PostgreSQL refuses to start without the URL instead of starting empty on SQLite.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from sentinel_platform.settings import Settings, load_settings

POSTGRES_ENV = "SENTINEL_DAGSTER_POSTGRES_URL"
MANAGED_HEADER = "# Managed by `sentinel up`: rewritten from the settings at every start."
#: What earlier versions wrote once; a file still equal to it was never edited.
LEGACY_DAGSTER_YAML = """\
# Written by `sentinel up` because none existed; edit freely, it is not overwritten.
telemetry:
  enabled: false
# Each run of the Spark assets starts a JVM: keep a small machine responsive.
concurrency:
  runs:
    max_concurrent_runs: 2
"""
#: Seconds between two passes of the daemon's run queue (Dagster's default is 5).
DEQUEUE_INTERVAL_S = 2
#: Dagster's own queued run coordinator (no code of the platform in the webserver's or
#: the daemon's instance).
RUN_COORDINATOR = {"module": "dagster.core.run_coordinator", "class": "QueuedRunCoordinator"}
#: The run coordinator earlier versions named (``module.Class``); an owned file naming it
#: would fail in every Dagster process with an import error.
OLD_RUN_COORDINATOR = "sentinel_platform.cli.run_queue"
#: A run waits in the queue for every pool of its plan (not only its root steps').
POOLS = {"granularity": "run", "op_granularity_run_buffer": 0}

#: Dagster's run monitoring, sized for a Spark run worker on a loaded 2-core machine (its
#: start is seconds; minutes mean it never came up). The default launcher cannot resume a
#: run, hence no resume attempts.
RUN_MONITORING = {
    "enabled": True,
    "start_timeout_seconds": 300,
    "cancel_timeout_seconds": 180,
    "max_resume_run_attempts": 0,
    "poll_interval_seconds": 30,
    "free_slots_after_run_end_seconds": 120,
}

StorageKind = Literal["sqlite", "postgres", "other"]


class DagsterHomeError(RuntimeError):
    """The home cannot be used with these settings; the message says what to do."""


def instance_config(settings: Settings) -> dict[str, Any]:
    """``dagster.yaml`` as a mapping: telemetry and the new-user prompts off, the storage,
    the run queue.

    ``nux: enabled: false`` is Dagster's deployment setting for its new-user experience:
    without it a fresh home greets every first visit with a "Join the Dagster community"
    dialog over the first page, an e-mail prompt an operator of this platform has no use for.
    """
    config: dict[str, Any] = {"telemetry": {"enabled": False}, "nux": {"enabled": False}}
    if settings.dagster_postgres_url_value:
        config["storage"] = {"postgres": {"postgres_url": {"env": POSTGRES_ENV}}}
    config["run_coordinator"] = {
        **RUN_COORDINATOR,
        "config": {"dequeue_interval_seconds": DEQUEUE_INTERVAL_S},
    }
    config["concurrency"] = {
        "runs": {"max_concurrent_runs": settings.max_concurrent_runs},
        "pools": dict(POOLS),
    }
    config["run_monitoring"] = dict(RUN_MONITORING)
    return config


def render_dagster_yaml(settings: Settings) -> str:
    body = yaml.safe_dump(instance_config(settings), sort_keys=False, default_flow_style=False)
    return (
        f"{MANAGED_HEADER}\n"
        "# Delete the line above to own this file (it is then only checked, never rewritten).\n"
        "# Storage: SENTINEL_DAGSTER_POSTGRES_URL (PostgreSQL, read from the environment), else\n"
        "# SQLite here. Run queue: SENTINEL_DAGSTER_MAX_CONCURRENT_RUNS runs at once (each a\n"
        "# Spark JVM); a run waits for its pools (granularity: run), one slot per publish pool\n"
        "# (`sentinel/publish/<stream>`, set in the database by `sentinel up`). Run monitoring\n"
        "# fails a run that never started and frees the pool slots a killed run left held.\n"
        f"{body}"
    )


def storage_kind(text: str) -> StorageKind:
    """Where a ``dagster.yaml`` keeps runs, events and schedules."""
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return "other"
    if not isinstance(config, dict):
        return "other"
    if any(key in config for key in ("run_storage", "event_log_storage", "schedule_storage")):
        return "other"
    storage = config.get("storage")
    if storage is None:
        return "sqlite"
    if isinstance(storage, dict) and "postgres" in storage:
        return "postgres"
    if isinstance(storage, dict) and "sqlite" in storage:
        return "sqlite"
    return "other"


def is_managed(text: str) -> bool:
    return text.startswith(MANAGED_HEADER) or text == LEGACY_DAGSTER_YAML


@dataclass(frozen=True)
class HomePlan:
    """What to do with ``dagster.yaml``: write the rendered file, keep it, or refuse."""

    action: Literal["write", "keep", "refuse"]
    reason: str = ""


def plan_dagster_yaml(
    existing: str | None, desired: str, wants_postgres: bool, sqlite_history: bool
) -> HomePlan:
    """The decision, pure: the file now (None: none yet), the file the settings want, whether
    ``SENTINEL_DAGSTER_POSTGRES_URL`` is set, and whether the home's SQLite files hold
    history."""
    if existing is None:
        if wants_postgres and sqlite_history:
            return HomePlan("refuse", _unmigrated())
        return HomePlan("write")
    current = storage_kind(existing)
    if current == "postgres" and not wants_postgres:
        return HomePlan(
            "refuse",
            f"dagster.yaml keeps the instance in PostgreSQL but {POSTGRES_ENV} is not set: "
            "set it (every Dagster process reads it), or to start over on SQLite remove "
            "dagster.yaml",
        )
    if current == "sqlite" and wants_postgres:
        if sqlite_history:
            return HomePlan("refuse", _unmigrated())
        if not is_managed(existing):
            return HomePlan(
                "refuse",
                f"{POSTGRES_ENV} is set but dagster.yaml (not managed by `sentinel up`) "
                f"keeps the instance in SQLite: add `storage: postgres: postgres_url: "
                f"{{env: {POSTGRES_ENV}}}` to it, or delete it to have it written",
            )
    if not is_managed(existing):
        if OLD_RUN_COORDINATOR in existing:
            return HomePlan("refuse", _old_coordinator())
        return HomePlan("keep", "dagster.yaml is not managed by `sentinel up`: used as written")
    return HomePlan("keep") if existing == desired else HomePlan("write")


def _old_coordinator() -> str:
    return (
        f"dagster.yaml (not managed by `sentinel up`) names the run coordinator "
        f"{OLD_RUN_COORDINATOR}.StreamRunCoordinator, which Dagster's concurrency pools "
        "replaced: set `run_coordinator:` to `module: dagster.core.run_coordinator`, "
        "`class: QueuedRunCoordinator`, remove the `sentinel/publishes.<stream>` entries of "
        "`tag_concurrency_limits`, and add `concurrency: pools: granularity: run` "
        "(`sentinel up` sets each publish pool's limit in the database); or delete the "
        "file to have it written"
    )


def _unmigrated() -> str:
    return (
        f"{POSTGRES_ENV} is set but this Dagster home keeps run history and sensor cursors "
        "in SQLite: run `sentinel migrate-storage` to copy them into PostgreSQL first (a "
        "sensor that lost its cursor re-alerts old dead letters), or move the home's "
        "history/ and schedules/ away to start PostgreSQL empty"
    )


def sqlite_history(path: Path) -> bool:
    """The home's SQLite storage holds something: run history or schedule/sensor state."""
    return any((path / name).is_dir() and any((path / name).iterdir()) for name in SQLITE_DIRS)


#: Where Dagster's SQLite storage keeps runs and events, and schedule and sensor state.
SQLITE_DIRS = ("history", "schedules")


def ensure_dagster_home(path: Path, settings: Settings | None = None) -> Path:
    """Create the home and write or check its ``dagster.yaml``; raise
    :class:`DagsterHomeError` when the settings and the home disagree on the storage."""
    path.mkdir(parents=True, exist_ok=True)
    config = path / "dagster.yaml"
    settings = settings or load_settings()
    desired = render_dagster_yaml(settings)
    existing = config.read_text() if config.exists() else None
    wants_postgres = bool(settings.dagster_postgres_url_value)
    plan = plan_dagster_yaml(existing, desired, wants_postgres, sqlite_history(path))
    if plan.action == "refuse":
        raise DagsterHomeError(f"{path}: {plan.reason}")
    if plan.action == "write":
        tmp = config.with_suffix(".yaml.tmp")
        tmp.write_text(desired)
        tmp.replace(config)
    return path
