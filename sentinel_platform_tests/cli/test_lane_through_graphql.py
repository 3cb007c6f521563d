"""The lane of a publish run launched as the UI launches it (the webserver's GraphQL API of
the real ``sentinel up``): a past day goes to the stream's batch lane by itself, today's
with the run's ``sentinel/lane=batch`` tag too, and today's untagged to the live stream;
an asset backfill's tag reaches its runs (``sentinel/lane=batch`` sends today to the batch
lane)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from sentinel_platform.domains.shared.lane import LANE_TAG
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import batch_stream_key, transaction_keys
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.platform import (
    Platform,
    land_transactions,
    launch,
    serving_platform,
    wait_for_run,
)
from sentinel_platform_tests.harness.processes import MODEL_NAMES
from sentinel_platform_tests.harness.waits import wait_until

#: Spark publish runs through ``sentinel up`` (three, then a backfill's): minutes each test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

ROWS = 20
PAST = "2026-11-02"
RUN_TIMEOUT_S = 600
TRANSACTION_ASSETS = ["raw_transactions", "enriched_transactions", "transaction_stream"]
LAUNCH_BACKFILL = """mutation($p: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $p) {
    __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""


@pytest.fixture
def openai_platform(
    settings: Settings, settings_env: dict[str, str], model_api_server: ModelApiServer
) -> Iterator[Platform]:
    """``sentinel up`` with an analyzer speaking OpenAI's API (which has a batch lane)."""
    analyzer = {
        "SENTINEL_ANALYZER_API": "openai",
        "SENTINEL_ANALYZER_URL": model_api_server.url,
        "SENTINEL_ANALYZER_MODEL": MODEL_NAMES["openai"],
        "SENTINEL_ANALYZER_API_KEY": "sk-lane-journey-0001",
        "SENTINEL_ANALYZER_BATCH_LANE": "on",  # the test server stands in for the provider
    }
    with serving_platform(settings, settings_env, analyzer) as running:
        yield running


def _ids(client: RedisClient, stream: str) -> set[str]:
    return {json.loads(fields["data"])["id"] for _, fields in entries(client.xrange(stream))}


def test_publish_runs_launched_through_graphql_go_to_their_lane(
    openai_platform: Platform, settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(settings)
    batch = batch_stream_key(keys)
    today = datetime.now(UTC).date().isoformat()
    past_ids = set(land_transactions(settings, PAST, ROWS, "lane-past"))
    today_ids = set(land_transactions(settings, today, ROWS, "lane-today"))

    past_run = launch(openai_platform, "publish_transactions", PAST)
    wait_for_run(openai_platform, past_run, RUN_TIMEOUT_S)
    assert _ids(redis_client, batch) == past_ids

    tagged = launch(openai_platform, "publish_transactions", today, tags={LANE_TAG: "batch"})
    wait_for_run(openai_platform, tagged, RUN_TIMEOUT_S)
    assert _ids(redis_client, batch) == past_ids | today_ids
    assert not _ids(redis_client, keys.stream) & (past_ids | today_ids)

    fresh = launch(openai_platform, "publish_transactions", today)
    wait_for_run(openai_platform, fresh, RUN_TIMEOUT_S)
    assert _ids(redis_client, keys.stream) & (past_ids | today_ids) == today_ids
    assert _ids(redis_client, batch) == past_ids | today_ids


def test_a_backfills_lane_tag_reaches_its_runs(
    openai_platform: Platform, settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(settings)
    today = datetime.now(UTC).date().isoformat()
    backfilled = set(land_transactions(settings, today, ROWS, "lane-backfill"))
    params = {
        "assetSelection": [{"path": [name]} for name in TRANSACTION_ASSETS],
        "partitionNames": [today],
        "tags": [{"key": LANE_TAG, "value": "batch"}],
    }

    launched = openai_platform.graphql(LAUNCH_BACKFILL, {"p": params})["launchPartitionBackfill"]

    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    batch = batch_stream_key(keys)
    wait_until(lambda: backfilled <= _ids(redis_client, batch), RUN_TIMEOUT_S, interval_s=1)
    assert not _ids(redis_client, keys.stream) & backfilled
