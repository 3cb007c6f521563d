"""The lane of a publish: chosen by the partition's urgency, a run's tag winning both ways,
real time wherever the analyzer has no batch lane (and said so when a tag asked for one)."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from sentinel_platform.domains.shared.lane import LANE_TAG, day_end, lane_for, lane_of_run
from sentinel_platform.settings import Settings

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=timezone.utc)
DAY_S = 86_400.0
TODAY = date(2026, 11, 29)
YESTERDAY = date(2026, 11, 28)  # ended 6 h ago
LAST_WEEK = date(2026, 11, 20)

#: (day, after_s, api, analyzer set, tag) -> (lane, warned)
CASES = [
    # by urgency
    (LAST_WEEK, DAY_S, "openai", True, None, "batch", False),
    (LAST_WEEK, DAY_S, "anthropic", True, None, "batch", False),
    (YESTERDAY, DAY_S, "openai", True, None, "realtime", False),
    (YESTERDAY, 3600.0, "openai", True, None, "batch", False),
    (TODAY, 0.0, "openai", True, None, "realtime", False),
    (None, DAY_S, "openai", True, None, "realtime", False),
    # no batch lane: real time, silently when nobody asked for one
    (LAST_WEEK, DAY_S, "sentinel", True, None, "realtime", False),
    (LAST_WEEK, DAY_S, "openai", False, None, "realtime", False),
    # the tag wins both ways
    (LAST_WEEK, DAY_S, "openai", True, "realtime", "realtime", False),
    (TODAY, DAY_S, "openai", True, "batch", "batch", False),
    (None, DAY_S, "anthropic", True, "batch", "batch", False),
    # a batch tag where there is no batch lane: real time, and said
    (LAST_WEEK, DAY_S, "sentinel", True, "batch", "realtime", True),
    (TODAY, DAY_S, "openai", False, "batch", "realtime", True),
    # a tag that names no lane: said, and the urgency decides
    (LAST_WEEK, DAY_S, "openai", True, "bulk", "batch", True),
    (TODAY, DAY_S, "openai", True, "bulk", "realtime", True),
]


@pytest.mark.parametrize(("day", "after_s", "api", "analyzer", "tag", "lane", "warned"), CASES)
def test_the_lane_of_a_partition(
    day: date | None,
    after_s: float,
    api: str,
    analyzer: bool,
    tag: str | None,
    lane: str,
    warned: bool,
) -> None:
    choice = lane_for(
        day=day, now=NOW, batch_after_s=after_s, api=api, has_analyzer=analyzer, tag=tag
    )
    assert (choice.lane, choice.warning is not None) == (lane, warned), choice
    assert choice.reason
    if tag in ("batch", "realtime"):
        assert f"{LANE_TAG}={tag}" in choice.reason


def test_a_refused_batch_tag_names_why() -> None:
    choice = lane_for(
        day=TODAY, now=NOW, batch_after_s=DAY_S, api="sentinel", has_analyzer=True, tag="batch"
    )
    assert choice.warning is not None
    assert "sentinel API has no batch lane" in choice.warning
    assert "published real time" in choice.warning


def test_a_day_ends_at_the_next_utc_midnight() -> None:
    assert day_end(YESTERDAY) == datetime(2026, 11, 29, tzinfo=timezone.utc)


def test_the_lane_of_a_run_reads_its_partition_tags_and_settings() -> None:
    settings = Settings(
        analyzer_api="openai",
        analyzer_url="https://api.openai.com/v1",
        analyzer_model="gpt-4o-mini",
    )
    assert lane_of_run(settings, "2026-11-20", {}, NOW).lane == "batch"
    assert lane_of_run(settings, "2026-11-29", {}, NOW).lane == "realtime"
    assert lane_of_run(settings, "not-a-day", {}, NOW).lane == "realtime"
    assert lane_of_run(settings, "2026-11-29", {LANE_TAG: "batch"}, NOW).lane == "batch"
    assert lane_of_run(Settings(), "2026-11-20", {LANE_TAG: "batch"}, NOW).lane == "realtime"


def test_a_compatible_server_is_no_batch_lane_unless_it_says_so() -> None:
    """llama.cpp, vLLM or a proxy speak OpenAI's chat API, not its batch endpoints: a past
    day stays real time, and a batch tag is told why."""
    local = {
        "analyzer_api": "openai",
        "analyzer_url": "http://127.0.0.1:8080/v1",
        "analyzer_model": "smollm2",
    }
    assert lane_of_run(Settings(**local), "2026-11-20", {}, NOW).lane == "realtime"
    told = lane_of_run(Settings(**local), "2026-11-20", {LANE_TAG: "batch"}, NOW)
    assert told.lane == "realtime" and told.warning is not None
    assert "SENTINEL_ANALYZER_BATCH_LANE" in told.warning
    pinned = Settings(**local, analyzer_batch_lane="on")
    assert lane_of_run(pinned, "2026-11-20", {}, NOW).lane == "batch"
