"""No output path ever shows a password, whatever shape the URL carrying it has.

Every path an operator sees is driven for real: the worker process (stderr and its JSON
log lines, a crash's traceback included), ``sentinel status``, ``sentinel up``, exceptions
(``str``/``repr`` and the formatted traceback with its chain), the Dagster code location's
load error (``dagster definitions validate``) and a Dagster run whose resource cannot
connect. The password travels in the user-info (plain or percent-encoded) or in the query
string (redis-py honours ``?password=``), under ``redis://``, ``rediss://`` and
``redis+cluster://``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import redis

from sentinel_platform.redis_server import RedisServer, free_port
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.settings import SettingsError, load_settings
from sentinel_platform.streams.plumbing.connection import connect
from sentinel_platform.streams.plumbing.keys import axiom_keys
from sentinel_platform_tests.harness.processes import Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.strategies import valid_axiom
from sentinel_platform_tests.harness.waits import wait_until

#: Every password below contains this; none of the outputs may.
SECRET = "s3cret"
BAD_SETTINGS_URLS = {
    "wrong-scheme": "http://admin:s3cretpw@host/0",
    "wrong-scheme-percent-encoded": "http://admin:s3cret%40pw@host/0",
    "wrong-scheme-query": "ftp://host/0?password=s3cretpw",
    "port-not-a-number": "redis://admin:s3cretpw@host:notaport/0",
    "rediss-port-out-of-range": "rediss://admin:s3cretpw@host:99999/0",
    "cluster-broken-ipv6": "redis+cluster://admin:s3cretpw@[::1/0",
}
UNREACHABLE_PORT = free_port()
UNREACHABLE_URLS = {
    "userinfo": f"redis://admin:s3cretpw@127.0.0.1:{UNREACHABLE_PORT}/0",
    "percent-encoded": f"redis://admin:s3cret%40pw@127.0.0.1:{UNREACHABLE_PORT}/0",
    "query-string": f"redis://127.0.0.1:{UNREACHABLE_PORT}/0?password=s3cretpw",
    "rediss": f"rediss://admin:s3cretpw@127.0.0.1:{UNREACHABLE_PORT}/0",
    "cluster": f"redis+cluster://admin:s3cretpw@127.0.0.1:{UNREACHABLE_PORT}/0",
}
BIN = Path(sys.executable).parent
PASSWORD = "s3cret-Query-Pw-42"


def _env(url: str, home: Path) -> dict[str, str]:
    env = child_env(url, home)
    env["DAGSTER_HOME"] = str(home / "dagster")
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    return env


def _run(argv: list[str], env: dict[str, str], timeout_s: float = 120) -> tuple[int, str]:
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout_s, cwd=Path.cwd()
    )
    return done.returncode, done.stdout + done.stderr


def _everything_shown(exc: BaseException) -> str:
    return f"{exc}\n{exc!r}\n" + "".join(traceback.format_exception(exc))


def _log_dir_text(home: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (home / "logs").glob("*.log"))


@pytest.fixture
def query_password_redis(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    """A real server that demands a password, given to the platform in the query string."""
    server = RedisServer(redis_binary, tmp_path / "redis", config={"requirepass": PASSWORD})
    yield server.start()
    server.stop()


# --- settings errors ------------------------------------------------------------------


@pytest.mark.parametrize("url", BAD_SETTINGS_URLS.values(), ids=BAD_SETTINGS_URLS.keys())
@pytest.mark.parametrize("variable", ["REDIS_URL", "SENTINEL_REDIS_URL"])
def test_settings_error_names_redis_url_and_never_the_password(
    url: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, url)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    shown = _everything_shown(caught.value)
    assert "REDIS_URL" in str(caught.value)
    assert SECRET not in shown
    assert caught.value.__context__ is None, "the raw pydantic error must not ride along"


@pytest.mark.parametrize("url", BAD_SETTINGS_URLS.values(), ids=BAD_SETTINGS_URLS.keys())
def test_worker_with_bad_redis_url_exits_2_naming_it_without_the_password(
    url: str, fleet: Fleet, tmp_path: Path
) -> None:
    worker = fleet.worker("axioms", "bad-url", child_env(url, tmp_path / "home"))
    wait_until(lambda: not worker.alive(), timeout_s=60)
    output = worker.log_text()
    assert worker.process.returncode == 2, output
    assert "REDIS_URL" in output
    assert "Traceback" not in output
    assert SECRET not in output
    log_line = json.loads(next(line for line in output.splitlines() if line.startswith("{")))
    assert log_line["event"] == "startup_failed"


@pytest.mark.parametrize("url", BAD_SETTINGS_URLS.values(), ids=BAD_SETTINGS_URLS.keys())
@pytest.mark.parametrize("command", [["status"], ["up", "--no-dagster"]])
def test_cli_with_bad_redis_url_fails_naming_it_without_the_password(
    url: str, command: list[str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    code, output = _run([str(BIN / "sentinel"), *command], _env(url, home))
    assert code == 1, output
    assert "REDIS_URL" in output
    assert SECRET not in output + _log_dir_text(home)


# --- Redis unreachable ----------------------------------------------------------------


@pytest.mark.parametrize("url", UNREACHABLE_URLS.values(), ids=UNREACHABLE_URLS.keys())
def test_connection_error_never_shows_the_password(url: str, tmp_path: Path) -> None:
    settings = load_settings(redis_url=url, home=tmp_path)
    with pytest.raises(Exception) as caught:
        connect(settings)
    assert SECRET not in _everything_shown(caught.value)


@pytest.mark.parametrize("url", UNREACHABLE_URLS.values(), ids=UNREACHABLE_URLS.keys())
def test_worker_logs_unreachable_redis_without_the_password(
    url: str, fleet: Fleet, tmp_path: Path
) -> None:
    worker = fleet.worker("axioms", "unreachable", child_env(url, tmp_path / "home"))
    wait_until(lambda: "redis_unavailable" in worker.log_text() or not worker.alive(), 60)
    worker.stop()
    output = worker.log_text()
    assert SECRET not in output
    for line in filter(None, output.splitlines()):
        json.loads(line)  # every line, a crash's traceback too, is one scrubbed JSON entry


@pytest.mark.parametrize("url", UNREACHABLE_URLS.values(), ids=UNREACHABLE_URLS.keys())
@pytest.mark.parametrize("command", [["status"], ["up", "--no-dagster"]])
def test_cli_with_unreachable_redis_fails_without_the_password(
    url: str, command: list[str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    code, output = _run([str(BIN / "sentinel"), *command], _env(url, home))
    assert code == 1, output
    assert SECRET not in output + _log_dir_text(home)


# --- a working Redis, password in the query string -----------------------------------


def test_worker_and_status_on_a_server_reached_with_a_query_string_password_never_show_it(
    query_password_redis: RedisServer, fleet: Fleet, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{query_password_redis.port}/0?password={PASSWORD}"
    home = tmp_path / "home"
    settings = load_settings(redis_url=url, home=home)
    client = connect(settings)
    keys = axiom_keys(settings)
    worker = fleet.worker("axioms", "query-password", child_env(url, home))
    wait_leases(client, keys, [worker], timeout_s=60)
    client.xadd(keys.stream, valid_axiom("sensor-q"))
    wait_until(lambda: client.xlen(keys.results) == 1, timeout_s=30)

    code, status_output = _run([str(BIN / "sentinel"), "status", "--json"], _env(url, home))
    assert code in (0, 3, 4, 5), status_output
    assert json.loads(status_output)  # the status itself works with that URL
    assert worker.stop() == 0
    logs = worker.log_text()
    assert "worker_starting" in logs
    for text in (logs, status_output):
        assert PASSWORD not in text
    client.close()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=query_password_redis.port).ping()


# --- Dagster --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [BAD_SETTINGS_URLS["wrong-scheme"], BAD_SETTINGS_URLS["wrong-scheme-query"]],
    ids=["userinfo", "query-string"],
)
def test_dagster_code_location_load_error_names_redis_url_without_the_password(
    url: str, tmp_path: Path
) -> None:
    argv = [str(BIN / "dagster"), "definitions", "validate", "-m", "sentinel_platform.definitions"]
    code, output = _run(argv, _env(url, tmp_path / "home"), timeout_s=300)
    assert code != 0, output
    assert "REDIS_URL" in output
    assert SECRET not in output


@pytest.mark.parametrize(
    "url",
    [BAD_SETTINGS_URLS["wrong-scheme"], UNREACHABLE_URLS["query-string"]],
    ids=["bad-url", "unreachable"],
)
def test_dagster_run_whose_resource_cannot_connect_records_no_password(
    url: str, dagster_instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The password reaches the resource the only way it may: REDIS_URL in the environment.
    monkeypatch.setenv("REDIS_URL", url)

    @dg.asset
    def probe(redis_publisher: RedisPublisherResource) -> None:
        redis_publisher.connect().ping()

    result = dg.materialize(
        [probe],
        resources={"redis_publisher": RedisPublisherResource()},
        instance=dagster_instance,
        raise_on_error=False,
    )
    assert not result.success
    records = dagster_instance.all_logs(result.run_id)
    failures = [r for r in records if r.dagster_event and r.dagster_event.is_step_failure]
    assert failures, "the step failed and said why"
    shown = "\n".join(repr(record) for record in records)  # every field, error infos included
    assert ("REDIS_URL" in shown) or ("cannot reach Redis" in shown)
    assert SECRET not in shown
