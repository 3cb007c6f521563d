"""A bound logger writes exactly the lines ``extra={**fields, ...}`` wrote: same field
names, same order, a call's own field winning over a bound one."""

from __future__ import annotations

import json
import logging

import pytest

from sentinel_platform.logs import BoundLogger, JsonFormatter

FIELDS = {"stream": "transactions", "group": "sentinel-consumers", "consumer": "tx-1"}


@pytest.fixture
def lines() -> tuple[logging.Logger, list[str]]:
    logger = logging.getLogger("sentinel_platform_tests.bound")
    written: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            written.append(JsonFormatter().format(record))

    logger.handlers[:] = [Keep()]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger, written


def fields_of(line: str) -> list[tuple[str, object]]:
    entry = json.loads(line)
    return [(k, v) for k, v in entry.items() if k not in ("ts", "level")]


def test_a_bound_line_is_the_line_extra_wrote(lines: tuple[logging.Logger, list[str]]) -> None:
    logger, written = lines
    logger.warning("lease_lost", extra={**FIELDS, "lease": "k"})
    BoundLogger(logger, FIELDS).warning("lease_lost", extra={"lease": "k"})
    assert fields_of(written[0]) == fields_of(written[1])


def test_a_call_without_extra_carries_the_bound_fields(
    lines: tuple[logging.Logger, list[str]],
) -> None:
    logger, written = lines
    BoundLogger(logger, FIELDS).info("stopped")
    assert fields_of(written[0]) == [
        ("logger", "sentinel_platform_tests.bound"),
        ("event", "stopped"),
        *FIELDS.items(),
    ]


def test_a_call_field_wins_and_bind_adds_fields(lines: tuple[logging.Logger, list[str]]) -> None:
    logger, written = lines
    bound = BoundLogger(logger, FIELDS).bind(message_id="1-0")
    bound.info("dead_lettered", extra={"consumer": "other", "reason": "r"})
    entry = json.loads(written[0])
    assert (entry["consumer"], entry["message_id"], entry["reason"]) == ("other", "1-0", "r")
    assert bound.fields == {**FIELDS, "message_id": "1-0"}
