"""The HTTP analyzer over a real local server, and the transaction fallback to the rules."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from sentinel_platform.redis_server import free_port
from sentinel_platform.settings import Settings, SettingsError
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.workers.processors.test_transactions import make_txn
from workers.analyzer import AnalyzerError, HttpAnalyzer, analyzer_from_settings, parse_assessment
from workers.processors import TransactionProcessor


def processor_for(server: AnalyzerServer, settings: Settings, timeout_s: float = 2.0) -> Any:
    return TransactionProcessor(settings, HttpAnalyzer(server.url, timeout_s))


def test_analyzer_verdict_overrides_the_rules(
    analyzer_server: AnalyzerServer, rules_settings: Settings
) -> None:
    analyzer_server.reply = {"is_threat": True, "risk_level": "medium", "narrative": "odd"}
    effect = processor_for(analyzer_server, rules_settings).process(make_txn(id="t-9"))
    assert (effect.result["is_threat"], effect.result["risk_level"]) == ("true", "medium")
    assert effect.result["driver_used"] == "analyzer"
    (request,) = analyzer_server.requests
    assert request["body"]["kind"] == "transaction"
    assert request["body"]["payload"]["id"] == "t-9"
    assert request["headers"]["content-type"] == "application/json"


@pytest.mark.parametrize("mode", ["error", "bad_json"])
def test_failing_analyzer_falls_back_to_rules(
    analyzer_server: AnalyzerServer, rules_settings: Settings, mode: str
) -> None:
    analyzer_server.mode = mode
    effect = processor_for(analyzer_server, rules_settings).process(make_txn(amount=497.0))
    assert effect.result["driver_used"] == "fallback"
    assert (effect.result["is_threat"], effect.result["risk_level"]) == ("true", "high")
    # HTTP 500: the analyzer is down; a bad reply: it answered wrongly
    assert effect.log_fields["analyzer_error"].startswith(("AnalyzerDown:", "AnalyzerError:"))
    assert len(analyzer_server.requests) == 1


def test_http_error_names_the_status(analyzer_server: AnalyzerServer) -> None:
    analyzer_server.mode = "error"
    with pytest.raises(AnalyzerError, match="HTTP 500"):
        HttpAnalyzer(analyzer_server.url, 2.0).assess_transaction(make_txn())


def test_hanging_analyzer_falls_back_within_the_timeout(
    analyzer_server: AnalyzerServer, rules_settings: Settings
) -> None:
    analyzer_server.mode = "hang"
    timeout_s = 0.3
    started = time.monotonic()
    effect = processor_for(analyzer_server, rules_settings, timeout_s).process(make_txn())
    elapsed = time.monotonic() - started
    assert effect.result["driver_used"] == "fallback"
    assert (effect.result["is_threat"], effect.result["risk_level"]) == ("false", "low")
    assert timeout_s <= elapsed < timeout_s + 3.0  # the hang lasts 30 s
    assert "timed out" in effect.log_fields["analyzer_error"]


def test_unreachable_analyzer_falls_back(rules_settings: Settings) -> None:
    analyzer = HttpAnalyzer(f"http://127.0.0.1:{free_port()}/assess", 1.0)
    effect = TransactionProcessor(rules_settings, analyzer).process(make_txn(category="suspicious"))
    assert effect.result["driver_used"] == "fallback"
    assert effect.result["is_threat"] == "true"


def test_reply_outside_the_contract_falls_back(
    analyzer_server: AnalyzerServer, rules_settings: Settings
) -> None:
    analyzer_server.reply = {"is_threat": "yes", "risk_level": "high", "narrative": ""}
    effect = processor_for(analyzer_server, rules_settings).process(make_txn())
    assert effect.result["driver_used"] == "fallback"
    assert "is_threat" in effect.log_fields["analyzer_error"]


@pytest.mark.parametrize(
    ("reply", "complaint"),
    [
        (b"[]", "not a JSON object"),
        (b"\xff\xfe", "not JSON"),
        (b'{"risk_level": "low", "narrative": ""}', "is_threat"),
        (b'{"is_threat": 1, "risk_level": "low", "narrative": ""}', "is_threat"),
        (b'{"is_threat": false, "risk_level": "critical", "narrative": ""}', "risk_level"),
        (b'{"is_threat": false, "risk_level": "low"}', "narrative"),
        (b'{"is_threat": false, "risk_level": "low", "narrative": 7}', "narrative"),
    ],
)
def test_reply_validation_is_strict(reply: bytes, complaint: str) -> None:
    with pytest.raises(AnalyzerError, match=complaint):
        parse_assessment(reply)


def test_valid_reply_is_parsed() -> None:
    body = json.dumps({"is_threat": False, "risk_level": "low", "narrative": "fine", "x": 1})
    assessment = parse_assessment(body.encode())
    assert (assessment.is_threat, assessment.risk_level, assessment.narrative) == (
        False,
        "low",
        "fine",
    )


def test_analyzer_from_settings(make_rules_settings: Callable[..., Settings]) -> None:
    assert analyzer_from_settings(make_rules_settings()) is None
    configured = analyzer_from_settings(
        make_rules_settings(analyzer_url="http://127.0.0.1:9/a", analyzer_timeout_s=0.5)
    )
    assert isinstance(configured, HttpAnalyzer) and configured.timeout_s == 0.5
    with pytest.raises(SettingsError, match="SENTINEL_ANALYZER_URL"):
        analyzer_from_settings(make_rules_settings(analyzer_url="ftp://u:secret@host/x"))


def test_analyzer_url_password_is_not_shown() -> None:
    with pytest.raises(ValueError) as error:
        HttpAnalyzer("ftp://u:secret@host/x", 1.0)
    assert "secret" not in str(error.value)
    assert "secret" not in repr(HttpAnalyzer("http://u:secret@host/x", 1.0))


def test_calls_share_one_kept_alive_connection_and_send_credentials_as_basic_auth(
    analyzer_server: AnalyzerServer,
) -> None:
    url = analyzer_server.url.replace("http://", "http://bot:p%40ss@")
    analyzer = HttpAnalyzer(url, 2.0)
    for index in range(20):
        analyzer.assess_transaction(make_txn(id=f"t-{index}"))
    assert len(analyzer_server.requests) == 20
    assert len(analyzer_server.connections) == 1
    expected = "Basic " + base64.b64encode(b"bot:p@ss").decode()
    assert {r["headers"]["authorization"] for r in analyzer_server.requests} == {expected}
    assert {r["path"] for r in analyzer_server.requests} == {"/assess"}
    analyzer.close()


def test_oversized_reply_is_refused_and_the_next_call_still_works(
    analyzer_server: AnalyzerServer,
) -> None:
    analyzer = HttpAnalyzer(analyzer_server.url, 2.0)
    analyzer_server.mode = "huge"
    with pytest.raises(AnalyzerError, match="larger than"):
        analyzer.assess_transaction(make_txn())
    analyzer_server.mode = "ok"
    assert analyzer.assess_transaction(make_txn()).risk_level == "high"


def test_outage_and_recovery_are_each_logged_once(
    analyzer_server: AnalyzerServer, caplog: pytest.LogCaptureFixture
) -> None:
    analyzer = HttpAnalyzer(analyzer_server.url.replace("http://", "http://u:pw-9x@"), 2.0)
    caplog.set_level(logging.INFO, logger="workers.analyzer.client")
    analyzer_server.mode = "error"
    for _ in range(3):
        with pytest.raises(AnalyzerError):
            analyzer.assess_transaction(make_txn())
    analyzer_server.mode = "ok"
    for _ in range(2):
        analyzer.assess_transaction(make_txn())
    events = [record.getMessage() for record in caplog.records]
    assert events == ["analyzer_unavailable", "analyzer_recovered"]
    assert "pw-9x" not in caplog.text + str([vars(r) for r in caplog.records])
