"""The code location loads, validates, and wires the data side as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sentinel_platform.resources.spark import spark_config
from sentinel_platform.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate_passes(settings_env: dict[str, str]) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dagster",
            "definitions",
            "validate",
            "-m",
            "sentinel_platform.definitions",
        ],
        cwd=ROOT,
        env=settings_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation successful" in done.stdout + done.stderr


def test_data_assets_jobs_and_resources_are_registered(settings: Settings) -> None:
    from sentinel_platform.definitions import defs

    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {
        "raw_transactions",
        "enriched_transactions",
        "transaction_stream",
        "telemetry_readings",
        "axioms",
        "axiom_stream",
        "transaction_verdicts",
        "compliance_events",
        "compliance_report",
        "verdict_quality",
    } <= keys
    for job in (
        "publish_transactions",
        "publish_axioms",
        "report_compliance",
        "report_quality",
        "rescreen_transactions",
        "rescreen_axioms",
    ):
        assert defs.resolve_job_def(job) is not None
    assert {"pyspark", "redis_publisher", "parquet_io_manager"} <= set(defs.resources or {})


def test_spark_config_takes_master_and_extra_pairs_from_settings() -> None:
    conf = spark_config(
        load_settings(spark_master="spark://10.0.0.5:7077", spark_conf="spark.executor.memory=2g")
    )
    assert conf["spark.master"] == "spark://10.0.0.5:7077"
    assert conf["spark.executor.memory"] == "2g"
    assert conf["spark.sql.session.timeZone"] == "UTC" and conf["spark.ui.enabled"] == "false"
    assert (
        spark_config(load_settings(spark_conf="spark.ui.enabled=true"))["spark.ui.enabled"]
        == "true"
    )


def test_spark_connect_url_becomes_spark_remote() -> None:
    conf = spark_config(load_settings(spark_master="sc://127.0.0.1:15002"))
    assert conf["spark.remote"] == "sc://127.0.0.1:15002" and "spark.master" not in conf


@pytest.mark.parametrize("bad", ["spark.ui.enabled", "a=b,novalue"])
def test_bad_spark_conf_names_the_variable(bad: str) -> None:
    with pytest.raises(Exception, match="SENTINEL_SPARK_CONF"):
        load_settings(spark_conf=bad)


def test_every_job_and_the_uis_materialize_run_a_run_in_one_spark_session(
    settings: Settings,
) -> None:
    from sentinel_platform.definitions import defs
    from sentinel_platform.domains.shared.execution import spark_executor

    jobs = [defs.resolve_implicit_global_asset_job_def()] + [
        defs.resolve_job_def(name)
        for name in (
            "publish_transactions",
            "publish_axioms",
            "report_compliance",
            "report_quality",
            "demo_publish",
        )
    ]
    for job in jobs:
        assert job.executor_def is spark_executor, job.name
        resolved = job.run_config_schema.config_type.fields["execution"].default_value
        assert list(resolved["config"]) == ["in_process"], (job.name, resolved)
