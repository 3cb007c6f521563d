"""Fixtures of the fault drills: worker processes that can import the test processors.

The drills start real worker processes (``python -m sentinel_platform.workers <stream>``) through
the harness's :class:`~sentinel_platform_tests.harness.processes.Fleet`, which keeps each child's
output in a log file (the drills read those logs: a password must never appear in them) and SIGKILLs
any child still running when the test ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform_tests.harness.processes import Fleet, child_env


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """Real worker processes (their output in log files), SIGKILLed if still running at the end."""
    logs = tmp_path / "logs"
    logs.mkdir()
    with Fleet(logs) as owned:
        yield owned


@pytest.fixture
def drill_env(settings: Settings) -> dict[str, str]:
    """Environment of a worker process pointed at the session's test server."""
    return child_env(settings.redis_url_value, settings.home_dir)
