"""A pure queue of capacity 1 speaking OpenAI's Chat Completions: llama.cpp's shape, no model.

A real HTTP server on 127.0.0.1 (keep-alive, a thread per connection) whose ``POST
.../chat/completions`` waits for its one place, holds it ``service_s`` and answers the
reference's object (:func:`openai_reply`, with ``usage``). Its throughput is ``1 /
service_s`` however many calls wait, so a lower rate measures the client. It keeps every
body served (``bodies``), so two clients can be checked to have sent the same work.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sentinel_platform_tests.harness.model_api_bodies import VERDICT, openai_reply

#: Longest a request waits for the place before a 503: no thread is held for good.
MAX_WAIT_S = 600.0


@dataclass
class PureQueue:
    """The server's state: its base URL (``.../v1``), service time and what it saw."""

    service_s: float
    url: str = ""
    bodies: list[bytes] = field(default_factory=list)
    served: int = 0
    peak_serving: int = 0
    _serving: int = 0
    _place: threading.Lock = field(default_factory=threading.Lock)
    _count: threading.Lock = field(default_factory=threading.Lock)

    def serve(self, body: bytes) -> bool:
        """Wait for the one place (at most :data:`MAX_WAIT_S`), hold it ``service_s``."""
        if not self._place.acquire(timeout=MAX_WAIT_S):
            return False
        try:
            self._moved(1)
            time.sleep(self.service_s)  # the "model" at work, nothing else
            with self._count:
                self.bodies.append(body)
                self.served += 1
            self._moved(-1)
        finally:
            self._place.release()
        return True

    def _moved(self, delta: int) -> None:
        with self._count:
            self._serving += delta
            self.peak_serving = max(self.peak_serving, self._serving)

    def reset(self) -> None:
        """Forget what was seen (between two arms of one scenario)."""
        with self._count:
            self.bodies, self.served, self.peak_serving = [], 0, self._serving


def _handler(state: PureQueue) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if not self.path.endswith("/chat/completions"):
                self.answer(404, b'{"error": "not found"}')
            elif state.serve(body):
                self.answer(200, json.dumps(openai_reply(VERDICT)).encode())
            else:
                self.answer(503, b'{"error": "queue wait too long"}')

        def answer(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a worker may open its whole pool at once


@contextmanager
def serving_pure_queue(service_s: float) -> Iterator[PureQueue]:
    """A :class:`PureQueue` on a free port of 127.0.0.1 until the block ends; its thread is
    owned by the block and joined on exit."""
    state = PureQueue(service_s)
    server = _Server(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="pure-queue")
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
