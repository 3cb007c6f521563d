"""A redis-server of a test's own that the test can freeze (SIGSTOP) and thaw (SIGCONT).

Frozen, the server accepts connections and never answers, like a stalled VM or a server
stuck in a long fork: what every bounded wait of the workers is measured against. It is
the test's own, so freezing it touches no other test; it is always thawed before it stops.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys


@dataclass
class FreezableServer:
    server: RedisServer
    settings: Settings
    client: RedisClient
    keys: StreamKeys
    frozen: bool = False

    @property
    def url(self) -> str:
        return self.server.url

    def freeze(self) -> None:
        assert self.server.pid is not None
        os.kill(self.server.pid, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        if self.frozen and self.server.pid is not None:
            os.kill(self.server.pid, signal.SIGCONT)
        self.frozen = False


@contextlib.contextmanager
def freezable_server(redis_binary: str, directory: Path) -> Iterator[FreezableServer]:
    """Start the server in ``directory``; thawed and stopped on exit."""
    server = RedisServer(redis_binary, directory / "own-redis").start()
    settings = load_settings(redis_url=server.url, home=directory / "home")
    client = connect(settings)
    own = FreezableServer(server, settings, client, transaction_keys(settings))
    try:
        yield own
    finally:
        own.thaw()
        client.close()
        server.stop()
