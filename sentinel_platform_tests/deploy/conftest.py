"""Fixtures of the deployment tests: a real PostgreSQL server for the session, a fresh
database per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sentinel_platform_tests.deploy.postgres import PostgresServer, start_postgres


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database on the test server (user and password included)."""
    return postgres_server.create_database()
