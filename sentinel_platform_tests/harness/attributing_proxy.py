"""A TCP relay in front of Redis that records which process opened each connection.

Used to prove *who* writes to Redis during a Spark publish. The relay accepts a
connection, and before forwarding a single byte it looks the peer up in ``/proc``: the
client socket is still open at that moment (its first command is waiting on us), so the
lookup cannot race with the connection closing. It then relays bytes unchanged in both
directions (the harness's generic ``Relay``) and counts the XADD commands each
connection sends. Nothing about Redis is simulated; the relay only observes.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from sentinel_platform_tests.harness.relay import Observer, Relay
from sentinel_platform_tests.harness.spark_standalone import ancestors

#: A RESP bulk string naming the command: redis-py sends ``$4\r\nXADD\r\n``.
XADD_TOKEN = b"$4\r\nXADD\r\n"
_TOKEN_TAIL = len(XADD_TOKEN) - 1


@dataclass
class Connection:
    """One client connection through the relay."""

    peer_port: int
    pid: int | None
    #: (pid, command line) of every ancestor, read at accept time (processes may exit later)
    ancestry: list[tuple[int, str]] = field(default_factory=list)
    xadds: int = 0


def _hex_endpoint(port: int) -> str:
    return f"0100007F:{port:04X}"


def socket_inode(local_port: int, remote_port: int) -> int | None:
    """Inode of the IPv4 loopback socket ``127.0.0.1:local -> 127.0.0.1:remote``."""
    wanted = (_hex_endpoint(local_port), _hex_endpoint(remote_port))
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        if (parts[1], parts[2]) == wanted:
            return int(parts[9])
    return None


def pid_of_socket(inode: int) -> int | None:
    """The process holding ``socket:[inode]`` (a scan of every process' fd table)."""
    target = f"socket:[{inode}]"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) == target:
                        return int(entry.name)
    return None


class AttributingProxy(Relay):
    """Relay ``127.0.0.1:<port>`` to ``127.0.0.1:<upstream_port>``; see :attr:`connections`."""

    def __init__(self, upstream_port: int) -> None:
        super().__init__(upstream_port)
        self.connections: list[Connection] = []

    def accepted(self, peer_port: int) -> Observer:
        """Attribute the connection to its process, then count the XADDs it sends."""
        # Attribute first: the peer is blocked on its first reply until we forward.
        inode = socket_inode(peer_port, self.port)
        pid = pid_of_socket(inode) if inode else None
        lineage = [(p, command_of(p)) for p in ancestors(pid)] if pid else []
        connection = Connection(peer_port, pid, lineage)
        with self._lock:
            self.connections.append(connection)
        return _xadd_counter(connection)

    def xadds_by_pid(self) -> dict[int | None, int]:
        totals: dict[int | None, int] = {}
        with self._lock:
            for connection in self.connections:
                if connection.xadds:
                    totals[connection.pid] = totals.get(connection.pid, 0) + connection.xadds
        return totals


def _xadd_counter(connection: Connection) -> Observer:
    """Count XADD tokens in a byte stream, including tokens split across chunks."""
    tail = b""

    def observe(chunk: bytes) -> None:
        nonlocal tail
        window = tail + chunk
        connection.xadds += window.count(XADD_TOKEN)
        tail = window[-_TOKEN_TAIL:]

    return observe


def command_of(pid: int) -> str:
    with contextlib.suppress(OSError):
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return re.sub(rb"\x00+", b" ", raw).decode(errors="replace").strip()
    return ""
