"""The pure-queue stub of the llama_cpp bench's ``--server stub``: it must serve one request
at a time, each for its service time, with answers the worker's OpenAI client accepts, or
the stub arm would measure the stub instead of the worker.

Four clients post at once to a stub of 0.2 s: all four are answered, the server never had
two in service, the last answer came no sooner than four service times, and each body was
kept.
"""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from sentinel_platform_tests.harness.pure_queue_server import serving_pure_queue
from workers.analyzer.answers.replies import Usage
from workers.analyzer.apis.openai_api import usage_of

SERVICE_S = 0.2
CLIENTS = 4


def _post(base_url: str, body: bytes) -> dict[str, object]:
    request = urllib.request.Request(
        f"{base_url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        reply: dict[str, object] = json.load(response)
    return reply


def test_the_stub_serves_one_request_at_a_time_for_its_service_time() -> None:
    bodies = [json.dumps({"n": i}).encode() for i in range(CLIENTS)]
    with serving_pure_queue(SERVICE_S) as stub, ThreadPoolExecutor(CLIENTS) as pool:
        started = time.monotonic()
        replies = list(pool.map(lambda body: _post(stub.url, body), bodies))
        elapsed = time.monotonic() - started
        assert stub.peak_serving == 1
        assert stub.served == CLIENTS
        assert sorted(stub.bodies) == sorted(bodies)
    assert elapsed >= CLIENTS * SERVICE_S * 0.95  # a queue: never two served together
    for reply in replies:
        choice = reply["choices"][0]  # type: ignore[index]
        assert json.loads(choice["message"]["content"])["risk_level"] == "medium"
        assert isinstance(usage_of(reply), Usage)
