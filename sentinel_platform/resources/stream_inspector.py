"""``StreamInspector``: read-only Redis access for the operations sensors and checks.

Kept apart from the publisher resource on purpose: watching the pipeline must never be
able to write to the data streams. The only writes its users make are the producer-pause
flag, which is the sensors' job to own, and the pruning of an empty hand-back holder from
a consumer group (``operations.handback``), which no worker does. It holds no
configuration: the caller passes the settings it got from the settings resource, so a
check's thresholds and the server it reads always come from the same settings.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect


class StreamInspector(dg.ConfigurableResource):
    """A short-lived Redis client for one sensor tick or check run."""

    @contextmanager
    def client(self, settings: Settings) -> Iterator[RedisClient]:
        client = connect(settings)
        try:
            yield client
        finally:
            client.close()
