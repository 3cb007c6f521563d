"""The operator CLI as tests run it: ``sentinel`` as the installed command, its result,
and the stream entries the CLI tests seed (transactions, axioms).

The fixtures built on them (``cli``, ``sentinel``, ``add_dead_letter``, ``live_worker``,
``streams_alive``) are registered by the suite's plugin.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


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


def transaction_result(
    driver: str, tokens: tuple[int, int, int] | None = None, model: str = "gpt-4o-mini"
) -> dict[str, str]:
    """A transactions result entry as the worker writes it (``TransactionProcessor``, plus
    the ``source_message_id`` the consumer loop adds); ``tokens`` (input, output, cached
    input) make it ``model``'s verdict with its narrative and prompt version."""
    fields = {
        "txn_id": "tx-1",
        "merchant": "acme",
        "amount": "12.50",
        "currency": "EUR",
        "is_threat": "false",
        "risk_level": "low",
        "driver_used": driver,
        "processed_at": "2026-11-27T06:00:00.000Z",
        "source_message_id": "1-0",
    }
    if tokens is not None:
        fields |= {
            "narrative": "ordinary purchase",
            "model": model,
            "prompt_version": "3f2a9c1e",
            "input_tokens": str(tokens[0]),
            "output_tokens": str(tokens[1]),
            "cached_input_tokens": str(tokens[2]),
        }
    return fields


def status_of_stream(doc: Any, stream: str) -> dict[str, Any]:
    """The document of ``stream`` (its key) in a ``sentinel status --json`` document (as
    :meth:`CliResult.json` parses it)."""
    return next(s for s in doc["streams"] if s["stream"] == stream)


def axiom_fields(source_id: str) -> dict[str, str]:
    return {
        "status": "nominal",
        "metric_value": "1.5",
        "anomaly_score": "0.1",
        "source_id": source_id,
        "emitted_at": "2024-05-01T12:00:00+00:00",
    }
