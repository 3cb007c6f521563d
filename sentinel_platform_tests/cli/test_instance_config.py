"""The Dagster instance ``sentinel up`` configures: ``dagster.yaml`` rendered from the
settings (storage, run queue, pools at run granularity), who may rewrite it and when a
storage switch is refused (pure, from tables), the publish pools (declared by every
stream's publish asset, limited in the instance's database), and the settings that drive
it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from sentinel_platform.cli.dagster_home import (
    LEGACY_DAGSTER_YAML,
    MANAGED_HEADER,
    POSTGRES_ENV,
    DagsterHomeError,
    ensure_dagster_home,
    instance_config,
    plan_dagster_yaml,
    render_dagster_yaml,
    storage_kind,
)
from sentinel_platform.cli.pools import ensure_pool_limits, publish_pool_limits
from sentinel_platform.cli.up_instance import check_postgres
from sentinel_platform.registry import stream_specs
from sentinel_platform.settings import Settings, SettingsError, load_settings
from sentinel_platform_tests.harness.postgres import PASSWORD, PASSWORD_IN_URL

PG_URL = f"postgresql+psycopg2://sentinel:{PASSWORD_IN_URL}@db.internal:5432/dagster"


def _settings(tmp_path: Path, **values: object) -> Settings:
    return load_settings(home=tmp_path / "home", **values)


def test_sqlite_config_has_the_run_queue_and_no_storage_section(tmp_path: Path) -> None:
    config = instance_config(_settings(tmp_path, dagster_max_concurrent_runs=3))
    assert "storage" not in config  # Dagster's default: SQLite files in DAGSTER_HOME
    assert config["run_coordinator"] == {  # Dagster's own: no platform code in the daemon
        "module": "dagster.core.run_coordinator",
        "class": "QueuedRunCoordinator",
        "config": {"dequeue_interval_seconds": 2},
    }
    assert config["concurrency"] == {
        "runs": {"max_concurrent_runs": 3},
        # a run waits queued for every pool of its plan, not started and blocked inside
        "pools": {"granularity": "run", "op_granularity_run_buffer": 0},
    }


def test_postgres_config_names_the_variable_and_never_holds_the_url(tmp_path: Path) -> None:
    text = render_dagster_yaml(_settings(tmp_path, dagster_postgres_url=PG_URL))
    assert yaml.safe_load(text)["storage"] == {"postgres": {"postgres_url": {"env": POSTGRES_ENV}}}
    assert PASSWORD_IN_URL not in text and PASSWORD not in text and "db.internal" not in text
    assert text.startswith(MANAGED_HEADER)
    assert storage_kind(text) == "postgres"


def test_dagster_loads_the_rendered_config(tmp_path: Path) -> None:
    """Dagster 1.13 itself accepts the file: its queued coordinator, the run limit, pools at
    run granularity with no slot buffer, SQLite storage."""
    import dagster as dg

    home = ensure_dagster_home(tmp_path / "dagster", _settings(tmp_path))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_coordinator) is dg.QueuedRunCoordinator
        concurrency = instance.get_concurrency_config()
        assert concurrency.pool_config.pool_granularity.value == "run"  # an enum
        queue = concurrency.run_queue_config
        assert queue is not None
        assert queue.max_concurrent_runs == max(2, (os.cpu_count() or 2) // 2)
        assert queue.should_block_op_concurrency_limited_runs
        assert queue.op_concurrency_slot_buffer == 0 and not queue.tag_concurrency_limits
        # a run that never starts is failed, and a killed run's pool slots are freed
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds == 300
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] > 0


def test_every_publish_asset_declares_its_streams_pool() -> None:
    """The code location's publish assets (the factory's) are in their stream's pool, the
    one ``sentinel up`` limits; the demo's asset holds both streams' pools."""
    import dagster as dg

    from sentinel_platform.definitions import build_definitions

    graph = build_definitions().resolve_asset_graph()
    specs = stream_specs()
    assert [spec.pool for spec in specs] == [
        "sentinel/publish/transactions",
        "sentinel/publish/axioms",
    ]
    for spec in specs:
        assets_def = graph.get(dg.AssetKey(spec.asset)).assets_def
        assert assets_def.op.pool == spec.pool, spec.name
    demo = graph.get(dg.AssetKey("demo_traffic")).assets_def
    pools = {op.pool for op in demo.node_def.iterate_op_defs()}
    assert pools == {spec.pool for spec in specs}


def test_sentinel_up_sets_one_slot_per_publish_pool_idempotently(tmp_path: Path) -> None:
    """The limits live in the instance's database: set once, unchanged when set again, and
    an operator's other limit on a publish pool is put back to one slot."""
    import dagster as dg

    settings = _settings(tmp_path)
    home = ensure_dagster_home(tmp_path / "dagster", settings)
    limits = publish_pool_limits(stream_specs())
    assert limits == {"sentinel/publish/transactions": 1, "sentinel/publish/axioms": 1}
    assert ensure_pool_limits(home, settings, limits) == limits
    assert ensure_pool_limits(home, settings, limits) == {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.event_log_storage.set_concurrency_slots("sentinel/publish/axioms", 3)
    assert ensure_pool_limits(home, settings, limits) == {"sentinel/publish/axioms": 1}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        stored = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
    assert stored == limits


#: ``dagster.yaml`` as earlier versions wrote it, with the header deleted (owned).
OLD_OWNED = """\
run_coordinator:
  module: sentinel_platform.cli.run_queue
  class: StreamRunCoordinator
concurrency:
  runs:
    max_concurrent_runs: 2
    tag_concurrency_limits:
    - key: sentinel/publishes.transactions
      limit: 1
"""


def test_an_owned_file_naming_the_old_coordinator_gets_what_to_change(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(OLD_OWNED)
    with pytest.raises(DagsterHomeError) as raised:
        ensure_dagster_home(home, _settings(tmp_path))
    message = str(raised.value)
    assert str(home) in message and "dagster.yaml" in message
    assert "sentinel_platform.cli.run_queue.StreamRunCoordinator" in message
    assert "QueuedRunCoordinator" in message and "granularity: run" in message
    assert (home / "dagster.yaml").read_text() == OLD_OWNED  # never rewritten


def test_a_managed_file_of_the_old_coordinator_is_rewritten(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(f"{MANAGED_HEADER}\n{OLD_OWNED}")
    settings = _settings(tmp_path)
    ensure_dagster_home(home, settings)
    text = (home / "dagster.yaml").read_text()
    assert text == render_dagster_yaml(settings) and "run_queue" not in text


def test_the_instance_turns_dagsters_new_user_prompts_off(tmp_path: Path) -> None:
    """No "Join the Dagster community" dialog over the first page: the webserver asks the
    instance (``nux_enabled``) before showing it."""
    import dagster as dg

    home = ensure_dagster_home(tmp_path / "dagster", _settings(tmp_path))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.nux_enabled is False
        assert instance.telemetry_enabled is False


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("telemetry:\n  enabled: false\n", "sqlite"),
        ("storage:\n  sqlite:\n    base_dir: /x\n", "sqlite"),
        ("storage:\n  postgres:\n    postgres_url: {env: X}\n", "postgres"),
        ("run_storage:\n  module: m\n  class: C\n", "other"),
        ("storage:\n  mysql:\n    mysql_url: x\n", "other"),
        ("- not a mapping\n", "other"),
        ("{unclosed", "other"),
    ],
)
def test_storage_kind(text: str, kind: str) -> None:
    assert storage_kind(text) == kind


SQLITE_MANAGED = f"{MANAGED_HEADER}\ntelemetry: {{enabled: false}}\n"
PG_MANAGED = f"{MANAGED_HEADER}\nstorage:\n  postgres:\n    postgres_url: {{env: {POSTGRES_ENV}}}\n"
SQLITE_OWNED = "telemetry: {enabled: false}\n"
PG_OWNED = f"storage:\n  postgres:\n    postgres_url: {{env: {POSTGRES_ENV}}}\n"


@pytest.mark.parametrize(
    ("existing", "desired", "wants_pg", "history", "action", "says"),
    [
        # a new home: written, unless SQLite history would be orphaned
        (None, SQLITE_MANAGED, False, False, "write", ""),
        (None, PG_MANAGED, True, False, "write", ""),
        (None, PG_MANAGED, True, True, "refuse", "sentinel migrate-storage"),
        # managed files follow the settings
        (SQLITE_MANAGED, SQLITE_MANAGED, False, True, "keep", ""),
        (SQLITE_MANAGED, SQLITE_MANAGED + "x: 1\n", False, True, "write", ""),
        (LEGACY_DAGSTER_YAML, SQLITE_MANAGED, False, True, "write", ""),
        (SQLITE_MANAGED, PG_MANAGED, True, False, "write", ""),  # nothing to lose yet
        (PG_MANAGED, PG_MANAGED, True, True, "keep", ""),  # migrated: SQLite files unused
        # never a silent switch with history, in either direction
        (SQLITE_MANAGED, PG_MANAGED, True, True, "refuse", "sentinel migrate-storage"),
        (LEGACY_DAGSTER_YAML, PG_MANAGED, True, True, "refuse", "sentinel migrate-storage"),
        (PG_MANAGED, SQLITE_MANAGED, False, False, "refuse", f"{POSTGRES_ENV} is not set"),
        (PG_OWNED, SQLITE_MANAGED, False, True, "refuse", f"{POSTGRES_ENV} is not set"),
        # files the operator owns are used as written, storage checked
        (SQLITE_OWNED, SQLITE_MANAGED, False, True, "keep", "not managed"),
        (PG_OWNED, PG_MANAGED, True, False, "keep", "not managed"),
        (SQLITE_OWNED, PG_MANAGED, True, False, "refuse", "add `storage: postgres"),
        # an owned file of earlier versions names a coordinator that no longer exists
        (OLD_OWNED, SQLITE_MANAGED, False, True, "refuse", "QueuedRunCoordinator"),
        (f"{MANAGED_HEADER}\n{OLD_OWNED}", SQLITE_MANAGED, False, True, "write", ""),
    ],
)
def test_plan_dagster_yaml(
    existing: str | None, desired: str, wants_pg: bool, history: bool, action: str, says: str
) -> None:
    plan = plan_dagster_yaml(existing, desired, wants_pg, history)
    assert plan.action == action
    assert says in plan.reason


def test_a_home_with_sqlite_history_is_not_switched_silently(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    ensure_dagster_home(home, _settings(tmp_path))
    (home / "schedules").mkdir()
    (home / "schedules" / "schedules.db").write_bytes(b"cursors live here")
    before = (home / "dagster.yaml").read_text()
    with pytest.raises(DagsterHomeError, match="sentinel migrate-storage"):
        ensure_dagster_home(home, _settings(tmp_path, dagster_postgres_url=PG_URL))
    assert (home / "dagster.yaml").read_text() == before


@pytest.mark.parametrize(
    "url",
    [
        f"postgres://sentinel:{PASSWORD_IN_URL}@db:5432/dagster",  # SQLAlchemy refuses it
        f"postgresql://sentinel:{PASSWORD_IN_URL}@db:5432/dagster",  # psycopg 3: unsupported
        f"mysql://sentinel:{PASSWORD_IN_URL}@db/dagster",
        f"postgresql+psycopg2://sentinel:{PASSWORD_IN_URL}@db:notaport/dagster",
    ],
)
def test_a_bad_postgres_url_names_the_setting_and_hides_the_password(
    tmp_path: Path, url: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        _settings(tmp_path, dagster_postgres_url=url)
    message = str(raised.value)
    assert "SENTINEL_DAGSTER_POSTGRES_URL" in message
    assert PASSWORD_IN_URL not in message and PASSWORD not in message


def test_an_unreachable_postgres_fails_start_up_naming_the_setting(tmp_path: Path) -> None:
    from sentinel_platform.redis_server import free_port

    url = f"postgresql+psycopg2://sentinel:{PASSWORD_IN_URL}@127.0.0.1:{free_port()}/dagster"
    problem = check_postgres(_settings(tmp_path, dagster_postgres_url=url))
    assert problem is not None
    assert problem.startswith(
        "SENTINEL_DAGSTER_POSTGRES_URL=postgresql+psycopg2://sentinel:***@127.0.0.1"
    )
    assert "cannot connect to PostgreSQL" in problem
    assert PASSWORD_IN_URL not in problem and PASSWORD not in problem
    assert check_postgres(_settings(tmp_path)) is None


def test_max_concurrent_runs_is_machine_sized_unless_set(tmp_path: Path) -> None:
    assert _settings(tmp_path).max_concurrent_runs == max(2, (os.cpu_count() or 2) // 2)
    assert _settings(tmp_path, dagster_max_concurrent_runs=1).max_concurrent_runs == 1
    with pytest.raises(SettingsError, match="SENTINEL_DAGSTER_MAX_CONCURRENT_RUNS"):
        _settings(tmp_path, dagster_max_concurrent_runs=0)
