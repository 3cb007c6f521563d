"""A TCP relay in front of Redis that can lose the reply of one XREADGROUP.

Armed, it swallows the next non-empty XREADGROUP reply and closes that connection, as a
network failure right after the server ran the read would: the server has delivered the
batch (it sits in the consumer's PEL with one delivery counted) and the client never
sees it. Everything else is relayed byte for byte.
"""

from __future__ import annotations

import contextlib
import socket
import threading

#: Replies of a read that delivered nothing (RESP2 null array, RESP3 null).
_EMPTY_REPLIES = (b"*-1\r\n", b"_\r\n")


class LossyRelay:
    """Relay ``127.0.0.1:port`` to ``127.0.0.1:upstream_port``; :meth:`arm` loses one read."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.lost = threading.Event()
        self._armed = threading.Event()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._sockets: list[socket.socket] = [self._server]
        threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self._server.getsockname()[1]}/0"

    def arm(self) -> None:
        self._armed.set()

    def close(self) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._sockets += [client, upstream]
            last_command = [b""]
            threading.Thread(
                target=self._pump_up, args=(client, upstream, last_command), daemon=True
            ).start()
            threading.Thread(
                target=self._pump_down, args=(upstream, client, last_command), daemon=True
            ).start()

    def _pump_up(self, client: socket.socket, upstream: socket.socket, last: list[bytes]) -> None:
        with contextlib.suppress(OSError):
            while chunk := client.recv(65536):
                last[0] = chunk
                upstream.sendall(chunk)
        self._close(client, upstream)

    def _pump_down(self, upstream: socket.socket, client: socket.socket, last: list[bytes]) -> None:
        with contextlib.suppress(OSError):
            while chunk := upstream.recv(65536):
                reading = b"XREADGROUP" in last[0].upper()
                if self._armed.is_set() and reading and chunk not in _EMPTY_REPLIES:
                    self._armed.clear()
                    self.lost.set()
                    break  # the batch was delivered by the server; the client never sees it
                client.sendall(chunk)
        self._close(client, upstream)

    @staticmethod
    def _close(*sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
