"""The PostgreSQL password of ``SENTINEL_DAGSTER_POSTGRES_URL`` is never shown, whatever
characters it holds, and ``sentinel up`` reads the URL as Dagster does.

A role on the real test server has a password with a ``%`` that starts no %-escape
(``50%off-``), quotes, a backslash and a space, written into the URL raw as an operator
would. The real ``sentinel up`` must accept it (Dagster's own storage connects with it and
creates its tables) and a wrong password must fail start-up naming the setting; neither
output may hold any form of either password. The scrubber is also checked against the
error texts libpq and psycopg2 really produce for bad DSNs and a refused password.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from sentinel_platform.redis_server import RedisServer, free_port
from sentinel_platform_tests.harness.postgres import PostgresServer
from sentinel_platform_tests.harness.sentinel_up import SENTINEL
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = pytest.mark.slow  # the real `sentinel up` with Dagster on PostgreSQL

#: In every password below; no output may contain it.
MARK = "Zq9h1dden"
#: The working password: `%of` is no %-escape, so the URL holds the `%` raw.
AWKWARD = f"50%off-{MARK}\"q'u\\ote sp ace"
#: A wrong one, with the same trap.
WRONG = f"50%off-{MARK} wr'ong"
#: Percent-encoded in the URL (Dagster's SQLAlchemy decodes them): the rest stays raw.
URL_ESCAPES = {"@": "%40", "/": "%2F", ":": "%3A", "#": "%23", "?": "%3F"}


def _in_url(password: str) -> str:
    return "".join(URL_ESCAPES.get(char, char) for char in password)


def _forms(password: str) -> list[str]:
    """Every way the password could be shown: raw, as in the URL, percent-encoded, and the
    piece no other text has."""
    return [
        password,
        _in_url(password),
        quote(password, safe=""),
        quote_plus(password, safe=""),
        MARK,
        "50%off",
        "50%25off",
    ]


def _leaks(text: str, password: str) -> list[str]:
    return [form for form in _forms(password) if form in text]


@pytest.fixture(scope="module")
def awkward_db(postgres_server: PostgresServer) -> dict[str, Any]:
    """A role with the awkward password, owning a new database: its libpq keyword args."""
    role = f"awk_{uuid.uuid4().hex[:8]}"
    database = f"dagster_{uuid.uuid4().hex[:8]}"
    postgres_server.execute(f'CREATE ROLE "{role}" LOGIN PASSWORD %s', (AWKWARD,))
    postgres_server.execute(f'CREATE DATABASE "{database}" OWNER "{role}"')
    return {"host": "127.0.0.1", "port": postgres_server.port, "user": role, "dbname": database}


def _url(db: dict[str, Any], password: str) -> str:
    return (
        f"postgresql+psycopg2://{db['user']}:{_in_url(password)}@{db['host']}:{db['port']}"
        f"/{db['dbname']}"
    )


def _tables(postgres_server: PostgresServer, database: str) -> set[str]:
    rows = postgres_server.query(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'", database=database
    )
    return {row[0] for row in rows}


@pytest.fixture
def up_env(tmp_path: Path, redis_server: RedisServer) -> Callable[[str], dict[str, str]]:
    def env(url: str) -> dict[str, str]:
        home = tmp_path / "home"
        return {
            **os.environ,
            "REDIS_URL": redis_server.url,
            "SENTINEL_HOME": str(home),
            "DAGSTER_HOME": str(home / "dagster"),
            "SENTINEL_DAGSTER_POSTGRES_URL": url,
            "PYTHONUNBUFFERED": "1",
        }

    return env


def _up_argv() -> list[str]:
    return [
        str(SENTINEL),
        "up",
        "--no-demo",
        "--transaction-workers",
        "0",
        "--axiom-workers",
        "0",
        "--port",
        str(free_port()),
    ]


@pytest.fixture
def sentinel_up() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The ``sentinel up`` processes a test starts; SIGTERM (then SIGKILL) on the way out."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def test_sentinel_up_accepts_a_raw_percent_in_the_password_and_never_shows_it(
    postgres_server: PostgresServer,
    awkward_db: dict[str, Any],
    up_env: Callable[[str], dict[str, str]],
    sentinel_up: list[subprocess.Popen[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = up_env(_url(awkward_db, AWKWARD))
    process = subprocess.Popen(_up_argv(), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sentinel_up.append(process)
    dagster_tables = {"runs", "event_logs", "instigators"}

    def dagster_connected_or_exited() -> bool:
        return process.poll() is not None or dagster_tables <= _tables(
            postgres_server, awkward_db["dbname"]
        )

    wait_until(dagster_connected_or_exited, 240, 0.5, "Dagster's tables in the database")
    assert process.poll() is None, "`sentinel up` refused the URL Dagster accepts"
    process.send_signal(signal.SIGTERM)
    stdout, stderr = (part.decode(errors="replace") for part in process.communicate(timeout=150))
    assert process.returncode == 0, stderr[-3000:]
    assert "Dagster instance: PostgreSQL storage" in stderr
    assert not _leaks(stdout + stderr, AWKWARD)
    up_log = Path(env["SENTINEL_HOME"], "logs", "sentinel-up.log").read_text()
    assert not _leaks(up_log, AWKWARD)
    # The home `sentinel up` prepared reads the same database through Dagster's own API.
    import dagster as dg

    monkeypatch.setenv("SENTINEL_DAGSTER_POSTGRES_URL", env["SENTINEL_DAGSTER_POSTGRES_URL"])
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert instance.get_runs() == []


def test_a_wrong_password_names_the_setting_and_shows_none_of_it(
    awkward_db: dict[str, Any],
    up_env: Callable[[str], dict[str, str]],
    sentinel_up: list[subprocess.Popen[bytes]],
) -> None:
    process = subprocess.Popen(
        _up_argv(),
        env=up_env(_url(awkward_db, WRONG)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    sentinel_up.append(process)
    stdout, stderr = (part.decode(errors="replace") for part in process.communicate(timeout=120))
    assert process.returncode == 1
    assert "SENTINEL_DAGSTER_POSTGRES_URL=postgresql+psycopg2://" in stderr
    assert "password authentication failed" in stderr
    assert not _leaks(stdout + stderr, WRONG)
    assert not _leaks(stdout + stderr, AWKWARD)


def _dsn_errors(db: dict[str, Any], password: str) -> dict[str, str]:
    """The error texts of real connection attempts, by how the password was handed over."""
    import psycopg2

    where = f"host={db['host']} port={db['port']} dbname={db['dbname']} user={db['user']}"
    attempts: dict[str, Callable[[], object]] = {
        "uri": lambda: psycopg2.connect(
            f"postgresql://{db['user']}:{_in_url(password)}@{db['host']}:{db['port']}/x"
        ),
        "keyword-dsn-unquoted": lambda: psycopg2.connect(f"{where} password={password}"),
        "keyword-dsn-half-quoted": lambda: psycopg2.connect(f"{where} password='{password}"),
        "keywords-wrong-password": lambda: psycopg2.connect(**db, password=password),
        "keywords-bad-option": lambda: psycopg2.connect(**db, password=password, sslmode="x"),
    }
    errors = {}
    for name, attempt in attempts.items():
        with pytest.raises(psycopg2.Error) as raised:
            attempt()
        errors[name] = str(raised.value)
    return errors


def test_scrub_hides_the_password_in_real_libpq_and_psycopg2_errors(
    awkward_db: dict[str, Any],
) -> None:
    from sentinel_platform.redaction import remember_secret, scrub

    url = _url(awkward_db, WRONG)
    errors = _dsn_errors(awkward_db, WRONG)
    assert any(_leaks(text, WRONG) for text in errors.values())  # they do quote it
    assert "password authentication failed" in errors["keywords-wrong-password"]
    remember_secret(url)  # as loading the settings does
    for name, text in errors.items():
        shown = scrub(text)
        assert not _leaks(shown, WRONG), f"{name}: {shown}"
        pieces = [quoted for quoted in re.findall(r'"([^"]*)"', shown) if quoted in WRONG]
        assert not pieces, f"{name} shows a piece of the password: {shown}"
    assert scrub(errors["keywords-wrong-password"]) == errors["keywords-wrong-password"]


@pytest.mark.parametrize(
    ("url", "args"),
    [
        (
            "postgresql+psycopg2://u:50%off-pw@db:5433/d?sslmode=require",
            {"user": "u", "password": "50%off-pw", "host": "db", "port": 5433, "dbname": "d"}
            | {"sslmode": "require"},
        ),
        (
            "postgresql+psycopg2://u:a%40b%2Fc%3Ad%25e@db/d",
            {"user": "u", "password": "a@b/c:d%e", "host": "db", "dbname": "d"},
        ),
    ],
)
def test_the_check_reads_the_url_as_sqlalchemy_does(url: str, args: dict[str, object]) -> None:
    from sentinel_platform.cli.up_instance import postgres_connect_args

    assert postgres_connect_args(url) == args
