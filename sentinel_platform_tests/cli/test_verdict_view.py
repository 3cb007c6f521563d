"""One message's verdicts in words and as a document: who made each, whether it stands,
and which is in force (:mod:`sentinel_platform.cli.verdict_view`)."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.cli.verdict_lookup import Found, Search, settled
from sentinel_platform.cli.verdict_view import document, in_force

PROVISIONAL = ("1-1", {"driver_used": "fallback", "provisional": "true", "fallback_cause": "down"})
RESCREEN = ("2-0", {"driver_used": "analyzer", "rescreen_of": "1-1", "input_tokens": "100"})
RULES = ("1-1", {"driver_used": "rules"})
FINAL = ("1-1", {"driver_used": "fallback", "fallback_cause": "refused"})
LATER_PROVISIONAL = ("3-0", {"driver_used": "fallback", "provisional": "true"})


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ([], False),  # nothing found yet
        ([RULES], True),
        ([FINAL], True),  # a final fallback waits for nothing
        ([PROVISIONAL], False),  # its re-screen may come
        ([PROVISIONAL, RESCREEN], True),
        ([PROVISIONAL, RESCREEN, LATER_PROVISIONAL], False),
    ],
)
def test_settled(found: list[tuple[str, dict[str, str]]], expected: bool) -> None:
    assert settled(found) is expected


@pytest.mark.parametrize(
    ("drivers", "expected"),
    [
        (["fallback"], "e0"),
        (["fallback", "analyzer"], "e1"),
        (["analyzer", "fallback"], "e0"),  # the newest *model* verdict wins
        (["rules", "rules"], "e1"),
    ],
)
def test_in_force(drivers: list[str], expected: str) -> None:
    records = [{"entry_id": f"e{i}", "driver_used": d} for i, d in enumerate(drivers)]
    assert in_force(records) == expected


def _doc(results: list[tuple[str, dict[str, str]]], **found: Any) -> dict[str, Any]:
    base = Found(results, "1-0", Search("marker"), **found)
    return document("transactions", "tx-1", base, lambda i, o, c, lane: i + o + c)


def test_a_provisional_verdict_names_what_supersedes_it_or_its_queue_entry() -> None:
    doc = _doc([PROVISIONAL, RESCREEN], queued={"1-1": "7-0"})
    old, new = doc["verdicts"]
    assert (old["superseded_by"], old["queued_for_rescreen"]) == ("2-0", None)
    assert (new["rescreen_of"], new["cost"], old["cost"]) == ("1-1", 100, None)
    assert doc["rescreened"] and doc["in_force"] == "2-0"
    waiting = _doc([PROVISIONAL], queued={"1-1": "7-0"})["verdicts"][0]
    assert (waiting["superseded_by"], waiting["queued_for_rescreen"]) == (None, "7-0")


def test_the_input_says_when_it_is_no_longer_kept() -> None:
    assert "no longer kept" in _doc([RULES])["input"]["note"]
    kept = _doc([RULES], input_fields={"data": "{}"}, kept_in="rescreen_queue")
    assert "re-screen queue" in kept["input"]["note"]
