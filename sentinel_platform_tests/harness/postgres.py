"""A real, throw-away PostgreSQL server for the tests: Debian's ``postgresql`` binaries,
``initdb`` into a temporary directory, ``pg_ctl`` on a free port, password authentication.

PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
``postgres`` system user (``runuser``) in a directory handed over to it. Where no
binaries are installed the tests skip, except in CI (``CI`` or ``REQUIRE_CLUSTER_TESTS=1``
set), where a missing server fails them: CI installs the package (``.ci/run``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

from sentinel_platform.redis_server import free_port

USER = "sentinel"
#: A password with characters that need percent-encoding in a URL, so the tests prove it
#: is handled (and hidden) as a whole.
PASSWORD = "Pg-s3cret/with@chars"
PASSWORD_IN_URL = "Pg-s3cret%2Fwith%40chars"
SYSTEM_USER = "postgres"


def require(reason: str) -> NoReturn:
    """Skip, or fail in CI: CI installs PostgreSQL, so there a missing one is a failure."""
    if os.environ.get("CI") or os.environ.get("REQUIRE_CLUSTER_TESTS") == "1":
        pytest.fail(f"PostgreSQL required in CI but {reason}", pytrace=False)
    pytest.skip(f"POSTGRESQL TESTS NOT RUN: {reason}")


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` with ``initdb``, else ``PATH``'s."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if candidates:
        return Path(candidates[-1]).parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


@dataclass
class PostgresServer:
    bindir: Path
    root: Path
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    def _argv(self, *argv: str) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", SYSTEM_USER, "--", *argv]
        return list(argv)

    def _run(self, *argv: str, timeout: float = 60) -> None:
        done = subprocess.run(self._argv(*argv), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stdout}{done.stderr}")

    def start(self) -> PostgresServer:
        pwfile = self.root / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            account = pwd.getpwnam(SYSTEM_USER)
            os.chown(self.root, account.pw_uid, account.pw_gid)
            os.chown(pwfile, account.pw_uid, account.pw_gid)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "--no-sync",
            "-E",
            "UTF8",
        )
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
            timeout=90,
        )
        return self

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        """A SQLAlchemy URL, as ``SENTINEL_DAGSTER_POSTGRES_URL`` takes it."""
        return f"postgresql+psycopg2://{USER}:{PASSWORD_IN_URL}@127.0.0.1:{self.port}/{database}"

    def _connect(self, database: str = "postgres") -> Any:
        """A superuser connection, the parts as keyword arguments (no URL for libpq)."""
        import psycopg2

        return psycopg2.connect(
            host="127.0.0.1", port=self.port, user=USER, password=PASSWORD, dbname=database
        )

    def execute(self, statement: str, params: tuple[object, ...] = ()) -> None:
        """Run one statement as the superuser, outside a transaction (CREATE DATABASE)."""
        connection = self._connect()
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
        finally:
            connection.close()

    def query(
        self, statement: str, params: tuple[object, ...] = (), database: str = "postgres"
    ) -> list[tuple[Any, ...]]:
        """The rows of one query, as the superuser, in ``database``."""
        connection = self._connect(database)
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
                return list(cursor.fetchall())
        finally:
            connection.close()

    def create_database(self, name: str | None = None) -> str:
        """A new, empty database; returns its URL."""
        import psycopg2

        name = name or f"sentinel_{uuid.uuid4().hex[:10]}"
        libpq_url = "postgresql://" + self.url().split("://", 1)[1]
        connection = psycopg2.connect(libpq_url)
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return self.url(name)


def start_postgres() -> PostgresServer:
    bindir = find_bindir()
    if bindir is None:
        require("no initdb (install Debian's `postgresql` package)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            require(f"running as root and there is no `{SYSTEM_USER}` user to run the server")
    root = Path(tempfile.mkdtemp(prefix="sentinel-pg-"))
    server = PostgresServer(bindir, root)
    try:
        return server.start()
    except Exception:
        log = server.log.read_text(errors="replace") if server.log.exists() else ""
        server.stop()
        raise RuntimeError(f"PostgreSQL did not start:\n{log[-3000:]}") from None
