"""The provider's two lanes served apart: the real-time calls answered by the front
process, everything else forwarded to the batch API's process as it was sent, so the
product's own batch client works through the front as against one server."""

from __future__ import annotations

import json
import urllib.request

import pytest

from sentinel_platform.settings import load_settings
from sentinel_platform_tests.harness.batch_api_process import provider_apart
from sentinel_platform_tests.harness.batch_requests import KEY, payloads
from sentinel_platform_tests.harness.model_api_bodies import VERDICT
from workers.analyzer.answers.replies import Assessment
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.batch.http import BatchHttp
from workers.analyzer.batch.openai_batch import OpenAiBatch
from workers.analyzer.batch.protocol import BatchRequest
from workers.analyzer.prompts import load_prompt
from workers.processors import transactions

pytestmark = pytest.mark.timeout(120)


def test_real_time_calls_stay_at_the_front_and_a_batch_goes_through_to_the_batch_api() -> None:
    prompt = load_prompt(transactions.PROMPT, load_settings())
    api = OpenAiApi("gpt-4o-mini", key=KEY)
    requests = [
        BatchRequest(f"c-{n}", api.request("transaction", payload, prompt))
        for n, payload in enumerate(payloads(5))
    ]
    with provider_apart(0.0, polls_to_end=2, errored_every=5) as (front, batches):
        batch = OpenAiBatch(api, BatchHttp(api, f"{front.url}/v1", timeout_s=10))
        ref = batch.submit(requests, label="apart")
        states = [batch.poll(ref), batch.poll(ref)]
        outcomes = dict(batch.results(ref, prompt))
        call = urllib.request.Request(
            f"{front.url}/v1/chat/completions",
            data=requests[0].body,
            headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(call, timeout=10) as answer:
            reply = json.loads(answer.read())
        at_front, at_batches = front.counts(), batches.counts()

    assert [s.done for s in states] == [False, True]
    verdicts = [o for o in outcomes.values() if isinstance(o, Assessment)]
    assert len(outcomes) == 5 and len(verdicts) == 4  # the 5th line errored, as configured
    assert json.loads(reply["choices"][0]["message"]["content"]) == VERDICT
    # the upload, the creation, the polls and the files' reads: all at the batch API
    assert at_batches["requests"] >= 4 and at_batches["submissions"] == 1
    assert at_batches["realtime_calls"] == 0
    assert at_front == {"requests": 1, "submissions": 0, "realtime_calls": 1}
