"""Serving a Prometheus registry over HTTP, with a deadline on every connection.

``prometheus_client.start_http_server`` gives each connection a thread that waits for
the request as long as the client likes: a client that connects and sends nothing (a
stuck scraper, a port scan) holds a thread of the worker or the exporter forever. This is
the same server, built from the library's public parts (its WSGI app, a threading WSGI
server), with a read deadline on every connection (:data:`READ_TIMEOUT_S`). A connection
that misses it, or breaks, is closed and logged at DEBUG: it is the client's problem and
no reason for a traceback on stderr.
"""

from __future__ import annotations

import logging
import socket
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger(__name__)

#: How long a connection may take to send its request (a scrape sends it at once).
READ_TIMEOUT_S = 10.0


class _Handler(WSGIRequestHandler):
    timeout = READ_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not log lines."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that timed out or broke: logged at DEBUG, the server goes on."""
        log.debug("metrics_connection_failed", exc_info=True)


def serve_registry(
    registry: CollectorRegistry,
    port: int,
    host: str,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``registry`` on ``host:port`` (0: a free port) from a daemon thread, every
    connection with ``read_timeout_s`` to send its request; the server and its thread.
    Raises ``OSError`` when the address cannot be bound."""
    family, address = _family(host, port)
    handler = type("Handler", (_Handler,), {"timeout": read_timeout_s})
    server_class = type("Server", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(address, port, make_wsgi_app(registry), server_class, handler)
    thread = threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True)
    thread.start()
    return server, thread


def _family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family and address to bind ``host`` with (an IPv6 host, a name)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _type, _proto, _name, sockaddr = next(iter(infos))
    return family, str(sockaddr[0])


__all__ = ["READ_TIMEOUT_S", "serve_registry"]
