"""A test HTTP server on a free local port for the length of a block: the one serving
loop of the harness's provider stand-ins."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: How often the serving thread looks for a shutdown (seconds).
POLL_S = 0.05
#: The longest a stop waits for the serving thread.
JOIN_S = 5.0


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 at a free port until the block ends; yields
    ``http://127.0.0.1:<port>``. Each request runs on a daemon thread, so a handler left
    waiting never holds the test run; the stop is bounded by :data:`JOIN_S`. Answers go
    out without Nagle's delay (``TCP_NODELAY``), as a hosted API's front end sends them:
    with it, an answer's body written after its headers could wait for the caller's
    delayed acknowledgement, 40 ms on Linux, a delay no provider adds."""
    nodelay = type(handler.__name__, (handler,), {"disable_nagle_algorithm": True})
    server = ThreadingHTTPServer(("127.0.0.1", 0), nodelay)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=JOIN_S)
