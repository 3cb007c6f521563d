"""The batch lane's HTTP: results far larger than one read arrive whole, line by line,
and an answer that is not JSON is no batch."""

from __future__ import annotations

import pytest

from sentinel_platform_tests.harness.batch_api_server import BatchApiServer
from sentinel_platform_tests.workers.analyzer.batch.conftest import KEY, payloads
from workers.analyzer.answers.replies import AnalyzerError, Assessment
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.batch.anthropic_batch import AnthropicBatch
from workers.analyzer.batch.http import READ_CHUNK_BYTES, BatchHttp
from workers.analyzer.batch.openai_batch import OpenAiBatch
from workers.analyzer.batch.protocol import BatchApi, BatchRequest
from workers.analyzer.prompts import Prompt


def test_results_larger_than_one_read_arrive_whole(
    batch_api_server: BatchApiServer, prompt: Prompt
) -> None:
    api = OpenAiApi("gpt-4o-mini", key=KEY)
    batch = OpenAiBatch(api, BatchHttp(api, f"{batch_api_server.url}/v1", timeout_s=5))
    requests = [
        BatchRequest(f"c-{n}", api.request("transaction", payload, prompt))
        for n, payload in enumerate(payloads(1_500))
    ]
    ref = batch.submit(requests, label="l")
    assert batch.poll(ref).done
    output = batch_api_server.files[f"file-output-{ref.batch_id}"]
    assert len(output) > 8 * READ_CHUNK_BYTES  # many reads, lines split between them
    outcomes = list(batch.results(ref, prompt))
    assert [cid for cid, _ in outcomes] == [r.custom_id for r in requests]
    assert all(isinstance(outcome, Assessment) for _, outcome in outcomes)


def test_an_answer_that_is_not_json_is_no_batch(batch_api_server: BatchApiServer) -> None:
    api = OpenAiApi("gpt-4o-mini", key=KEY)
    http = BatchHttp(api, f"{batch_api_server.url}/v1", timeout_s=5)
    batch_api_server.files["file-plain"] = b"not json"
    with pytest.raises(AnalyzerError, match="8 bytes that are not JSON"):
        http.json("GET", f"{batch_api_server.url}/v1/files/file-plain/content")


def test_both_providers_are_batch_apis() -> None:
    """Typed as the protocol (mypy checks the shape); each names its API and limits."""
    openai, anthropic = OpenAiApi("m"), AnthropicApi("m")
    apis: list[BatchApi] = [
        OpenAiBatch(openai, BatchHttp(openai, "http://127.0.0.1:1/v1", timeout_s=1)),
        AnthropicBatch(anthropic, BatchHttp(anthropic, "http://127.0.0.1:1", timeout_s=1)),
    ]
    assert [(api.kind, api.limits.max_requests) for api in apis] == [
        ("openai", 50_000),
        ("anthropic", 100_000),
    ]
