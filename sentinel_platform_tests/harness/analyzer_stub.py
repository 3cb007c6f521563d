"""A real HTTP analyzer of capacity K and latency L, for tests and benchmarks alike.

It speaks what :class:`workers.analyzer.HttpAnalyzer` expects: a ``POST`` of
``{"kind": ..., "payload": {...}}`` as JSON, answered by an assessment
(``is_threat``, ``risk_level``, ``narrative``) over HTTP/1.1 keep-alive, one thread per
connection, on 127.0.0.1 and a free port. Like a hosted model API it has a capacity:

* ``capacity=None``: every request is served at once, after ``latency_s`` (no limit);
* ``capacity=K, mode="reject"``: at most K requests are served at once; one arriving
  beyond that is answered ``429`` with ``Retry-After: <retry_after>`` at once;
* ``capacity=K, mode="queue"``: beyond K a request waits, first come first served, for a
  free place, and the wait is measured (``queue_wait_mean_s``: the mean over every
  request given a place, 0 for those served at once); then it takes its ``latency_s``;
* ``reject_fraction``: that share of requests is answered ``429`` regardless of the load
  (drawn from a seeded generator, so a run is repeatable);
* ``hang=True``: nothing is answered; each request is held ``latency_s`` and its
  connection closed, past any shorter client timeout.

:meth:`AnalyzerStub.set_capacity` changes K while requests run (a cut lets those being
served finish; an increase admits queued ones at once). :meth:`AnalyzerStub.counters` reads
every counter in one consistent snapshot, each request counted out before its answer is
written (so a client holding its answer finds it counted, and its place already free):
requests received (``calls``), answered with an assessment (``answered``), answered 429
(``rejected``), the peak of requests present
(``peak_in_flight``, queued ones included) and of those being served (``peak_serving``,
never above K), requests given a place (``served_calls``) and those that queued for it
(``queued_calls``), connections opened, and the mean wait in the queue;
:meth:`AnalyzerStub.calls_per_key` counts the assessments per ``payload.id`` (a
transaction's or an axiom's id), so a test can assert one paid call per key.

:meth:`AnalyzerStub.stop` is bounded whatever the clients do: held and queued requests
end at once and their connections are closed.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

#: The assessment every served request gets (valid for ``parse_assessment``).
REPLY = {"is_threat": False, "risk_level": "low", "narrative": "bench analyzer stub"}
Mode = Literal["reject", "queue"]
#: Longest a queued request waits for a place before its connection is closed unanswered
#: (the stub never holds a thread for good, even if its clients never go away).
MAX_QUEUE_WAIT_S = 600.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of connections may arrive at once; the default is 5

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (its timeout) and closed is no error of the stub."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class AnalyzerStub:
    """The analyzer described in this module's docstring; start it, or use ``with``."""

    def __init__(
        self,
        latency_s: float,
        *,
        capacity: int | None = None,
        mode: Mode = "reject",
        retry_after: str = "1",
        reject_fraction: float = 0.0,
        hang: bool = False,
        seed: int = 0,
    ) -> None:
        if mode not in ("reject", "queue"):
            raise ValueError(f"mode must be reject or queue, got {mode!r}")
        if not 0.0 <= reject_fraction <= 1.0:
            raise ValueError(f"reject_fraction must be within [0, 1], got {reject_fraction}")
        _check_capacity(capacity)
        self.latency_s = latency_s
        self.mode = mode
        self.retry_after = retry_after
        self.reject_fraction = reject_fraction
        self.hang = hang
        self._capacity = capacity
        self._random = random.Random(seed)
        self._cond = threading.Condition()
        self._queue: deque[object] = deque()  # tickets of queued requests, oldest first
        self._closing = threading.Event()
        self._calls = self._answered = self._rejected = self._connections = 0
        self._in_flight = self._peak_in_flight = self._serving = self._peak_serving = 0
        self._queued_calls = self._served_calls = 0
        self._queue_wait_s = 0.0
        self._per_key: Counter[str] = Counter()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="analyzer-stub", daemon=True
        )

    # --- life ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/assess"

    def start(self) -> AnalyzerStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; held and queued requests end at once (their connections close)."""
        self._closing.set()
        with self._cond:
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> AnalyzerStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- capacity and counters -----------------------------------------------------------

    @property
    def capacity(self) -> int | None:
        return self._capacity

    def set_capacity(self, capacity: int | None) -> None:
        """Serve at most ``capacity`` at once from now on (None: no limit). Requests being
        served finish; queued ones take the places an increase opens at once."""
        _check_capacity(capacity)
        with self._cond:
            self._capacity = capacity
            self._cond.notify_all()

    def counters(self) -> dict[str, Any]:
        """A consistent snapshot of every counter (see the module docstring)."""
        with self._cond:
            return {
                "calls": self._calls,
                "answered": self._answered,
                "rejected": self._rejected,
                "in_flight": self._in_flight,
                "peak_in_flight": self._peak_in_flight,
                "peak_serving": self._peak_serving,
                "connections": self._connections,
                "queued_calls": self._queued_calls,
                "served_calls": self._served_calls,
                "queue_wait_mean_s": (
                    self._queue_wait_s / self._served_calls if self._served_calls else 0.0
                ),
            }

    def calls_per_key(self) -> Counter[str]:
        """Assessments answered per ``payload.id`` (429s and unanswered requests excluded)."""
        with self._cond:
            return Counter(self._per_key)

    # --- one request ---------------------------------------------------------------------

    def _admit(self) -> str:
        """Count a request in and decide, atomically: ``served`` (it holds a place now),
        ``rejected`` (a 429: drawn, or beyond K in reject mode) or ``stopped`` (the stub
        stopped, or ``MAX_QUEUE_WAIT_S`` passed, while it waited in the queue)."""
        arrived = time.monotonic()
        with self._cond:
            self._calls += 1
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
            if self.reject_fraction and self._random.random() < self.reject_fraction:
                return "rejected"
            if not self._has_room() or self._queue:
                if self.mode == "reject":
                    return "rejected"
                if not self._wait_in_queue(arrived):
                    return "stopped"
            self._serving += 1
            self._served_calls += 1
            self._peak_serving = max(self._peak_serving, self._serving)
            return "served"

    def _has_room(self) -> bool:
        return self._capacity is None or self._serving < self._capacity

    def _wait_in_queue(self, arrived: float) -> bool:
        """Wait (holding ``_cond``) until this request is first in line and a place is
        free; its wait is measured either way. False if the stub stopped first or the wait
        passed ``MAX_QUEUE_WAIT_S``."""
        ticket = object()
        self._queue.append(ticket)
        self._queued_calls += 1
        deadline = arrived + MAX_QUEUE_WAIT_S
        try:
            while not (self._queue[0] is ticket and self._has_room()):
                left = deadline - time.monotonic()
                if self._closing.is_set() or left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))
            return True
        finally:
            self._queue.remove(ticket)
            self._queue_wait_s += time.monotonic() - arrived
            self._cond.notify_all()  # the next in line may have a place too

    def _leave(self, *, served: bool, outcome: str | None, key: str | None) -> None:
        """Count a request out, **before** its answer is written: a client that has its
        answer finds it counted, and may call again at once without finding its own
        previous call still holding a place (a service frees it as it answers)."""
        with self._cond:
            self._in_flight -= 1
            if served:
                self._serving -= 1
                self._cond.notify_all()
            if outcome == "rejected":
                self._rejected += 1
            elif outcome == "answered":
                self._answered += 1
                if key is not None:
                    self._per_key[key] += 1

    def _connected(self) -> None:
        with self._cond:
            self._connections += 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self
        payload = json.dumps(REPLY).encode()
        busy = json.dumps({"error": "too many requests"}).encode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connections
            # Headers and body are two writes: with Nagle's algorithm the body would wait
            # for the client's delayed ACK of the headers (40 ms on Linux) on every reply.
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                stub._connected()

            def do_POST(self) -> None:
                key = _key(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                admitted = stub._admit()
                if admitted == "rejected":
                    stub._leave(served=False, outcome="rejected", key=key)
                    self._reply(429, busy, {"Retry-After": stub.retry_after})
                    return
                if admitted == "stopped":
                    stub._leave(served=False, outcome=None, key=key)
                    self.close_connection = True
                    return
                answered = False
                try:
                    stub._closing.wait(stub.latency_s)
                    answered = not (stub.hang or stub._closing.is_set())
                finally:
                    stub._leave(served=True, outcome="answered" if answered else None, key=key)
                if not answered:
                    self.close_connection = True
                    return
                self._reply(200, payload, {})

            def _reply(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


def _key(body: bytes) -> str | None:
    """``payload.id`` of a request body, or None for a body without one."""
    try:
        key = json.loads(body)["payload"]["id"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(key)


def _check_capacity(capacity: int | None) -> None:
    if capacity is not None and capacity < 1:
        raise ValueError(f"capacity must be at least 1 (or None: no limit), got {capacity}")
