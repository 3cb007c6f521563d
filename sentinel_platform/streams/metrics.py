"""Worker counters and gauges, served in the Prometheus text format (version 0.0.4).

An operator needs to see, per worker, how much it processed, recovered, retried and
dead-lettered, and how deep its pending list is, without reading logs. This module
keeps those numbers thread-safe (the heartbeat thread and the loop both write) and
serves them from a tiny standard-library HTTP server, so the workers need no client
library. Names are fixed up front: a typo raises instead of silently creating a new
series nobody scrapes.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

COUNTERS: dict[str, str] = {
    "processed": "Messages processed and acknowledged with their effect.",
    "recovered": "Messages claimed from consumers whose lease had expired.",
    "dead_lettered": "Messages moved to the dead-letter stream.",
    "retried": "Processing attempts that failed and were left pending for a retry.",
    "skipped_alive": "Pending messages not claimed because their consumer's lease is alive.",
    "duplicate_acks": "Redelivered messages acknowledged without a second effect.",
    "trimmed": "Pending ids whose entry had been trimmed or deleted from the stream.",
}
GAUGES: dict[str, str] = {
    "pel_depth": "Messages delivered to the group but not yet acknowledged.",
    "lag": "Backlog not yet delivered to the group plus pending messages.",
}

_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if value.is_integer() else repr(value)


class Metrics:
    """Counters and gauges of one worker, each rendered with the same constant labels."""

    def __init__(
        self,
        prefix: str = "sentinel_worker",
        labels: Mapping[str, str] | None = None,
        counters: Mapping[str, str] = COUNTERS,
        gauges: Mapping[str, str] = GAUGES,
    ) -> None:
        for name in (prefix, *(labels or {}), *counters, *gauges):
            if not _NAME.match(name):
                raise ValueError(f"{name!r} is not a valid Prometheus metric or label name")
        self.prefix = prefix
        self.labels = dict(labels or {})
        self._help = {**counters, **gauges}
        self._counters = set(counters)
        self._values: dict[str, float] = dict.fromkeys(self._help, 0.0)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def inc(self, name: str, amount: float = 1) -> None:
        if name not in self._counters:
            raise KeyError(
                f"{name!r} is not a counter (known: {', '.join(sorted(self._counters))})"
            )
        if amount < 0:
            raise ValueError(f"counter {name} cannot decrease (amount {amount})")
        with self._lock:
            self._values[name] += amount

    def set_gauge(self, name: str, value: float) -> None:
        if name not in self._help or name in self._counters:
            raise KeyError(f"{name!r} is not a gauge")
        with self._lock:
            self._values[name] = float(value)

    def snapshot(self) -> dict[str, float]:
        """Current values by short name (``processed``, ``pel_depth``, ...)."""
        with self._lock:
            return dict(self._values)

    def render(self) -> str:
        values = self.snapshot()
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in self.labels.items())
        suffix = f"{{{labels}}}" if labels else ""
        lines = []
        for name, value in values.items():
            is_counter = name in self._counters
            full = f"{self.prefix}_{name}" + ("_total" if is_counter else "")
            help_text = self._help[name].replace("\\", "\\\\").replace("\n", "\\n")
            lines.append(f"# HELP {full} {help_text}")
            lines.append(f"# TYPE {full} {'counter' if is_counter else 'gauge'}")
            lines.append(f"{full}{suffix} {_format(value)}")
        return "\n".join(lines) + "\n"

    def serve(self, port: int = 0) -> int:
        """Serve ``GET /metrics`` on 127.0.0.1 from a daemon thread; return the bound port."""
        if self._server is not None:
            raise RuntimeError("metrics server already running")
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval keeps close() (and so a worker's shutdown) quick.
        threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="metrics-http", daemon=True
        ).start()
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _handler_for(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class MetricsHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            body = metrics.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            # The default writes plain text to stderr, which would break JSON log lines.
            pass

    return MetricsHandler
