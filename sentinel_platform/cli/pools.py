"""The publish pools' limits, set in the Dagster instance's database by ``sentinel up``.

Every stream's publish asset declares the concurrency pool its spec names
(:attr:`~sentinel_platform.registry.StreamSpec.pool`); Dagster takes a run's pools from
its plan, so the UI's *Materialize* (the implicit asset job), asset backfills, the lag
gate's runs and GraphQL launches all carry them. ``dagster.yaml`` runs the queue at run
granularity (:mod:`sentinel_platform.cli.dagster_home`), but Dagster 1.13 keeps the
limit of each pool in the instance's database, not in that file (``dagster instance
concurrency set``). So ``sentinel up`` sets one slot per declared stream's pool at every
start, before the daemon starts: idempotent, and a stream a deployment adds
(``SENTINEL_STREAM_MODULES``) gets its limit at the next start. ``sentinel
migrate-storage`` copies these limits along with the rest of the instance.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from sentinel_platform.cli.dagster_home import POSTGRES_ENV
from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings

#: At most this many runs publishing one stream are in progress at once.
PUBLISH_RUNS_PER_STREAM = 1


def publish_pool_limits(specs: Iterable[StreamSpec]) -> dict[str, int]:
    """The limit of every declared stream's publish pool, by pool name."""
    return {spec.pool: PUBLISH_RUNS_PER_STREAM for spec in specs}


def ensure_pool_limits(
    dagster_home: Path, settings: Settings, limits: Mapping[str, int]
) -> dict[str, int]:
    """Set ``limits`` in the instance of ``dagster_home``; the limits that changed (a pool
    that had none, or another one), by pool name.

    The instance reads the PostgreSQL URL from the environment (``dagster.yaml`` names the
    variable): the settings' value is put there when the environment lacks it, as the
    Dagster processes this one starts need it too.
    """
    import dagster as dg  # heavy: only when a Dagster instance is prepared

    url = settings.dagster_postgres_url_value
    if url and not os.environ.get(POSTGRES_ENV):
        os.environ[POSTGRES_ENV] = url
    changed: dict[str, int] = {}
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        storage = instance.event_log_storage
        if not storage.supports_global_concurrency_limits:
            raise RuntimeError(
                f"the Dagster instance at {dagster_home} cannot hold pool limits "
                "(run `dagster instance migrate` with DAGSTER_HOME set to it)"
            )
        current = {pool.name: pool for pool in storage.get_pool_limits()}
        for pool, limit in limits.items():
            known = current.get(pool)
            if known is None or known.from_default or known.limit != limit:
                storage.set_concurrency_slots(pool, limit)
                changed[pool] = limit
    return changed
