"""Fixtures of the operator CLI tests: run ``sentinel`` in-process or as the installed
command, seed dead letters, and make a stream look like a live worker serves it (lease +
lag key, exactly the keys a worker writes), against the real test Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from sentinel_platform.cli.main import main
from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, axiom_keys, transaction_keys
from sentinel_platform_tests.workers.conftest import start_worker, worker_env  # noqa: F401


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


@pytest.fixture
def cli(
    settings_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> Callable[..., CliResult]:
    """``cli("status", "--json")`` runs ``sentinel`` in-process with the test settings."""

    def run(*argv: str) -> CliResult:
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


#: The installed console script: the command an operator runs.
SENTINEL = Path(sys.executable).parent / "sentinel"


def run_sentinel(
    env: Mapping[str, str], *argv: str, stdin: str | None = None, timeout_s: float = 120
) -> CliResult:
    """``sentinel ARGV...`` as a separate process with ``env``; its exit code and output."""
    proc = subprocess.run(
        [str(SENTINEL), *argv],
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def sentinel(settings_env: dict[str, str]) -> Callable[..., CliResult]:
    """``sentinel("dlq", "list")`` runs the real ``sentinel`` command against the test Redis."""

    def run(*argv: str, stdin: str | None = None) -> CliResult:
        return run_sentinel(settings_env, *argv, stdin=stdin)

    return run


@pytest.fixture
def tx_keys(settings: Settings) -> StreamKeys:
    return transaction_keys(settings)


@pytest.fixture
def ax_keys(settings: Settings) -> StreamKeys:
    return axiom_keys(settings)


def transaction_fields(tx_id: str, amount: float = 12.5) -> dict[str, str]:
    data = {
        "id": tx_id,
        "merchant": "ACME",
        "category": "retail",
        "currency": "EUR",
        "amount": amount,
        "message": "ok",
        "source": "test",
        "timestamp": "2024-05-01T12:00:00+00:00",
    }
    return {"data": json.dumps(data)}


def axiom_fields(source_id: str) -> dict[str, str]:
    return {
        "status": "nominal",
        "metric_value": "1.5",
        "anomaly_score": "0.1",
        "source_id": source_id,
        "emitted_at": "2024-05-01T12:00:00+00:00",
    }


@pytest.fixture
def add_dead_letter(redis_client: RedisClient, settings: Settings) -> Callable[..., str]:
    """XADD one dead letter in the workers' format; returns its DLQ entry id."""

    def add(
        keys: StreamKeys,
        original: dict[str, str],
        message_id: str = "1-0",
        reason: str = "invalid_message",
        entry_id: str = "*",
    ) -> str:
        letter = DeadLetter(
            stream=keys.stream,
            group=keys.group,
            message_id=message_id,
            payload=json.dumps(original),
            reason=reason,  # type: ignore[arg-type]
            error="SchemaError: Transaction.amount: must be a number",
            deliveries=1 if reason == "invalid_message" else settings.reclaim_delivery_limit,
            consumer="worker-a",
            dead_lettered_at=datetime.now(timezone.utc).isoformat(),
        )
        return redis_client.xadd(keys.dlq, letter.to_fields(), id=entry_id)

    return add


@pytest.fixture
def live_worker(
    redis_client: RedisClient, settings: Settings
) -> Iterator[Callable[[StreamKeys, str], None]]:
    """Make ``consumer`` look alive on a stream: the lease and the lag key a worker keeps."""

    def mark(keys: StreamKeys, consumer: str = "worker-a") -> None:
        redis_client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
        redis_client.set(keys.lease(consumer), "1", px=60_000)
        redis_client.hset(keys.consumers, consumer, "{}")
        redis_client.set(keys.lag, 0, ex=60)

    yield mark
