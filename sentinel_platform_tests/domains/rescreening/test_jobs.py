"""A day's re-screening launched as the UI launches it: the ``rescreen_transactions`` job
executed by Dagster for one partition, on a real Valkey whose result stream the test
writes in the contract's shape."""

from __future__ import annotations

from typing import Any

import dagster as dg

from sentinel_platform.domains.rescreening.jobs import JOBS
from sentinel_platform.domains.shared.execution import spark_executor
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import QUEUE_FIELDS, payload_of
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.streams import sample_transaction

DAY = "2026-11-26"
OP = "queue_provisional_transactions"


def _verdict(source_id: str, day: str, **extra: str) -> dict[str, str]:
    """A transactions result entry as the worker writes it."""
    return {
        "txn_id": "t",
        "merchant": "acme",
        "amount": "12.00",
        "currency": "USD",
        "is_threat": "false",
        "risk_level": "low",
        "driver_used": "fallback",
        "processed_at": f"{day}T08:00:00.000Z",
        "source_message_id": source_id,
        "day": day,
        **extra,
    }


def _provisional(source_id: str, cause: str, day: str = DAY) -> dict[str, str]:
    return _verdict(source_id, day, fallback_cause=cause, provisional="true")


def _launch(settings: Settings, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """``rescreen_transactions`` for ``DAY``, as the location defines it, on the test Redis."""
    resource = SettingsResource(
        overrides={"redis_url": settings.redis_url_value, "home": str(settings.home_dir)}
    )
    defs = dg.Definitions(
        jobs=JOBS,
        resources={"redis_publisher": RedisPublisherResource(settings=resource)},
        executor=spark_executor,
    )
    job = defs.resolve_job_def("rescreen_transactions")
    return job.execute_in_process(partition_key=DAY, instance=instance, raise_on_error=False)


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    (output,) = [e for e in result.all_node_events if e.is_successful_output]
    assert output.step_output_data is not None
    return {name: value.value for name, value in output.step_output_data.metadata.items()}


def _queue(client: RedisClient, keys: StreamKeys) -> dict[str, dict[str, str]]:
    """The queue's entries by the results entry id each names."""
    return {f["sentinel_rescreen_of"]: f for _, f in client.xrange(keys.rescreen)}


def test_a_launch_queues_the_days_provisional_verdicts_once_with_their_wire_fields(
    settings: Settings, redis_client: RedisClient, dagster_instance: dg.DagsterInstance
) -> None:
    txn = transaction_keys(settings)
    wire = [sample_transaction(n).to_fields() for n in range(4)]
    sources = [str(redis_client.xadd(txn.stream, fields)) for fields in wire]

    def result(fields: dict[str, str]) -> str:
        return str(redis_client.xadd(txn.results, fields))

    ready = result(_provisional(sources[0], "down"))
    rescreened = result(_provisional(sources[1], "held"))
    waiting = result(_provisional(sources[2], "over_budget"))
    gone = result(_provisional(sources[3], "down"))
    result(_provisional(sources[0], "down", day="2026-11-25"))  # another day's
    result(_verdict(sources[1], DAY, fallback_cause="refused"))  # final, not provisional
    result(_verdict(sources[1], DAY, driver_used="analyzer", rescreen_of=rescreened))
    redis_client.xadd(
        txn.rescreen,
        {
            **wire[2],
            "sentinel_rescreen_of": waiting,
            "sentinel_source_id": sources[2],
            "sentinel_cause": "over_budget",
            "sentinel_day": DAY,
        },
    )
    redis_client.xdel(txn.stream, sources[3])  # trimmed before the launch

    first = _launch(settings, dagster_instance)
    assert first.success
    meta = _metadata(first)
    assert (meta["queued"], meta["already_superseded"], meta["already_waiting"]) == (1, 1, 1)
    assert (meta["source_gone"], meta["source_gone_ids"]) == (1, gone)
    assert (meta["day"], meta["queue"]) == (DAY, txn.rescreen)
    queue = _queue(redis_client, txn)
    assert set(queue) == {waiting, ready}
    entry = queue[ready]
    assert payload_of(entry) == wire[0]  # the message as its stream carries it
    assert {n: entry[n] for n in QUEUE_FIELDS} == {
        "sentinel_rescreen_of": ready,
        "sentinel_source_id": sources[0],
        "sentinel_cause": "down",
        "sentinel_day": DAY,
    }

    again = _launch(settings, dagster_instance)  # launched twice: nothing queued twice
    assert again.success
    meta = _metadata(again)
    assert (meta["queued"], meta["already_waiting"], meta["source_gone"]) == (0, 2, 1)
    assert redis_client.xlen(txn.rescreen) == 2
