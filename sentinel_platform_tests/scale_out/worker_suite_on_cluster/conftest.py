"""Point the workers suite's own fixtures at the Redis Cluster (see ``suite_on_cluster``).

The shared ``worker_env``/``start_worker``/``tx_keys`` and the in-process ``make_consumer``
derive from ``settings``/``settings_env``, which derive from ``make_settings``: overriding
it here runs the imported test bodies exactly as written, with
``REDIS_URL=redis+cluster://...``. The shared ``worker_env`` is declared here again so it,
not the scale-out folder's (built on ``cluster_env``), is the one these tests get.
"""

from __future__ import annotations

from sentinel_platform_tests.harness.fixtures.workers import worker_env
from sentinel_platform_tests.harness.suite_on_cluster import make_settings

__all__ = ["make_settings", "worker_env"]
