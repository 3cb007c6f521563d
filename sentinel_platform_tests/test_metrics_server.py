"""The metrics HTTP server: scrapes are answered, and a connection that sends nothing is
closed at its deadline instead of holding a thread forever."""

from __future__ import annotations

import socket
import time
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from sentinel_platform.metrics_server import serve_registry

DEADLINE_S = 0.3


def test_a_silent_connection_is_closed_at_its_deadline_and_scrapes_go_on() -> None:
    registry = CollectorRegistry()
    Counter("probe_total", "a probe", registry=registry).inc(3)
    server, thread = serve_registry(registry, 0, "127.0.0.1", read_timeout_s=DEADLINE_S)
    port = int(server.server_address[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as silent:
            started = time.monotonic()
            assert silent.recv(1) == b""  # the server closed it: no request came
            assert time.monotonic() - started < DEADLINE_S + 2
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            assert "probe_total 3.0" in reply.read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert not thread.is_alive()
