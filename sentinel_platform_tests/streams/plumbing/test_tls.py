"""TLS to Redis, end to end, on a real TLS-only ``redis-server`` with a private CA.

Workers (``python -m sentinel_platform.workers transactions``), ``sentinel status`` and the Spark
publisher's executors reach the server only through ``rediss://`` URLs whose query string
carries redis-py's TLS options: ``ssl_ca_certs`` (trust the private CA), ``ssl_certfile``
and ``ssl_keyfile`` (the client certificate; ``ssl_password`` for an encrypted key). The
server has no plain TCP port, so anything that works here went over TLS. The password and
the key's passphrase never appear in what the platform shows.

Needs a ``redis-server`` built with TLS (Debian's; the wheel's Valkey has none): see
``tls.py`` for when a missing one skips and when it fails (CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.domains.shared.generation import generate_transactions
from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_WORKER_OFF
from sentinel_platform.redis_server import RedisServer
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, RedisConnectError, connect
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.processes import NOOP_PROCESSOR, StartWorker
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.streams.plumbing.tls import (
    KEY_PASSPHRASE,
    Pki,
    candidate_binaries,
    make_pki,
    start_tls_server,
    tls_url,
)

PASSWORD = "tls-s3cret-pw"
KEYS = transaction_keys(load_settings())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_binaries(redis_binary: str) -> list[str]:
    return list(candidate_binaries(redis_binary))


@pytest.fixture(scope="module")
def tls_server(
    pki: Pki, tls_binaries: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisServer]:
    """TLS only, a password, client certificates checked if sent (``optional``)."""
    server = start_tls_server(
        tls_binaries,
        tmp_path_factory.mktemp("redis-tls"),
        pki.server_tls("optional"),
        {"requirepass": PASSWORD},
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mtls_server(
    pki: Pki, tls_binaries: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisServer]:
    """TLS only, a password, and a client certificate signed by the CA demanded (``yes``)."""
    server = start_tls_server(
        tls_binaries,
        tmp_path_factory.mktemp("redis-mtls"),
        pki.server_tls("yes"),
        {"requirepass": PASSWORD},
    )
    yield server
    server.stop()


def _ca_url(server: RedisServer, pki: Pki) -> str:
    return tls_url(server, {"ssl_ca_certs": pki.ca}, PASSWORD)


def _client_cert_url(server: RedisServer, pki: Pki) -> str:
    params: dict[str, str | Path] = {
        "ssl_ca_certs": pki.ca,
        "ssl_certfile": pki.client_cert,
        "ssl_keyfile": pki.client_key_encrypted,
        "ssl_password": KEY_PASSPHRASE,
    }
    return tls_url(server, params, PASSWORD)


def _connected(url: str) -> Iterator[RedisClient]:
    client = connect(load_settings(redis_url=url))
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def tls_client(tls_server: RedisServer, pki: Pki) -> Iterator[RedisClient]:
    yield from _connected(_ca_url(tls_server, pki))


@pytest.fixture
def mtls_client(mtls_server: RedisServer, pki: Pki) -> Iterator[RedisClient]:
    yield from _connected(_client_cert_url(mtls_server, pki))


def _secrets(pki: Pki) -> list[str]:
    """What must never be shown: the password, the key's passphrase, the keys themselves."""
    key_bodies = [
        line
        for path in (pki.client_key, pki.client_key_encrypted, pki.server_key)
        for line in path.read_text().splitlines()
        if line and not line.startswith("-----")
    ]
    return [PASSWORD, KEY_PASSPHRASE, *key_bodies]


def _assert_nothing_secret(text: str, pki: Pki) -> None:
    shown = [secret for secret in _secrets(pki) if secret in text]
    assert not shown, f"secrets shown: {shown}"


def _sentinel(home: Path, url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process, with only ``url`` telling it where Redis is."""
    env = {**os.environ, "REDIS_URL": url, "SENTINEL_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "sentinel_platform.cli.main", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _messages(count: int) -> list[dict[str, str]]:
    return [{"key": f"tls-{n}"} for n in range(count)]


def test_worker_trusting_a_private_ca_processes_messages_published_over_tls(
    tls_server: RedisServer, pki: Pki, tls_client: RedisClient, start_worker: StartWorker
) -> None:
    worker = start_worker(env={"REDIS_URL": _ca_url(tls_server, pki)}).wait_ready(tls_client)
    publish(tls_client, KEYS, _messages(20))
    wait_until(lambda: tls_client.xlen(KEYS.results) == 20, 20)
    assert worker.events("worker_starting")[0]["redis"].startswith("rediss://:***@127.0.0.1:")
    _assert_nothing_secret(worker.text(), pki)


def test_worker_with_a_client_certificate_is_served_where_the_server_demands_one(
    mtls_server: RedisServer, pki: Pki, mtls_client: RedisClient, start_worker: StartWorker
) -> None:
    url = _client_cert_url(mtls_server, pki)
    worker = start_worker(env={"REDIS_URL": url}).wait_ready(mtls_client)
    publish(mtls_client, KEYS, _messages(10))
    wait_until(lambda: mtls_client.xlen(KEYS.results) == 10, 20)
    assert "ssl_password=***" in worker.events("worker_starting")[0]["redis"]
    _assert_nothing_secret(worker.text(), pki)


def test_server_demanding_client_certificates_refuses_a_client_without_one(
    mtls_server: RedisServer, pki: Pki
) -> None:
    log = mtls_server.data_dir / "redis.log"
    refusals = log.read_text().count("peer did not return a certificate")
    with pytest.raises(RedisConnectError) as refused:
        connect(load_settings(redis_url=_ca_url(mtls_server, pki)))
    # The client sees the handshake cut (TLS 1.3: "certificate required" or an EOF,
    # whichever it reads first); the server says why.
    assert str(refused.value).startswith("cannot reach Redis at rediss://:***@127.0.0.1:")
    assert PASSWORD not in str(refused.value)
    wait_until(lambda: log.read_text().count("peer did not return a certificate") > refusals)
    # Nor does the TLS port speak plain TCP.
    plain = f"redis://:{PASSWORD}@127.0.0.1:{mtls_server.port}/0"
    with pytest.raises(RedisConnectError):
        connect(load_settings(redis_url=plain, redis_socket_timeout_s=2))


def test_status_over_tls_shows_the_stream_and_never_the_password_or_key_passphrase(
    mtls_server: RedisServer,
    pki: Pki,
    mtls_client: RedisClient,
    start_worker: StartWorker,
    sentinel_home: Path,
) -> None:
    url = _client_cert_url(mtls_server, pki)
    worker = start_worker(env={"REDIS_URL": url}).wait_ready(mtls_client)
    publish(mtls_client, KEYS, _messages(3))
    wait_until(lambda: mtls_client.xlen(KEYS.results) == 3, 20)

    as_json = _sentinel(sentinel_home, url, "status", "--json")
    as_text = _sentinel(sentinel_home, url, "status")

    # Only the transactions stream has a worker here: the axioms one is worker_off.
    assert as_json.returncode == EXIT_WORKER_OFF, as_json.stderr
    doc = json.loads(as_json.stdout)
    (tx,) = (s for s in doc["streams"] if s["stream"] == KEYS.stream)
    assert (tx["zone"], tx["backlog"], tx["pending"]) == ("nominal", 0, 0)
    assert [(c["name"], c["lease"]) for c in tx["consumers"]] == [(worker.consumer, "alive")]
    assert doc["redis"].startswith("rediss://:***@127.0.0.1:")
    assert "ssl_password=***" in doc["redis"]
    assert as_text.returncode == EXIT_WORKER_OFF
    assert KEYS.stream in as_text.stdout and worker.consumer in as_text.stdout
    for output in (as_json.stdout, as_json.stderr, as_text.stdout, as_text.stderr):
        _assert_nothing_secret(output, pki)


def test_wrong_ca_is_a_certificate_error_that_names_the_problem_but_not_the_password(
    tls_server: RedisServer, pki: Pki, sentinel_home: Path, start_worker: StartWorker
) -> None:
    url = tls_url(tls_server, {"ssl_ca_certs": pki.other_ca}, PASSWORD)
    result = _sentinel(sentinel_home, url, "status")
    assert result.returncode == EXIT_ERROR
    assert "certificate verify failed" in result.stderr
    assert f"127.0.0.1:{tls_server.port}" in result.stderr
    assert "Traceback" not in result.stderr
    _assert_nothing_secret(result.stdout + result.stderr, pki)

    # A worker keeps retrying (the CA may be fixed under it) and says why in its log.
    # (The no-op processor: the counting one connects while it is built, before the retries.)
    worker = start_worker(processor=NOOP_PROCESSOR, env={"REDIS_URL": url})
    (unavailable, *_) = wait_until(lambda: worker.events("redis_unavailable"), 20)
    assert "certificate verify failed" in unavailable["error"]
    _assert_nothing_secret(worker.text(), pki)


@pytest.mark.spark
def test_spark_executors_publish_a_partition_over_tls(
    tls_server: RedisServer,
    pki: Pki,
    tls_client: RedisClient,
    sentinel_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    spark: Any = request.getfixturevalue("spark")  # after the TLS server: no JVM for a skip
    # The password reaches the resource only through REDIS_URL, as in a deployment.
    monkeypatch.setenv("REDIS_URL", _ca_url(tls_server, pki))
    monkeypatch.setenv("SENTINEL_HOME", str(sentinel_home))
    publisher = RedisPublisherResource(lag_warn=99_999, lag_pause=100_000)
    frame = generate_transactions(spark, date(2026, 11, 20), 200, seed=11, partitions=2)

    stats = publisher.publish_dataframe(frame, "transactions")

    assert (stats.rows, stats.partitions) == (200, 2)
    published = {Transaction.from_fields(f).id for _id, f in tls_client.xrange(KEYS.stream)}
    assert published == {row.id for row in frame.select("id").collect()}
