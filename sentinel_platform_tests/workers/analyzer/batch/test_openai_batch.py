"""OpenAI's Batch API against a server answering as OpenAI documents it: the real-time
bodies sent byte for byte, the batch polled until it ends, each line's outcome read as
the real-time reply is, a whole-batch failure told apart, the key never shown."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from sentinel_platform_tests.harness.batch_api_server import BatchApiServer
from sentinel_platform_tests.harness.model_api_bodies import VERDICT, openai_reply
from sentinel_platform_tests.workers.analyzer.batch.conftest import KEY, payloads
from workers.analyzer.answers.replies import AnalyzerError, AnalyzerExhausted, Assessment
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.batch import openai_batch
from workers.analyzer.batch.http import BatchHttp
from workers.analyzer.batch.openai_batch import OpenAiBatch, api_root, labelled, line_outcome
from workers.analyzer.batch.protocol import BatchFailed, BatchRequest, LineError, unanswered
from workers.analyzer.prompts import Prompt

MODEL = "gpt-4o-mini"


def lane(server: BatchApiServer, key: str = KEY) -> tuple[OpenAiApi, OpenAiBatch]:
    api = OpenAiApi(MODEL, key=key)
    return api, OpenAiBatch(api, BatchHttp(api, f"{server.url}/v1", timeout_s=5))


def requests_of(api: OpenAiApi, prompt: Prompt, count: int) -> list[BatchRequest]:
    return [
        BatchRequest(f"c-{n}", api.request("transaction", payload, prompt))
        for n, payload in enumerate(payloads(count))
    ]


def test_each_line_is_the_real_time_body_byte_for_byte(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    api, batch = lane(batch_api_server)
    requests = requests_of(api, prompt, 3)
    ref = batch.submit(requests, label="ledger-1")
    upload, create = batch_api_server.seen("POST")
    assert upload["path"] == "/v1/files"
    assert upload["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="purpose"\r\n\r\nbatch\r\n' in upload["body"]
    (input_file,) = [data for name, data in batch_api_server.files.items()]
    lines = input_file.splitlines()
    assert len(lines) == 3
    for line, request in zip(lines, requests, strict=True):
        assert line.endswith(b', "body": ' + request.body + b"}")  # the bytes, not re-encoded
        assert "café".encode() in line
        assert json.loads(line) == {
            "custom_id": request.custom_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": json.loads(request.body),
        }
    assert create["path"] == "/v1/batches"
    assert json.loads(create["body"]) == {
        "input_file_id": next(iter(batch_api_server.files)),
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
        "metadata": {"sentinel_batch": "ledger-1"},
    }
    assert ref.kind == "openai" and ref.batch_id.startswith("batch_")
    for seen in batch_api_server.seen():
        assert seen["headers"]["authorization"] == f"Bearer {KEY}"


def test_the_batch_is_polled_until_it_ends(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    batch_api_server.polls_to_end = 3
    api, batch = lane(batch_api_server)
    ref = batch.submit(requests_of(api, prompt, 4), label="l")
    states = [batch.poll(ref) for _ in range(3)]
    assert [(s.status, s.provider_status) for s in states] == [
        ("in_progress", "in_progress"),
        ("in_progress", "in_progress"),
        ("ended", "completed"),
    ]
    assert [s.done for s in states] == [False, False, True]
    assert (states[-1].counts.total, states[-1].counts.succeeded) == (4, 4)


def test_each_line_comes_back_as_a_verdict_or_its_error_kind(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    batch_api_server.errored_every, batch_api_server.expired_every = 3, 4
    api, batch = lane(batch_api_server)
    requests = requests_of(api, prompt, 12)
    ref = batch.submit(requests, label="l")
    state = batch.poll(ref)
    assert (state.status, state.provider_status) == ("ended", "expired")  # partly expired
    assert (state.counts.succeeded, state.counts.failed) == (6, 6)
    outcomes = dict(batch.results(ref, prompt))
    real_time = api.read(json.dumps(openai_reply(VERDICT)).encode(), prompt)
    kinds = {cid: o.kind if isinstance(o, LineError) else "verdict" for cid, o in outcomes.items()}
    assert kinds == {
        f"c-{n - 1}": "errored" if n % 3 == 0 else "expired" if n % 4 == 0 else "verdict"
        for n in range(1, 13)
    }
    verdicts = [o for o in outcomes.values() if isinstance(o, Assessment)]
    assert verdicts == [real_time] * 6  # read as the real-time reply is, usage and all
    errored = outcomes["c-2"]
    assert isinstance(errored, LineError) and errored.reason.startswith("HTTP 500")
    expired = outcomes["c-3"]
    assert isinstance(expired, LineError) and expired.reason.startswith("batch_expired")
    assert unanswered([r.custom_id for r in requests], outcomes) == []


def test_a_batch_failed_as_a_whole_is_told_apart_from_bad_lines(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    batch_api_server.fail_batch = True
    api, batch = lane(batch_api_server)
    ref = batch.submit(requests_of(api, prompt, 2), label="l")
    state = batch.poll(ref)
    assert (state.status, state.provider_status) == ("failed", "failed")
    assert state.reason.startswith("invalid_request: The `model` parameter is required")
    assert not state.held  # its input was wrong: submitting it again fails again
    with pytest.raises(BatchFailed, match="failed: invalid_request"):
        list(batch.results(ref, prompt))


def test_a_batch_failed_for_the_enqueued_token_limit_holds_the_lane(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    batch_api_server.fail_batch, batch_api_server.fail_with = True, "token_limit_exceeded"
    api, batch = lane(batch_api_server)
    state = batch.poll(batch.submit(requests_of(api, prompt, 2), label="l"))
    assert (state.status, state.held) == ("failed", True)
    assert state.reason.startswith("token_limit_exceeded: Enqueued token limit reached")


@pytest.mark.parametrize("page", [100, 2])
def test_a_batch_whose_creation_went_unanswered_is_found_by_its_label(
    batch_api_server: BatchApiServer, prompt: Prompt, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    monkeypatch.setattr(openai_batch, "LIST_PAGE", page)  # one page, or several
    api, batch = lane(batch_api_server)
    started = time.time() - 60
    refs = {label: batch.submit(requests_of(api, prompt, 1), label) for label in "abcde"}
    assert batch.find("a", since_s=started) == refs["a"]  # the oldest, on the last page
    assert batch.find("d", since_s=started) == refs["d"]
    assert batch.find("never-submitted", since_s=started) is None
    lists = [r for r in batch_api_server.seen("GET") if r["path"].startswith("/v1/batches?")]
    assert lists and all(f"limit={page}" in r["path"] for r in lists)


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ({"data": [{"id": "b2", "metadata": {"sentinel_batch": "x"}, "created_at": 50}],
          "has_more": True, "last_id": "b2"}, ("b2", "", True)),
        ({"data": [{"id": "b2", "metadata": None, "created_at": 150}],
          "has_more": True, "last_id": "b2"}, (None, "b2", False)),  # read on
        ({"data": [{"id": "b2", "metadata": {}, "created_at": 50}],
          "has_more": True, "last_id": "b2"}, (None, "b2", True)),  # older than asked
        ({"data": [{"id": "b2", "metadata": {}, "created_at": 150}],
          "has_more": False, "last_id": "b2"}, (None, "b2", True)),  # the last page
        ({"data": [], "has_more": False, "last_id": None}, (None, "", True)),
    ],
)  # fmt: skip
def test_one_page_of_the_batches_list(
    page: dict[str, Any], expected: tuple[str | None, str, bool]
) -> None:
    assert labelled(page, "x", since_s=100) == expected


def test_a_rejected_key_is_exhausted_and_never_shown(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    batch_api_server.accepted_keys = frozenset({"sk-another"})
    api, batch = lane(batch_api_server)
    with pytest.raises(AnalyzerExhausted) as refused:
        batch.submit(requests_of(api, prompt, 1), label="l")
    assert refused.value.cause == "rejected_key"
    assert KEY not in str(refused.value) and KEY[-12:] not in str(refused.value)


def test_an_unreachable_api_is_down(prompt: Prompt) -> None:
    api = OpenAiApi(MODEL, key=KEY)
    batch = OpenAiBatch(api, BatchHttp(api, "http://127.0.0.1:9/v1", timeout_s=2))
    with pytest.raises(AnalyzerError, match="unreachable") as down:
        batch.submit(requests_of(api, prompt, 1), label="l")
    assert KEY not in str(down.value)


@pytest.mark.parametrize(
    ("base_url", "root"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("https://api.openai.com/v1/", "https://api.openai.com/v1"),
        ("http://vllm:8000/v1/chat/completions", "http://vllm:8000/v1"),
    ],
)
def test_the_batch_paths_go_below_the_configured_api_root(base_url: str, root: str) -> None:
    assert api_root(base_url) == root


def completion(content: str, finish: str = "stop") -> dict[str, Any]:
    reply = openai_reply(VERDICT)
    reply["choices"][0].update(
        finish_reason=finish, message={"role": "assistant", "content": content}
    )
    return reply


@pytest.mark.parametrize(
    ("line", "kind", "reason"),
    [
        (
            {
                "id": "r",
                "custom_id": "c",
                "response": None,
                "error": {
                    "code": "batch_expired",
                    "message": "This request could not be executed before the completion "
                    "window expired.",
                },
            },
            "expired",
            "batch_expired: This request could not be executed",
        ),
        (
            {
                "id": "r",
                "custom_id": "c",
                "response": None,
                "error": {"code": "batch_cancelled", "message": "This request was cancelled."},
            },
            "canceled",
            "batch_cancelled",
        ),
        (  # a non-HTTP error of one line
            {
                "id": "r",
                "custom_id": "c",
                "response": None,
                "error": {"code": "server_error", "message": "Internal error."},
            },
            "errored",
            "server_error: Internal error.",
        ),
        (  # the documented 400 in the error file: read as the real-time refusal is
            {
                "id": "r",
                "custom_id": "c",
                "error": None,
                "response": {
                    "status_code": 400,
                    "request_id": "x",
                    "body": {
                        "error": {
                            "message": "This model's maximum context length is 128000 tokens.",
                            "type": "invalid_request_error",
                            "param": "messages",
                            "code": "context_length_exceeded",
                        }
                    },
                },
            },
            "errored",
            "HTTP 400",
        ),
        (  # billed, cut at max_tokens: errored, what it cost kept
            {
                "id": "r",
                "custom_id": "c",
                "error": None,
                "response": {
                    "status_code": 200,
                    "request_id": "x",
                    "body": completion('{"is_threat": tr', "length"),
                },
            },
            "errored",
            "verdict cut at SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS",
        ),
    ],
)
def test_a_line_without_a_verdict(
    prompt: Prompt, line: dict[str, Any], kind: str, reason: str
) -> None:
    custom_id, outcome = line_outcome(OpenAiApi(MODEL), json.dumps(line).encode(), prompt)
    assert custom_id == "c"
    assert isinstance(outcome, LineError)
    assert (outcome.kind, outcome.reason.startswith(reason)) == (kind, True), outcome.reason
    if reason.startswith("verdict cut"):
        assert outcome.usage is not None and outcome.usage.output_tokens > 0


def test_a_line_that_echoes_a_key_never_shows_it(prompt: Prompt) -> None:
    message = f"Incorrect API key provided: {KEY}. " + "x" * 400
    line = {"id": "r", "custom_id": "c", "response": None,
            "error": {"code": "invalid_api_key", "message": message}}  # fmt: skip
    _, outcome = line_outcome(OpenAiApi(MODEL), json.dumps(line).encode(), prompt)
    assert isinstance(outcome, LineError)
    assert outcome.reason.startswith("invalid_api_key: Incorrect API key provided: ***")
    assert KEY not in outcome.reason and len(outcome.reason) < 260


def test_a_line_without_a_custom_id_is_no_result(prompt: Prompt) -> None:
    with pytest.raises(AnalyzerError, match="no custom_id"):
        line_outcome(OpenAiApi(MODEL), b'{"id": "r", "response": null}', prompt)
