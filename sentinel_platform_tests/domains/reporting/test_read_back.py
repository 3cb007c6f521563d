"""The result streams read back into Spark by the executors, and the compliance report."""

from __future__ import annotations

import json
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.reporting.assets import dead_letter_frame
from sentinel_platform.domains.reporting.definitions import ASSETS as REPORTING_ASSETS
from sentinel_platform.registry import StreamSpec
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform.streams.producer.range_read import id_slices
from sentinel_platform.streams.sharding.shards import keys_of_shards

pytestmark = pytest.mark.spark


def _verdict(i: int, merchant: str, threat: bool) -> dict[str, str]:
    return {
        "txn_id": f"t-{i}",
        "merchant": merchant,
        "amount": "497.10" if threat else "12.00",
        "currency": "USD",
        "is_threat": "true" if threat else "false",
        "risk_level": "high" if threat else "low",
        "driver_used": "rules",
        "processed_at": "2026-11-21T08:00:00.000Z",
        "source_message_id": f"{1700000000000 + i}-0",
    }


def _transaction(i: int, category: str) -> dict[str, str]:
    return {"data": f'{{"id":"t-{i}","category":"{category}"}}'}


def test_stream_is_split_into_contiguous_id_slices(redis_client: RedisClient) -> None:
    for ms in range(1_000, 1_100):
        redis_client.xadd("s", {"n": str(ms)}, id=f"{ms}-0")
    slices = id_slices(redis_client, "s", max_slices=4)
    assert slices[0][1] == "1000-0" and slices[-1][2].startswith("1099-")
    covered = sum(len(redis_client.xrange("s", start, end)) for _, start, end in slices)
    assert covered == 100
    assert id_slices(redis_client, "missing") == []


def test_read_stream_returns_every_entry_once(
    spark: Any, settings: Settings, redis_client: RedisClient
) -> None:
    pipe = redis_client.pipeline(transaction=False)
    for i in range(3_000):
        pipe.xadd("big", {"i": str(i)}, id=f"{10_000 + i // 7}-{i % 7}")
    pipe.execute()
    publisher = RedisPublisherResource(redis_url=settings.redis_url_value)
    df = publisher.read_stream(spark, "big")
    values = sorted(int(r["fields"]["i"]) for r in df.collect())
    assert values == list(range(3_000))


def test_compliance_report_summarises_verdicts_events_and_dead_letters(
    settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
) -> None:
    txn, axm = transaction_keys(settings), axiom_keys(settings)
    merchants = [("RapidRemit", "suspicious", True)] * 3 + [("Costco", "retail", False)] * 4
    for i, (merchant, category, threat) in enumerate(merchants):
        redis_client.xadd(txn.stream, _transaction(i, category))
        redis_client.xadd(txn.results, _verdict(i, merchant, threat))
    for domain, risk in [("aml", "high"), ("aml", "high"), ("gdpr", "low")]:
        redis_client.xadd(
            axm.results, {"source_id": f"{domain}-1", "domain": domain, "risk_level": risk}
        )
    redis_client.xadd(txn.dlq, {"stream": txn.stream, "reason": "invalid_message"})

    result = dg.materialize(REPORTING_ASSETS, resources=data_resources, instance=dagster_instance)
    assert result.success
    (report,) = result.asset_materializations_for_node("compliance_report")
    threats = {
        (r.data["merchant"], r.data["category"]): r.data["threats"]
        for r in report.metadata["threats_by_merchant"].value.records
    }
    assert threats == {("RapidRemit", "suspicious"): 3, ("Costco", "retail"): 0}
    risks = {r.data["domain"]: r.data for r in report.metadata["risk_by_domain"].value.records}
    assert risks["aml"]["high"] == 2 and risks["gdpr"]["low"] == 1
    (letters,) = report.metadata["dead_letters"].value.records
    assert (letters.data["stream"], letters.data["count"]) == (txn.stream, 1)
    assert report.metadata["verdicts"].value == 7
    # The stored report: the three sections as rows of one long table.
    table = {
        (row["section"], row["key"], row["detail"]): row["value"]
        for row in result.output_for_node("compliance_report").collect()
    }
    assert table == {
        ("threats_by_merchant", "RapidRemit", "suspicious"): 3,
        ("threats_by_merchant", "Costco", "retail"): 0,
        ("risk_by_domain", "aml", "high"): 2,
        ("risk_by_domain", "gdpr", "high"): 0,
        ("dead_letters", txn.stream, "invalid_message"): 1,
    }


def test_the_demos_results_inputs_and_dead_letters_stay_out_of_the_users_figures(
    settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
) -> None:
    """The demo shares the streams with the user's runs; its entries carry its mark, and
    the read-backs and the report count only the user's."""
    txn, axm = transaction_keys(settings), axiom_keys(settings)
    mark = {DEMO_FIELD: DEMO_VALUE}
    for i in range(5):  # the user's: 5 verdicts, 2 compliance events, 1 dead letter
        redis_client.xadd(txn.stream, _transaction(i, "retail"))
        redis_client.xadd(txn.results, _verdict(i, "Costco", threat=False))
    for i in range(100, 103):  # the demo's: 3 threats at a merchant of its own
        redis_client.xadd(txn.stream, {**_transaction(i, "suspicious"), **mark})
        redis_client.xadd(txn.results, {**_verdict(i, "DemoMart", threat=True), **mark})
    for domain, extra in [("aml", {}), ("aml", {}), ("demo-domain", mark)]:
        event = {"source_id": f"{domain}-1", "domain": domain, "risk_level": "high"}
        redis_client.xadd(axm.results, {**event, **extra})
    for payload in [{"data": "{}"}, {"data": "{}", **mark}]:
        letter = {"stream": txn.stream, "reason": "invalid_message"}
        redis_client.xadd(txn.dlq, {**letter, "payload": json.dumps(payload)})

    result = dg.materialize(REPORTING_ASSETS, resources=data_resources, instance=dagster_instance)
    assert result.success
    (report,) = result.asset_materializations_for_node("compliance_report")
    assert report.metadata["verdicts"].value == 5
    assert report.metadata["compliance_events"].value == 2
    merchants = {r.data["merchant"] for r in report.metadata["threats_by_merchant"].value.records}
    assert merchants == {"Costco"}
    domains = {r.data["domain"] for r in report.metadata["risk_by_domain"].value.records}
    assert domains == {"aml"}
    (letters,) = report.metadata["dead_letters"].value.records
    assert letters.data["count"] == 1


@pytest.mark.cluster
def test_the_report_reads_the_dead_letters_of_every_shard_on_a_cluster(
    spark: Any,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    sharded_stream: StreamSpec,
) -> None:
    """On a cluster each shard dead-letters to its own DLQ (its slot): the report's dead
    letters are read from every recorded shard's, besides the streams' own."""
    shards = keys_of_shards(cluster_client, cluster_settings, sharded_stream)
    for k, shard in enumerate(shards):
        payload = json.dumps({"key": f"bad-{k}"})
        cluster_client.xadd(
            shard.dlq, {"stream": shard.stream, "reason": "invalid", "payload": payload}
        )
    publisher = RedisPublisherResource(redis_url=cluster_settings.redis_url_value)
    letters = dead_letter_frame(spark, publisher, cluster_settings).collect()
    assert sorted(row["fields"]["stream"] for row in letters) == sorted(s.stream for s in shards)
