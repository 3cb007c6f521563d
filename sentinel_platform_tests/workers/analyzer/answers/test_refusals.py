"""Every documented refusal of a model API, as a table: busy, exhausted, down or wrong.

Each row (:mod:`documented_answers`) is one answer as its provider documents it (status,
headers, body; sources in the comments there) and what
:func:`workers.analyzer.answers.refusals.refusal` must make of it. The same rows are the table in
docs/analyzer.md ("Every documented answer"), checked here too.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform_tests.workers.analyzer.answers.documented_answers import (
    NOW,
    OPENAI_BAD_KEY,
    PACIFIC_MIDNIGHT_S,
    ROWS,
    anthropic_error,
    google_error,
    openai_error,
    retry_info,
)
from workers.analyzer.answers.refusals import (
    CAUSES,
    ApiKind,
    busy_wait_s,
    error_body,
    refusal,
    seconds_to_quota_day_end,
)
from workers.analyzer.answers.replies import (
    MAX_RETRY_AFTER_S,
    AnalyzerBusy,
    AnalyzerDown,
    AnalyzerError,
    AnalyzerExhausted,
)

DOC = Path(__file__).resolve().parents[4] / "docs" / "analyzer.md"
#: What the real worker must never show: the part of a key the provider echoes.
LEAKED = "sk-proj-"


def kind_of(error: AnalyzerError | Busy) -> str:
    if isinstance(error, AnalyzerBusy):
        return "busy"
    if isinstance(error, AnalyzerExhausted):
        return "exhausted"
    if isinstance(error, AnalyzerDown):
        return "down"
    assert type(error) is AnalyzerError, type(error)
    return "wrong"


@pytest.mark.parametrize(
    ("api", "status", "headers", "body", "kind", "seconds", "cause"),
    [(r.api, r.status, r.headers, r.body, r.kind, r.seconds, r.cause) for r in ROWS],
    ids=[row.id for row in ROWS],
)
def test_each_documented_answer_is_busy_exhausted_down_or_wrong(
    api: ApiKind,
    status: int,
    headers: dict[str, str],
    body: bytes,
    kind: str,
    seconds: float | None,
    cause: str,
) -> None:
    error = refusal(api, status, headers, body, NOW)
    assert kind_of(error) == kind, str(error)
    assert f"HTTP {status}" in str(error)
    if isinstance(error, AnalyzerBusy):
        assert error.retry_after_s == (None if seconds is None else pytest.approx(seconds))
    if isinstance(error, AnalyzerExhausted):
        assert error.cause == cause and cause in CAUSES
        assert error.until_s == (None if seconds is None else pytest.approx(seconds))
        assert error.outcome == "exhausted"


def test_no_message_shows_a_key_the_provider_echoes_or_the_raw_body() -> None:
    body = openai_error(OPENAI_BAD_KEY, "invalid_request_error", "invalid_api_key")
    rejected = refusal("openai", 401, {}, body, NOW)
    assert LEAKED not in str(rejected) and "abcd" not in str(rejected)
    assert "invalid_api_key" in str(rejected)
    echoed = openai_error(f"bad key sk-ant-api03-Zx9{'q' * 40} here", "server_error", None)
    assert "Zx9" not in str(refusal("openai", 500, {}, echoed, NOW))
    long = openai_error("x" * 5000, "server_error", None)
    assert len(str(refusal("openai", 500, {}, long, NOW))) < 400


@pytest.mark.parametrize(
    ("headers", "body", "seconds"),
    [
        ({"retry-after-ms": "1500.5"}, b"", 1.5005),
        ({"retry-after-ms": "soon", "retry-after": "4"}, b"", 4.0),  # invalid: next source
        ({"retry-after-ms": "-5", "retry-after": "4"}, b"", 4.0),
        ({"retry-after-ms": "nan"}, b"", None),
        ({"retry-after": "Fri, 27 Nov 2026 05:00:30 GMT"}, b"", 30.0),
        ({"retry-after": "999999"}, b"", MAX_RETRY_AFTER_S),  # a bogus header is capped
        ({"retry-after-ms": "99999999"}, b"", MAX_RETRY_AFTER_S),
        (
            {},
            google_error(429, "RESOURCE_EXHAUSTED", "", [retry_info("10.689924287s")]),
            10.689924287,
        ),
        ({}, google_error(429, "RESOURCE_EXHAUSTED", "", [retry_info("soon")]), None),
        ({}, b"", None),
    ],
)
def test_the_wait_of_a_busy_answer(
    headers: dict[str, str], body: bytes, seconds: float | None
) -> None:
    waited = busy_wait_s(headers, error_body(body), NOW)
    assert waited == (None if seconds is None else pytest.approx(seconds))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"", {}),
        (b"not json", {}),
        (b"[]", {}),
        (b'{"error": null}', {}),
        (b'{"error": "busy"}', {"message": "busy"}),
        (b'{"error": {"type": 3, "code": 42}}', {"type": "3", "code": "42"}),
        (anthropic_error("x", "m", details={"error_code": "c"}), {"type": "x", "code": "c"}),
    ],
)
def test_error_bodies_of_any_shape_are_read_without_raising(
    body: bytes, expected: dict[str, str]
) -> None:
    parsed = error_body(body)
    for name, value in expected.items():
        assert getattr(parsed, name) == value
    if not expected:
        assert parsed == type(parsed)()


@pytest.mark.parametrize(
    ("now", "seconds"),
    [
        (NOW, PACIFIC_MIDNIGHT_S),  # PST, UTC-8
        (datetime(2026, 7, 1, 6, 0, tzinfo=timezone.utc), 3600.0),  # PDT, UTC-7: 23:00 local
        (datetime(2026, 7, 1, 7, 0, tzinfo=timezone.utc), 86400.0),  # local midnight exactly
    ],
)
def test_a_per_day_quota_lasts_until_midnight_pacific(now: datetime, seconds: float) -> None:
    assert seconds_to_quota_day_end(now) == pytest.approx(seconds)


def test_every_row_of_the_docs_table_is_a_row_of_this_table() -> None:
    """docs/analyzer.md's "Every documented answer": each of its rows names an API and
    statuses; each pair is tested above with that meaning."""
    text = DOC.read_text().split("## Every documented answer", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if re.match(r"\| (openai|anthropic|sentinel)", line)]
    assert len(rows) >= 20
    tested = {(row.api, row.status, row.kind) for row in ROWS}
    for row in rows:
        api, answer, meaning = (cell.strip() for cell in row.strip("|").split("|")[:3])
        kinds = {k for k in ("busy", "exhausted", "down", "wrong") if k in meaning}
        for status in map(int, re.findall(r"\b[2-5][0-9]{2}\b", answer)):
            found = {kind for a, s, kind in tested if a == api.split()[0] and s == status}
            assert found & kinds, f"docs row not tested: {api} {status} {meaning}"
