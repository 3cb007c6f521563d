"""In-process consumers: the worker's own :class:`Consumer` built in the test's process.

``FAST_SETTINGS`` are the worker-process tests' short recovery timings as settings fields;
:func:`records_of` finds a message's attempt state whatever its layout. The
``make_consumer``, ``fast_settings`` and ``events`` fixtures are registered by the suite's
plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sentinel_platform.streams.consumer.loop import Consumer
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, attempt_key_prefix
from sentinel_platform_tests.harness.processes import FAST_TIMINGS

#: ``FAST_TIMINGS`` of the worker-process tests, as settings field names.
FAST_SETTINGS: dict[str, Any] = {
    name.removeprefix("SENTINEL_").lower(): int(value) for name, value in FAST_TIMINGS.items()
}

MakeConsumer = Callable[..., Consumer]


def records_of(client: RedisClient, keys: StreamKeys, message_id: str) -> list[str]:
    """Keys holding attempt state of ``message_id`` (as a key of its own or as fields).

    Looked up without assuming the layout (one hash per message, or fields of a shared
    hash): whatever key or field names a message id is its record.
    """
    holders = []
    for key in client.scan_iter(match=f"{attempt_key_prefix(keys)}*"):
        fields: Any = client.hkeys(key) if client.type(key) == "hash" else []
        if key.endswith(message_id) or any(f.startswith(message_id) for f in fields):
            holders.append(key)
    return holders
