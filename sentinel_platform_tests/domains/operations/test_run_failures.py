"""Every failed run of the code location alerts, with the failing step and its error line."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.operations.run_failures import (
    ERROR_LINE_CHARS,
    SENSOR_NAME,
    build_run_failure_sensor,
    clip,
    error_sentence,
    root_error,
    run_stream,
    streams_published,
)
from sentinel_platform.resources.io_manager import MissingUpstreamPartitionError
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.operations import DAILY, read_alerts

SPARK_LIKE_ERROR = (
    "[PATH_NOT_FOUND] Path does not exist: file:/data/axioms/2026-01-05.parquet. SQLSTATE: 42K03"
)


@dg.asset(partitions_def=DAILY)
def broken_stream() -> None:
    raise RuntimeError(f"{SPARK_LIKE_ERROR}\n\tat py4j.Protocol.getReturnValue(...)")


_MISSING = MissingUpstreamPartitionError(
    "enriched_transactions", "2026-01-05", "file:///data/enriched_transactions/2026-01-05"
)


@dg.asset(partitions_def=DAILY)
def stream_without_input() -> None:
    """Fails as a stream asset whose input partition was never built."""
    raise _MISSING


broken_publish = dg.define_asset_job(
    "publish_broken", selection=[broken_stream], partitions_def=DAILY
)


def _failure_tick(
    sensor: dg.SensorDefinition, instance: dg.DagsterInstance, resources: dict[str, Any], cursor
) -> Any:
    """One real evaluation of the run-failure sensor against the instance's event log."""
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as ctx:
        return sensor.evaluate_tick(ctx)


def test_failed_publish_run_raises_alert(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    sensor = build_run_failure_sensor()
    resources = {"alerts": make_resources()["alerts"]}
    cursor = _failure_tick(sensor, dagster_instance, resources, None).cursor
    defs = dg.Definitions(assets=[broken_stream], jobs=[broken_publish])
    result = defs.resolve_job_def("publish_broken").execute_in_process(
        instance=dagster_instance,
        partition_key="2026-01-05",
        tags={"sentinel/stream": "transactions"},
        raise_on_error=False,
    )
    assert not result.success
    _failure_tick(sensor, dagster_instance, resources, cursor)

    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.severity == "error" and alert.stream == "transactions"
    assert alert.details["run_id"] == result.run_id
    assert alert.details["job"] == "publish_broken" and alert.details["partition"] == "2026-01-05"
    assert "publish_broken" in alert.summary


def test_failed_ui_materialisation_alerts_with_failing_step_and_first_error_line(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    """What the UI's Materialize launches is the implicit asset job: it must alert too."""
    sensor = build_run_failure_sensor()
    resources = {"alerts": make_resources()["alerts"]}
    cursor = _failure_tick(sensor, dagster_instance, resources, None).cursor
    defs = dg.Definitions(assets=[broken_stream])
    asset_job = defs.resolve_implicit_global_asset_job_def()
    assert asset_job.name == "__ASSET_JOB"
    result = asset_job.execute_in_process(
        instance=dagster_instance, partition_key="2026-01-05", raise_on_error=False
    )
    assert not result.success
    _failure_tick(sensor, dagster_instance, resources, cursor)

    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.details["run_id"] == result.run_id and alert.details["job"] == "__ASSET_JOB"
    assert alert.details["failed_steps"] == [
        {"step": "broken_stream", "error": f"RuntimeError: {SPARK_LIKE_ERROR}"}
    ]
    assert f"step broken_stream failed: RuntimeError: {SPARK_LIKE_ERROR}" in alert.summary
    assert "py4j" not in alert.summary


@dg.asset(name="transaction_stream", partitions_def=DAILY, pool="sentinel/publish/transactions")
def broken_transaction_publish() -> None:
    raise RuntimeError("publisher down")


def test_failed_ui_publish_names_its_stream_from_the_runs_plan(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    """A click on Materialize (the implicit asset job, no job tags, no run queue in between)
    of a stream's publish asset: the alert names the stream, read from the run's pools."""
    sensor = build_run_failure_sensor()
    resources = {"alerts": make_resources()["alerts"]}
    cursor = _failure_tick(sensor, dagster_instance, resources, None).cursor
    defs = dg.Definitions(assets=[broken_transaction_publish])
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=dagster_instance, partition_key="2026-01-05", raise_on_error=False
    )
    assert not result.success and "sentinel/stream" not in result.dagster_run.tags
    _failure_tick(sensor, dagster_instance, resources, cursor)

    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.stream == "transactions", alert


def _run(
    pools: set[str] | None = None,
    assets: list[str] | None = None,
    steps: list[str] | None = None,
    tags: dict[str, str] | None = None,
) -> Any:
    """What ``streams_published`` reads of a ``DagsterRun``, with the attributes' names:
    the run's plan's pools (Dagster builds that record in a private module), its asset
    selection, its steps and its tags."""
    concurrency = SimpleNamespace(all_pools=pools) if pools is not None else None
    return SimpleNamespace(
        asset_selection=frozenset(dg.AssetKey(a) for a in assets) if assets else None,
        step_keys_to_execute=steps,
        tags=tags or {},
        run_op_concurrency=concurrency,
    )


TX_POOL, AX_POOL = "sentinel/publish/transactions", "sentinel/publish/axioms"


@pytest.mark.parametrize(
    ("run", "streams", "stream"),
    [
        (_run(pools={TX_POOL}), ["transactions"], "transactions"),
        (_run(pools={AX_POOL, TX_POOL}), ["transactions", "axioms"], None),  # the demo
        (_run(pools={"other/pool"}), [], None),
        (_run(assets=["raw_transactions", "enriched_transactions", "transaction_stream"]),
         ["transactions"], "transactions"),
        (_run(assets=["axioms", "compliance_report"]), [], None),  # not the publish asset
        (_run(steps=["axiom_stream"]), ["axioms"], "axioms"),
        (_run(steps=["transaction_stream_lag_check"]), [], None),  # exact names only
        (_run(pools={AX_POOL}, tags={"sentinel/stream": "axioms"}), ["axioms"], "axioms"),
        (_run(tags={"sentinel/stream": "transactions"}), [], "transactions"),  # the lag gate's
    ],
)  # fmt: skip
def test_the_stream_of_a_run_comes_from_its_plan_or_selection(
    run: Any, streams: list[str], stream: str | None
) -> None:
    assert streams_published(run) == streams
    assert run_stream(run) == stream


@dataclass(frozen=True)
class RecordedError:
    """The fields of an error as Dagster records it for a failed step."""

    message: str
    cls_name: str | None
    cause: RecordedError | None = None


def _error(cls_name: str, message: str, cause: RecordedError | None = None) -> RecordedError:
    return RecordedError(message=message, cls_name=cls_name, cause=cause)


SPARK = _error("AnalysisException", f"{SPARK_LIKE_ERROR}\n\nJVM stacktrace: ...")


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (_error("DagsterExecutionStepExecutionError", "Error occurred ...", SPARK),
         f"AnalysisException: {SPARK_LIKE_ERROR}"),
        (_error("DagsterExecutionStepExecutionError", "Error occurred ...",
                _error("MissingInput", "MissingInput: no axioms for 2026-01-05", SPARK)),
         "MissingInput: no axioms for 2026-01-05"),
        (_error("RuntimeError", "\n\n  RuntimeError: boom\nmore"), "RuntimeError: boom"),
        (None, ""),
    ],
)  # fmt: skip
def test_alert_names_the_error_the_step_raised_not_dagsters_wrapper(
    error: RecordedError | None, line: str
) -> None:
    assert root_error(error) == line


def test_failed_run_alert_is_one_sentence_naming_the_error_type_once(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    """A ``Failure`` is recorded as ``pkg.module.Type: message``: the summary says the type
    once and cuts a long message at a word, with an ellipsis."""
    sensor = build_run_failure_sensor()
    resources = {"alerts": make_resources()["alerts"]}
    cursor = _failure_tick(sensor, dagster_instance, resources, None).cursor
    job = dg.Definitions(assets=[stream_without_input]).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=dagster_instance, partition_key="2026-01-05", raise_on_error=False
    )
    assert not result.success
    _failure_tick(sensor, dagster_instance, resources, cursor)

    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    (step,) = alert.details["failed_steps"]
    error = step["error"]
    assert error.count("MissingUpstreamPartitionError") == 1, error
    assert error.startswith("MissingUpstreamPartitionError: missing upstream data: "), error
    assert "sentinel_platform.resources" not in error
    assert len(error) <= ERROR_LINE_CHARS and error.endswith("…"), error
    full = f"MissingUpstreamPartitionError: {_MISSING.description}"
    kept = error.removesuffix("…")
    assert full.startswith(kept) and not full[len(kept)].isalnum(), error  # a word boundary
    assert f"step stream_without_input failed: {error}" in alert.summary


LONG = "missing upstream data: partition 2026-01-05 of asset 'raw_transactions' was never " * 3


@pytest.mark.parametrize(
    ("cls_name", "message", "sentence"),
    [
        ("MissingUpstreamPartitionError",
         "sentinel_platform.resources.io_manager.MissingUpstreamPartitionError: no data here",
         "MissingUpstreamPartitionError: no data here"),
        ("MissingInput", "MissingInput: no axioms", "MissingInput: no axioms"),
        ("MissingInput", "MissingInput: MissingInput: twice", "MissingInput: twice"),
        ("RuntimeError", "boom", "RuntimeError: boom"),
        ("ValueError", "KeyError: not the type", "ValueError: KeyError: not the type"),
        ("AnalysisException", "[PATH_NOT_FOUND] a: b", "AnalysisException: [PATH_NOT_FOUND] a: b"),
        ("Failure", "", "Failure"),
        (None, "  \n  just a line\nmore", "just a line"),
        (None, None, ""),
    ],
)  # fmt: skip
def test_error_sentence_says_the_type_once(
    cls_name: str | None, message: str | None, sentence: str
) -> None:
    assert error_sentence(cls_name, message) == sentence


@pytest.mark.parametrize(
    ("text", "limit", "clipped"),
    [
        ("short enough", 20, "short enough"),
        ("exactly twenty chars", 20, "exactly twenty chars"),
        ("cut (nothing at file:/x) here", 12, "cut…"),
        ("one two three four", 12, "one two…"),
        ("one two three four", 14, "one two three…"),
        ("one two, three", 12, "one two…"),
        ("abcdefghijklmnopqrstuvwxyz", 10, "abcdefghi…"),
        (LONG, ERROR_LINE_CHARS, LONG[:LONG.rindex(" ", 0, 199)].rstrip(" ,;:.-(") + "…"),
    ],
)  # fmt: skip
def test_clip_cuts_at_a_word_boundary_with_an_ellipsis(text: str, limit: int, clipped: str) -> None:
    result = clip(text, limit)
    assert result == clipped
    assert len(result) <= limit
