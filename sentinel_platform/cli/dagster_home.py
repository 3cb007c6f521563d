"""``DAGSTER_HOME`` under ``SENTINEL_HOME``, so run history and sensor cursors survive restarts.

``dagster dev`` without a ``DAGSTER_HOME`` keeps everything in a temporary directory, and
a sensor that forgets its cursor on every restart re-alerts on old dead letters. The
instance config written here is minimal and never overwritten once it exists.
"""

from __future__ import annotations

from pathlib import Path

DAGSTER_YAML = """\
# Written by `sentinel up` because none existed; edit freely, it is not overwritten.
telemetry:
  enabled: false
# Each run of the Spark assets starts a JVM: keep a small machine responsive.
concurrency:
  runs:
    max_concurrent_runs: 2
"""


def ensure_dagster_home(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    config = path / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML)
    return path
