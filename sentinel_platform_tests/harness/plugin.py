"""The suite's pytest plugin: a clean environment, the shared fixtures, the harness markers.

Loaded with ``-p sentinel_platform_tests.harness.plugin`` (``addopts`` in pyproject.toml),
before any conftest.py and before the platform is imported, because the settings read the
environment: a developer's ``REDIS_URL`` or ``SENTINEL_*`` must not leak into a test. Only
``SENTINEL_REDIS_SERVER`` stays: it picks the server binary the whole suite runs on (CI runs
the Redis-facing tests once more with ``SENTINEL_REDIS_SERVER=/usr/bin/redis-server``).

The fixtures live in :mod:`.fixtures` (``pytest_plugins`` below registers them for every
test); each test gets one marker per harness it uses (spark, dagster, processes, redis),
found at collection by :func:`.markers.mark_harnesses`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from sentinel_platform_tests.harness import spark_jvm

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
# Spark's Python workers must run this interpreter (the venv), or executors cannot import
# redis or sentinel_platform.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Every Spark JVM the suite starts, children's included, since they inherit the
# environment: C1 only, the serial collector and the class-data archive (see spark_jvm).
os.environ.update(spark_jvm.environment())
_KEPT = {"SENTINEL_REDIS_SERVER"}
for _name in [n for n in os.environ if n.startswith("SENTINEL_") or n == "REDIS_URL"]:
    if _name not in _KEPT:
        del os.environ[_name]

pytest_plugins = [
    "sentinel_platform_tests.harness.fixtures.servers",
    "sentinel_platform_tests.harness.fixtures.workers",
    "sentinel_platform_tests.harness.fixtures.services",
    "sentinel_platform_tests.harness.fixtures.models",
    "sentinel_platform_tests.harness.fixtures.platforms",
    "sentinel_platform_tests.harness.fixtures.cluster",
]


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from sentinel_platform_tests.harness.markers import mark_harnesses

    mark_harnesses(items)


#: The process building the suite's Spark class-data archive, if this one started it.
_archive_builder: subprocess.Popen[bytes] | None = None


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the Spark class-data archive if this run has Spark tests and no
    archive: in one process of the run (the only one, or xdist's first worker), in the
    background, since the JVMs that start before it is done run without it."""
    global _archive_builder
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        return
    if any(item.get_closest_marker("spark") for item in session.items):
        _archive_builder = spark_jvm.start_build()


def pytest_unconfigure() -> None:
    """Stop an unfinished archive build with the run (the next run starts it again)."""
    if _archive_builder is not None:
        spark_jvm.stop(_archive_builder)


#: SIGTERM's handler when the test process started.
_SIGTERM_AT_START = signal.getsignal(signal.SIGTERM)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Put SIGTERM's handler back after each test. Dagster's in-process execution maps
    SIGTERM to whatever SIGINT does and leaves it so: in a test process whose SIGINT is
    ignored (started from a background shell), one ``materialize`` left SIGTERM ignored, and
    every child the process started afterwards inherited the ignore and outlived its
    SIGTERM (seen in the reap and bench clean-up tests of a full run)."""
    if signal.getsignal(signal.SIGTERM) != _SIGTERM_AT_START:
        signal.signal(signal.SIGTERM, _SIGTERM_AT_START)
