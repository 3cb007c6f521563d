"""A real HTTP analyzer on 127.0.0.1 whose behaviour each test chooses.

The analyzer client is exercised over a real socket: the server can answer a valid
assessment, an HTTP 500, a body that is not JSON, a 503 or 429 with ``Retry-After``, a
refusal of the caller (``refused``: ``refused_status``, 401 by default, with a JSON body), a
slow answer, or hang past the client's timeout; :func:`refusing_url` names a port nobody
listens on. It speaks HTTP/1.1 with keep-alive, like a production service behind a load
balancer, and records which TCP connection carried each request and how many connections
and requests were open at once, so tests can see connection reuse and the pool's limit.
The ``analyzer_server`` fixture serves one per test.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sentinel_platform.redis_server import free_port


@dataclass
class AnalyzerServer:
    """Test double of a remote analyzer, but a real server: only its answers are scripted."""

    url: str = ""
    mode: str = "ok"  # ok | error | bad_json | hang | huge | unavailable | rate_limited | slow
    # | refused
    #: Status of the ``refused`` answers (a rejected key: 401).
    refused_status: int = 401
    #: ``Retry-After`` of the ``unavailable`` (503) and ``rate_limited`` (429) answers.
    retry_after: str | None = None
    #: Whatever the mode, the first ``busy_first`` requests answer 429 with ``retry_after``.
    busy_first: int = 0
    #: How long ``slow`` waits before answering (``release`` ends the wait early).
    delay_s: float = 0.2
    reply: dict[str, Any] = field(
        default_factory=lambda: {"is_threat": True, "risk_level": "high", "narrative": "looks bad"}
    )
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    max_in_flight: int = 0
    open_connections: int = 0
    max_open_connections: int = 0

    def count(self, name: str, delta: int) -> None:
        """Move ``in_flight`` or ``open_connections`` by ``delta``, keeping its maximum."""
        with self.lock:
            value = getattr(self, name) + delta
            setattr(self, name, value)
            peak = f"max_{name}"
            setattr(self, peak, max(getattr(self, peak), value))

    @property
    def connections(self) -> set[tuple[str, int]]:
        """The distinct client (address, port) pairs, i.e. TCP connections, that sent requests."""
        return {request["client"] for request in self.requests}


def _handler(state: AnalyzerServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a client may reuse its connection

        def setup(self) -> None:
            super().setup()
            state.count("open_connections", 1)

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                state.count("open_connections", -1)

        def do_POST(self) -> None:
            state.count("in_flight", 1)
            try:
                self.answer()
            finally:
                state.count("in_flight", -1)

        def answer(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.requests.append(
                {
                    "body": json.loads(body),
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "client": self.client_address[:2],
                    "path": self.path,
                    "at": time.monotonic(),
                }
            )
            if state.mode == "hang":
                state.release.wait(30)
                return
            if state.mode == "error":
                self.send_error(500, "analyzer exploded")
                return
            if state.mode == "refused":
                refused = json.dumps({"error": "unauthorized: bad credentials"}).encode()
                self.send_response(state.refused_status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(refused)))
                self.end_headers()
                self.wfile.write(refused)
                return
            with state.lock:
                busy = len(state.requests) <= state.busy_first
            if busy or state.mode in ("unavailable", "rate_limited"):
                status = 503 if state.mode == "unavailable" and not busy else 429
                self.send_response(status)
                if state.retry_after is not None:
                    self.send_header("Retry-After", state.retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if state.mode == "slow":
                state.release.wait(state.delay_s)
            payload = json.dumps(state.reply).encode()
            if state.mode == "bad_json":
                payload = b"{not json"
            elif state.mode == "huge":
                payload = json.dumps({**state.reply, "narrative": "x" * 100_000}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


class _Server(ThreadingHTTPServer):
    # A production analyzer accepts many connections at once; the default backlog of 5
    # would reset a burst of connects and hide how many the client really opens.
    request_queue_size = 128


@contextmanager
def serving_analyzer() -> Iterator[AnalyzerServer]:
    """An :class:`AnalyzerServer` listening on a free local port until the block ends."""
    state = AnalyzerServer()
    server = _Server(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/assess"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


def refusing_url() -> str:
    """An analyzer URL on a free local port: nobody listens, so connecting is refused."""
    return f"http://127.0.0.1:{free_port()}/assess"


def wait_for_monotonic(deadline: float, timeout_s: float = 30.0) -> None:
    """Block until ``time.monotonic()`` reaches ``deadline`` (a cool-down's end), failing
    if that is more than ``timeout_s`` away."""
    assert deadline - time.monotonic() <= timeout_s, "deadline too far in the future"
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.05))
