"""A TCP relay whose upstream can be switched: a stable address in front of a failover.

Clients connect to ``127.0.0.1:<port>``; each connection is relayed byte for byte to
the upstream that was current when it was accepted. :meth:`Relay.switch` changes the
upstream for *new* connections only, as a virtual IP, a DNS name or a Kubernetes service
does after a failover: connections opened before keep talking to the old server (which,
demoted to a replica, answers writes with READONLY) until the client drops them.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    """Relay ``127.0.0.1:port`` to ``127.0.0.1:upstream_port`` (switchable)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._server: socket.socket | None = None
        self._closed = threading.Event()
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.getsockname()[1]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Relay:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(128)
        self._server = server
        threading.Thread(target=self._accept_loop, name="relay-accept", daemon=True).start()
        return self

    def switch(self, upstream_port: int) -> None:
        """Send new connections to ``upstream_port``; open ones stay where they are."""
        self.upstream_port = upstream_port

    def _accept_loop(self) -> None:
        assert self._server is not None
        while not self._closed.is_set():
            try:
                client, _peer = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()  # the client sees a refused/closed connection, as with no server
            return
        with self._lock:
            self._open += [client, upstream]
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        self._pipe(client, upstream)

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._closed.set()
        if self._server is not None:
            self._server.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.close()
