"""The records ``sentinel status`` reads as text come out typed; unreadable ones as None."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from sentinel_platform.cli.status_records import (
    alert_record,
    as_time,
    publish_record,
    registration,
)

T0 = datetime(2026, 11, 18, 11, 6, 40, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1795000000", T0),
        (1_795_000_000, T0),
        ("2026-11-18T11:06:40Z", T0),
        ("2026-11-18T11:06:40", T0),  # naive: UTC
        ("2026-11-18T12:06:40+01:00", T0),
        ("", None),
        ("soon", None),
        (None, None),
    ],
)
def test_as_time_reads_epoch_seconds_and_iso_times(value: object, expected: object) -> None:
    assert as_time(value) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"pid": 7, "host": "h", "token": "t", "started": "2026-11-18T11:06:40+00:00"}',
         {"pid": 7, "host": "h", "started": T0}),
        ('{"pid": "7"}', {"pid": None, "host": None, "started": None}),
        ("not json", None),
        ("[1, 2]", None),
        (None, None),
    ],
)  # fmt: skip
def test_registration_is_an_object_without_the_lease_token(
    raw: str | None, expected: object
) -> None:
    assert registration(raw) == expected


def test_publish_record_types_rows_and_time() -> None:
    stored = {
        "run_id": "r",
        "partition": "",
        "rows": "500",
        "at": "1795000000",
        "outcome": "success",
        "error": "",
    }
    assert publish_record(stored) == {
        "run_id": "r",
        "partition": None,
        "rows": 500,
        "at": T0,
        "outcome": "success",
        "error": None,
        "lane": None,  # recorded before the lanes: the stream itself
    }
    assert publish_record({**stored, "lane": "batch"})["lane"] == "batch"  # type: ignore[index]
    assert publish_record({}) is None
    assert publish_record({"rows": "many"})["rows"] is None  # type: ignore[index]


def test_alert_record_turns_details_into_an_object() -> None:
    record = alert_record("1795000000000-0", {"severity": "error", "details": '{"n": 1}'})
    assert record["at"] == T0 and record["details"] == {"n": 1}
    assert alert_record("1-0", {"details": "{broken"})["details"] == {"text": "{broken"}
    assert alert_record("1-0", {"details": "[1]"})["details"] == {"value": [1]}
