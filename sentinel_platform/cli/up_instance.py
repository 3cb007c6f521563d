"""The Dagster instance made ready before ``sentinel up`` starts any process.

A bad instance must fail start-up with one line naming the setting, not a daemon crash
loop later: the instance's PostgreSQL (``SENTINEL_DAGSTER_POSTGRES_URL``, when set) must
answer, ``dagster.yaml`` is written or checked, and the publish pools' limits are set in
the instance before the daemon can dequeue a run without them. No message shows any part
of the PostgreSQL password.
"""

from __future__ import annotations

import logging

from sentinel_platform.cli.common import CliError
from sentinel_platform.cli.dagster_home import POSTGRES_ENV, DagsterHomeError, ensure_dagster_home
from sentinel_platform.cli.pools import ensure_pool_limits, publish_pool_limits
from sentinel_platform.redaction import scrub
from sentinel_platform.registry import stream_specs
from sentinel_platform.settings import Settings, redact_url

log = logging.getLogger("sentinel.up")

POSTGRES_CONNECT_TIMEOUT_S = 10


def check_postgres(settings: Settings) -> str | None:
    """Why the Dagster instance's PostgreSQL cannot be used, or None (also when unset). The
    reason names the setting and shows the URL redacted, never any part of its password.

    The URL is read as Dagster reads it: dagster-postgres hands it to SQLAlchemy, whose
    ``make_url`` parses it (a ``%`` that starts no %-escape stays a ``%``) and whose psycopg2
    dialect passes the parts to ``psycopg2.connect`` as keyword arguments. Giving libpq the
    URL itself would refuse what Dagster accepts, and libpq's error quotes the password.
    """
    url = settings.dagster_postgres_url_value
    if not url:
        return None
    import psycopg2

    shown = f"{POSTGRES_ENV}={redact_url(url)}"
    try:
        connect_args = postgres_connect_args(url)
    except Exception:  # SQLAlchemy's parse errors may quote the URL: never shown
        return f"{shown}: SQLAlchemy cannot read it as a URL (percent-encode ':', '@', '/')"
    connect_args.setdefault("connect_timeout", POSTGRES_CONNECT_TIMEOUT_S)
    try:
        connection = psycopg2.connect(**connect_args)
    except psycopg2.Error as exc:
        reason = " ".join(str(exc).split())
        return scrub(f"{shown}: cannot connect to PostgreSQL ({reason or type(exc).__name__})")
    connection.close()
    return None


def postgres_connect_args(url: str) -> dict[str, object]:
    """The keyword arguments SQLAlchemy's psycopg2 dialect gives ``psycopg2.connect`` for
    ``url`` (user, password decoded, host, port, dbname, query parameters), as Dagster's
    storage connects."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    args, kwargs = parsed.get_dialect()().create_connect_args(parsed)
    if any(args):
        raise ValueError("a DSN string instead of keyword arguments")
    return dict(kwargs)


def prepare_instance(settings: Settings) -> None:
    """Check the instance's PostgreSQL (if any) and write or check ``dagster.yaml``."""
    problem = check_postgres(settings)
    if problem:
        raise CliError(problem)
    try:
        ensure_dagster_home(settings.dagster_home, settings)
    except DagsterHomeError as exc:
        raise CliError(str(exc)) from None
    limits = publish_pool_limits(stream_specs(settings))
    try:  # before the daemon starts: no run is dequeued without its pool's limit
        changed = ensure_pool_limits(settings.dagster_home, settings, limits)
    except Exception as exc:  # a database error: say what failed, never the password
        raise CliError(
            f"cannot set the publish pools' limits in the Dagster instance: "
            f"{scrub(f'{type(exc).__name__}: {exc}')}"
        ) from None
    where = "PostgreSQL" if settings.dagster_postgres_url_value else "SQLite"
    log.info(
        "Dagster instance: %s storage, at most %d runs at once, one publish run per stream "
        "(pools %s%s)",
        where,
        settings.max_concurrent_runs,
        ", ".join(sorted(limits)),
        f"; set {', '.join(sorted(changed))}" if changed else "",
    )
