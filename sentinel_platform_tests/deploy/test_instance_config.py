"""The Dagster instance ``sentinel up`` configures: ``dagster.yaml`` rendered from the
settings (storage, run queue), who may rewrite it and when a storage switch is refused
(pure, from tables), the run queue's tags, and the settings that drive it."""

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
from sentinel_platform.cli.run_queue import (
    StreamRunCoordinator,
    queue_tags,
    streams_published,
)
from sentinel_platform.cli.up import check_postgres
from sentinel_platform.settings import Settings, SettingsError, load_settings
from sentinel_platform_tests.deploy.postgres import PASSWORD, PASSWORD_IN_URL

PG_URL = f"postgresql+psycopg2://sentinel:{PASSWORD_IN_URL}@db.internal:5432/dagster"


def _settings(tmp_path: Path, **values: object) -> Settings:
    return load_settings(home=tmp_path / "home", **values)


def test_sqlite_config_has_the_run_queue_and_no_storage_section(tmp_path: Path) -> None:
    config = instance_config(_settings(tmp_path, dagster_max_concurrent_runs=3))
    assert "storage" not in config  # Dagster's default: SQLite files in DAGSTER_HOME
    assert config["run_coordinator"] == {
        "module": "sentinel_platform.cli.run_queue",
        "class": "StreamRunCoordinator",
        "config": {"dequeue_interval_seconds": 2},
    }
    assert config["concurrency"]["runs"] == {
        "max_concurrent_runs": 3,
        "tag_concurrency_limits": [
            {"key": "sentinel/publishes.transactions", "limit": 1},
            {"key": "sentinel/publishes.axioms", "limit": 1},
        ],
    }


def test_postgres_config_names_the_variable_and_never_holds_the_url(tmp_path: Path) -> None:
    text = render_dagster_yaml(_settings(tmp_path, dagster_postgres_url=PG_URL))
    assert yaml.safe_load(text)["storage"] == {"postgres": {"postgres_url": {"env": POSTGRES_ENV}}}
    assert PASSWORD_IN_URL not in text and PASSWORD not in text and "db.internal" not in text
    assert text.startswith(MANAGED_HEADER)
    assert storage_kind(text) == "postgres"


def test_dagster_loads_the_rendered_config(tmp_path: Path) -> None:
    """Dagster 1.13 itself accepts the file: the coordinator, its limits, SQLite storage."""
    import dagster as dg

    home = ensure_dagster_home(tmp_path / "dagster", _settings(tmp_path))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.run_coordinator, StreamRunCoordinator)
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None
        assert queue.max_concurrent_runs == max(2, (os.cpu_count() or 2) // 2)
        assert {limit["key"] for limit in queue.tag_concurrency_limits} == {
            "sentinel/publishes.transactions",
            "sentinel/publishes.axioms",
        }


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
    ("steps", "streams"),
    [
        (["raw_transactions", "enriched_transactions", "transaction_stream"], ["transactions"]),
        (["axiom_stream"], ["axioms"]),
        (["transaction_stream", "axiom_stream", "telemetry_readings"], ["transactions", "axioms"]),
        (["raw_transactions", "compliance_report"], []),
        (["transaction_stream_lag_check"], []),  # exact step keys only
    ],
)
def test_streams_published(steps: list[str], streams: list[str]) -> None:
    assert streams_published(steps) == streams


@pytest.mark.parametrize(
    ("existing", "streams", "added"),
    [
        (
            {},
            ["transactions"],
            {"sentinel/publishes.transactions": "true", "sentinel/stream": "transactions"},
        ),
        (
            {"sentinel/stream": "transactions"},
            ["transactions"],
            {"sentinel/publishes.transactions": "true"},
        ),
        (
            {},
            ["transactions", "axioms"],
            {"sentinel/publishes.transactions": "true", "sentinel/publishes.axioms": "true"},
        ),
        ({"sentinel/publishes.axioms": "true", "sentinel/stream": "axioms"}, ["axioms"], {}),
        ({"dagster/partition": "2026-03-01"}, [], {}),
    ],
)
def test_queue_tags(existing: dict[str, str], streams: list[str], added: dict[str, str]) -> None:
    assert queue_tags(existing, streams) == added


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
