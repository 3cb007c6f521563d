"""Point the workers suite's own fixtures at the Redis Cluster (see ``suite_on_cluster``).

The workers suite's ``worker_env``/``start_worker``/``tx_keys`` and the in-process
``make_consumer`` derive from the root
``settings``/``settings_env``, so the imported test bodies run exactly as written, with
``REDIS_URL=redis+cluster://...``.
"""

from __future__ import annotations

from sentinel_platform_tests.scale_out.suite_on_cluster import make_settings
from sentinel_platform_tests.streams.conftest import events, fast_settings, make_consumer
from sentinel_platform_tests.workers.conftest import start_worker, tx_keys, worker_env

__all__ = [
    "events",
    "fast_settings",
    "make_consumer",
    "make_settings",
    "start_worker",
    "tx_keys",
    "worker_env",
]
