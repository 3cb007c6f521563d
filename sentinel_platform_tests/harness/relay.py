"""A TCP relay whose upstream can be switched: a stable address in front of a failover.

Clients connect to ``127.0.0.1:<port>``; each connection is relayed byte for byte to
the upstream that was current when it was accepted. :meth:`Relay.switch` changes the
upstream for *new* connections only, as a virtual IP, a DNS name or a Kubernetes service
does after a failover: connections opened before keep talking to the old server (which,
demoted to a replica, answers writes with READONLY) until the client drops them.

The relay only forwards; a subclass that overrides :meth:`Relay.accepted` may look at
each new connection and at the bytes its client sends, without changing them.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable

#: Sees every chunk a client sends upstream, before it is forwarded.
Observer = Callable[[bytes], None]


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
                client, (_host, peer_port) = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client, peer_port), daemon=True).start()

    def accepted(self, peer_port: int) -> Observer | None:
        """Called once per connection before any byte is relayed; returns an observer.

        The client is blocked on its first reply until this returns, so a subclass can
        inspect the still-open peer socket here. The returned callable (if any) sees the
        client-to-upstream bytes; the relay itself only forwards.
        """
        return None

    def _serve(self, client: socket.socket, peer_port: int) -> None:
        observe = self.accepted(peer_port)
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()  # the client sees a refused/closed connection, as with no server
            return
        with self._lock:
            self._open += [client, upstream]
        threading.Thread(target=self._pipe, args=(upstream, client, None), daemon=True).start()
        self._pipe(client, upstream, observe)

    def _pipe(self, source: socket.socket, sink: socket.socket, observe: Observer | None) -> None:
        try:
            while chunk := source.recv(65536):
                if observe is not None:
                    observe(chunk)
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
