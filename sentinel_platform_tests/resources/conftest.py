"""Fixtures shared by the resource tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.redis_server import RedisServer
from sentinel_platform_tests.resources.secret_config import SECRET


@pytest.fixture
def password_redis(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    """A real server that refuses every client without the password."""
    server = RedisServer(redis_binary, tmp_path / "redis-pw", config={"requirepass": SECRET})
    yield server.start()
    server.stop()
