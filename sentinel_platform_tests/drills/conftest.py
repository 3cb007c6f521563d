"""Fixtures of the fault drills: worker processes that can import the bench processors.

The drills start real worker processes (``python -m workers.watch_*``) through
:class:`bench._common.Fleet`, which keeps each child's output in a log file (the drills
read those logs: a password must never appear in them) and SIGKILLs any child still
running when the test ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench._common import Fleet, child_env
from sentinel_platform.settings import Settings


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
