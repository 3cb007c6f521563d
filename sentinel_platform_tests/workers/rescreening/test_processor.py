"""The re-screen's processor against a real Chat Completions server: the model's verdict
or nothing (the entry waits, or is dead-lettered), never a second rules verdict."""

from __future__ import annotations

import json

import pytest

from sentinel_platform.schemas import SchemaError
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.processor import Unprocessable
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer import HttpAnalyzer
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.prompts import load_prompt
from workers.processors import TransactionProcessor, transactions
from workers.processors.provisional import AnalyzerAway
from workers.rescreening.processor import RescreenProcessor

ENTRY = {
    "data": json.dumps({**BASE, "id": "t-7"}),
    "sentinel_rescreen_of": "1700000000000-3",
    "sentinel_source_id": "1700000000000-0",
    "sentinel_cause": "down",
    "sentinel_day": "2026-11-21",
}


def _rescreen(server: ModelApiServer, settings: Settings) -> RescreenProcessor:
    prompts = {"transaction": load_prompt(transactions.PROMPT, settings)}
    api = OpenAiApi("gpt-4o-mini", max_output_tokens=50)
    analyzer = HttpAnalyzer(server.url, 2.0, api=api, prompts=prompts)
    return RescreenProcessor(TransactionProcessor(settings, analyzer))


def test_the_models_verdict_supersedes_the_provisional_one(
    model_api_server: ModelApiServer, rules_settings: Settings
) -> None:
    processor = _rescreen(model_api_server, rules_settings)
    entry = processor.parse(ENTRY)
    effect = processor.process(entry)
    assert effect.natural_key == processor.natural_key(entry) == "1700000000000-3"
    result = effect.result
    assert (result["driver_used"], result["txn_id"], result["day"]) == (
        "analyzer",
        "t-7",
        "2026-11-21",
    )
    assert result["rescreen_of"] == "1700000000000-3"
    assert result["source_message_id"] == "1700000000000-0"
    assert "provisional" not in result and effect.provisional is None


@pytest.mark.parametrize(
    ("server_state", "raised"),
    [("down", AnalyzerAway), ("cut", Unprocessable)],
    ids=["gone-away-waits", "unusable-dead-lettered"],
)
def test_without_a_model_verdict_the_entry_waits_or_is_dead_lettered(
    model_api_server: ModelApiServer,
    rules_settings: Settings,
    server_state: str,
    raised: type[Exception],
) -> None:
    if server_state == "down":
        model_api_server.down = True
    else:
        model_api_server.cut_every = 1
    processor = _rescreen(model_api_server, rules_settings)
    with pytest.raises(raised):
        processor.process(processor.parse(ENTRY))


@pytest.mark.parametrize("missing", ["sentinel_rescreen_of", "sentinel_source_id", "data"])
def test_an_entry_without_its_fields_is_unreadable(
    model_api_server: ModelApiServer, rules_settings: Settings, missing: str
) -> None:
    fields = {name: value for name, value in ENTRY.items() if name != missing}
    with pytest.raises(SchemaError, match=missing):
        _rescreen(model_api_server, rules_settings).parse(fields)
