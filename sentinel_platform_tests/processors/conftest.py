"""A real HTTP analyzer on 127.0.0.1 whose behaviour each test chooses, and worker processes.

The analyzer client is exercised over a real socket: the server can answer a valid
assessment, an HTTP 500, a body that is not JSON, or hang past the client's timeout. It
speaks HTTP/1.1 with keep-alive, like a production service behind a load balancer, and
records which TCP connection carried each request, so tests can see connection reuse.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import Settings, load_settings
from sentinel_platform_tests.drills.conftest import fleet


@dataclass
class AnalyzerServer:
    """Test double of a remote analyzer, but a real server: only its answers are scripted."""

    url: str = ""
    mode: str = "ok"  # ok | error | bad_json | hang | huge
    reply: dict[str, Any] = field(
        default_factory=lambda: {"is_threat": True, "risk_level": "high", "narrative": "looks bad"}
    )
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def connections(self) -> set[tuple[str, int]]:
        """The distinct client (address, port) pairs, i.e. TCP connections, that sent requests."""
        return {request["client"] for request in self.requests}


def _handler(state: AnalyzerServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a client may reuse its connection

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.requests.append(
                {
                    "body": json.loads(body),
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "client": self.client_address[:2],
                    "path": self.path,
                }
            )
            if state.mode == "hang":
                state.release.wait(30)
                return
            if state.mode == "error":
                self.send_error(500, "analyzer exploded")
                return
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


@pytest.fixture
def analyzer_server() -> Iterator[AnalyzerServer]:
    state = AnalyzerServer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/assess"
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def rules_settings(tmp_path: Path) -> Settings:
    """Settings for pure processing tests: no Redis needed, defaults for every rule."""
    return load_settings(home=tmp_path)


@pytest.fixture
def make_rules_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Settings with overrides (field names), for rule tests."""

    def factory(**overrides: Any) -> Settings:
        return load_settings(home=tmp_path, **overrides)

    return factory


# ``fleet``: the drills' real worker processes (imported above), shared as a fixture.
__all__ = ["fleet"]
