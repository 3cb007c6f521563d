"""Anthropic's Message Batches against a server answering as Anthropic documents them:
the real-time Messages bodies sent byte for byte as ``params``, the batch polled until
it ends, each result read as the real-time reply is, in any order, a refused batch told
apart, the key never shown and never sent to another host."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_platform_tests.harness.batch_api_server import BatchApiServer
from sentinel_platform_tests.harness.model_api_bodies import VERDICT, anthropic_reply
from sentinel_platform_tests.workers.analyzer.batch.conftest import KEY, payloads
from workers.analyzer.answers.replies import AnalyzerError, AnalyzerExhausted, Assessment
from workers.analyzer.apis.anthropic_api import AnthropicApi, tool_name
from workers.analyzer.batch.anthropic_batch import AnthropicBatch, line_outcome
from workers.analyzer.batch.http import BatchHttp
from workers.analyzer.batch.protocol import BatchRef, BatchRequest, LineError, unanswered
from workers.analyzer.prompts import Prompt

MODEL = "claude-3-5-haiku-latest"


def lane(server: BatchApiServer, key: str = KEY) -> tuple[AnthropicApi, AnthropicBatch]:
    api = AnthropicApi(MODEL, key=key)
    return api, AnthropicBatch(api, BatchHttp(api, server.url, timeout_s=5))


def requests_of(api: AnthropicApi, prompt: Prompt, count: int) -> list[BatchRequest]:
    return [
        BatchRequest(f"c-{n}", api.request("transaction", payload, prompt))
        for n, payload in enumerate(payloads(count))
    ]


def test_each_request_carries_the_real_time_body_byte_for_byte(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    api, batch = lane(batch_api_server)
    requests = requests_of(api, prompt, 3)
    ref = batch.submit(requests, label="ledger-1")
    (create,) = batch_api_server.seen("POST")
    assert create["path"] == "/v1/messages/batches"
    assert create["headers"]["x-api-key"] == KEY
    assert create["headers"]["anthropic-version"] == "2023-06-01"
    assert create["headers"]["content-type"] == "application/json"
    for request in requests:
        assert b'"params": ' + request.body + b"}" in create["body"]  # the bytes themselves
    assert json.loads(create["body"]) == {
        "requests": [{"custom_id": r.custom_id, "params": json.loads(r.body)} for r in requests]
    }
    assert ref == BatchRef("anthropic", next(iter(batch_api_server.batches)))


def test_the_batch_is_polled_until_it_ends_and_every_result_is_read(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    server = batch_api_server
    server.polls_to_end, server.errored_every, server.expired_every = 2, 3, 4
    api, batch = lane(server)
    requests = requests_of(api, prompt, 12)
    ref = batch.submit(requests, label="l")
    first, second = batch.poll(ref), batch.poll(ref)
    assert (first.status, first.provider_status, first.counts.processing) == (
        "in_progress",
        "in_progress",
        12,
    )
    assert (second.status, second.provider_status) == ("ended", "ended")
    assert (second.counts.succeeded, second.counts.failed, second.counts.processing) == (6, 6, 0)
    outcomes = list(batch.results(ref, prompt))
    assert [cid for cid, _ in outcomes] == [f"c-{n}" for n in reversed(range(12))]
    by_id = dict(outcomes)
    kinds = {cid: o.kind if isinstance(o, LineError) else "verdict" for cid, o in by_id.items()}
    assert kinds == {
        f"c-{n - 1}": "errored" if n % 3 == 0 else "expired" if n % 4 == 0 else "verdict"
        for n in range(1, 13)
    }
    reply = anthropic_reply(tool_name(prompt), VERDICT)
    real_time = api.read(json.dumps(reply).encode(), prompt)
    assert [o for o in by_id.values() if isinstance(o, Assessment)] == [real_time] * 6
    errored = by_id["c-2"]
    assert isinstance(errored, LineError) and errored.reason == "overloaded_error: Overloaded"
    assert unanswered([r.custom_id for r in requests], by_id) == []
    results_read = [r for r in server.seen("GET") if r["path"].endswith("/results")]
    assert [r["headers"]["x-api-key"] for r in results_read] == [KEY]


def test_results_are_not_read_before_the_batch_ends(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    batch_api_server.polls_to_end = 5
    api, batch = lane(batch_api_server)
    ref = batch.submit(requests_of(api, prompt, 1), label="l")
    with pytest.raises(AnalyzerError, match="is still in_progress"):
        list(batch.results(ref, prompt))


def test_a_refused_batch_is_an_error_at_submission(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    batch_api_server.fail_batch = True
    api, batch = lane(batch_api_server)
    with pytest.raises(AnalyzerError, match="HTTP 400"):
        batch.submit(requests_of(api, prompt, 2), label="l")
    assert batch_api_server.batches == {}


def test_a_rejected_key_is_exhausted_and_never_shown(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    batch_api_server.accepted_keys = frozenset({"sk-ant-another"})
    api, batch = lane(batch_api_server)
    with pytest.raises(AnalyzerExhausted) as refused:
        batch.submit(requests_of(api, prompt, 1), label="l")
    assert refused.value.cause == "rejected_key" and KEY not in str(refused.value)


def test_a_batch_whose_creation_went_unanswered_cannot_be_found(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    api, batch = lane(batch_api_server)
    batch.submit(requests_of(api, prompt, 1), label="a")
    assert batch.find("a", since_s=0) is None  # Message Batches keep no label


@pytest.mark.parametrize(
    ("given", "read"),
    [
        (  # the documented URL on the configured host
            "http://127.0.0.1:8080/v1/messages/batches/msgbatch_1/results",
            "http://127.0.0.1:8080/v1/messages/batches/msgbatch_1/results",
        ),
        (  # another host never gets the key
            "https://elsewhere.example/v1/messages/batches/msgbatch_1/results",
            "http://127.0.0.1:8080/v1/messages/batches/msgbatch_1/results",
        ),
        (None, "http://127.0.0.1:8080/v1/messages/batches/msgbatch_1/results"),
    ],
)
def test_results_are_read_from_the_configured_host_only(given: Any, read: str) -> None:
    api = AnthropicApi(MODEL, key=KEY)
    batch = AnthropicBatch(api, BatchHttp(api, "http://127.0.0.1:8080", timeout_s=1))
    assert batch.results_url(BatchRef("anthropic", "msgbatch_1"), given) == read


@pytest.mark.parametrize(
    ("result", "kind", "reason"),
    [
        ({"type": "canceled"}, "canceled", "the batch ended with this request canceled"),
        ({"type": "expired"}, "expired", "the batch ended with this request expired"),
        (
            {
                "type": "errored",
                "error": {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "max_tokens: Field required",
                    },
                },
            },
            "errored",
            "invalid_request_error: max_tokens: Field required",
        ),
        ({"type": "errored"}, "errored", "errored without a reason"),
        (  # a reply without the forced tool call: read as the real-time reply is
            {"type": "succeeded", "message": {**anthropic_reply("other_tool", VERDICT)}},
            "errored",
            "reply has no record_",
        ),
    ],
)
def test_a_result_without_a_verdict(
    prompt: Prompt, result: dict[str, Any], kind: str, reason: str
) -> None:
    raw = json.dumps({"custom_id": "c", "result": result}).encode()
    custom_id, outcome = line_outcome(AnthropicApi(MODEL), raw, prompt)
    assert custom_id == "c" and isinstance(outcome, LineError)
    assert (outcome.kind, outcome.reason.startswith(reason)) == (kind, True), outcome.reason


def test_an_errored_result_that_echoes_a_key_never_shows_it(prompt: Prompt) -> None:
    error = {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"}
    raw = json.dumps({"custom_id": "c", "result": {"type": "errored", "error": {
        "type": "error", "error": error}}}).encode()  # fmt: skip
    _, outcome = line_outcome(AnthropicApi(MODEL), raw, prompt)
    assert isinstance(outcome, LineError)
    assert outcome.reason == "authentication_error: invalid x-api-key ***"


def test_a_result_line_without_its_result_is_no_result(prompt: Prompt) -> None:
    with pytest.raises(AnalyzerError, match="no custom_id or result"):
        line_outcome(AnthropicApi(MODEL), b'{"custom_id": "c"}', prompt)
