"""The operator CLI as tests run it: ``sentinel`` as the installed command, its result,
and the stream entries the CLI tests seed (transactions, axioms).

The fixtures built on them (``cli``, ``sentinel``, ``add_dead_letter``, ``live_worker``)
are registered by the suite's plugin.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


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


def axiom_fields(source_id: str) -> dict[str, str]:
    return {
        "status": "nominal",
        "metric_value": "1.5",
        "anomaly_score": "0.1",
        "source_id": source_id,
        "emitted_at": "2024-05-01T12:00:00+00:00",
    }
