"""Every ``--json`` document is typed and documented: the real command's output validates
strictly against its model in ``sentinel_platform.cli.output`` (numbers as numbers, records
as objects, times as ISO-8601), and docs/cli.md's field tables are generated from them."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from sentinel_platform.alerting.model import Alert
from sentinel_platform.cli import output
from sentinel_platform.exit_codes import EXIT_OK
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.progress import record_publish
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, axiom_fields, transaction_fields

Sentinel = Callable[..., CliResult]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _stream(doc: dict, name: str) -> dict:
    return next(s for s in doc["streams"] if s["name"] == name)


def test_status_json_is_typed_and_validates_against_its_schema(
    sentinel: Sentinel,
    live_worker: Callable[[StreamKeys, str], None],
    redis_client: RedisClient,
    settings: Settings,
    tx_keys: StreamKeys,
    add_dead_letter: Callable[..., str],
) -> None:
    live_worker(tx_keys, "worker-a")
    started = datetime(2026, 11, 24, 9, 30, tzinfo=timezone.utc)
    registration = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "token": "abc",
        "started": started.isoformat(timespec="seconds"),
    }  # what a worker's lease registers (JSON text in a hash)
    redis_client.hset(tx_keys.consumers, "worker-a", json.dumps(registration))
    record_publish(
        redis_client,
        tx_keys,
        {
            "run_id": "r1",
            "partition": None,
            "rows": 500,
            "at": 1_795_000_000.5,
            "outcome": "success",
        },
    )
    alert = Alert(
        severity="warning",
        source="test",
        stream="transactions",
        summary="something",
        condition="c",
        details={"depth": 3, "by_stream": {"transactions": 3}},
    )
    redis_client.xadd(settings.alerts_stream, alert.to_fields())
    add_dead_letter(tx_keys, transaction_fields("t-1"), "10-0")

    result = sentinel("status", "--json")
    assert result.out, result.err
    output.Status.model_validate_json(result.out)  # strict: a number as text fails
    doc = json.loads(result.out)
    assert result.code == doc["exit_code"]  # axioms has no worker: worker off
    tx = _stream(doc, "transactions")
    (consumer,) = tx["consumers"]
    assert consumer["registered"] == {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": "2026-11-24T09:30:00Z",
    }
    assert tx["last_publish"]["rows"] == 500
    assert tx["last_publish"]["at"] == "2026-11-18T11:06:40.500000Z"
    assert tx["dlq_depth"] == 1
    (shown,) = doc["alerts"]
    assert shown["details"] == {"depth": 3, "by_stream": {"transactions": 3}}
    assert shown["at"].endswith("Z")
    assert _stream(doc, "axioms")["stream"] != "axioms"  # name and key, both there


def test_dlq_json_documents_are_typed_and_validate_against_their_schemas(
    sentinel: Sentinel,
    add_dead_letter: Callable[..., str],
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
    tmp_path: Path,
) -> None:
    tx = add_dead_letter(tx_keys, transaction_fields("t-1"), "10-0", "max_deliveries_exceeded")
    ax = add_dead_letter(ax_keys, axiom_fields("s-1"), "11-0")

    listed = sentinel("dlq", "list", "--json")
    assert listed.code == EXIT_OK, listed.err
    raws = json.loads(listed.out)
    entries = [output.DlqEntry.model_validate_json(json.dumps(raw)) for raw in raws]
    assert all(isinstance(raw["deliveries"], int) for raw in raws)
    assert [e.id for e in entries] == [tx, ax]
    assert json.loads(listed.out)[0]["deliveries"] > 1

    shown = sentinel("dlq", "show", ax, "--json")
    entry = output.DlqEntry.model_validate_json(shown.out)
    assert (entry.stream, entry.payload) == (ax_keys.stream, axiom_fields("s-1"))

    dry = sentinel("dlq", "replay", "--all", "--dry-run", "--json")
    for outcome in json.loads(dry.out):
        output.ReplayOutcome.model_validate_json(json.dumps(outcome))

    saved = tmp_path / "dlq.jsonl"
    assert sentinel("dlq", "export", "-o", str(saved)).code == EXIT_OK
    purged = sentinel("dlq", "purge", "--stream", "axioms", "--yes", "--json")
    assert output.Purge.model_validate_json(purged.out).purged == 1
    imported = sentinel("dlq", "import", str(saved), "--json")
    assert output.Import.model_validate_json(imported.out) == output.Import(imported=1, skipped=1)


def test_docs_field_tables_are_the_ones_the_models_generate() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert output.with_tables(text) == text, (
        "docs/cli.md is out of date: run `python -m sentinel_platform.cli.output docs/cli.md`"
    )
    for command in output.DOCUMENTS:
        assert f"<!-- json:{command} -->" in text
    assert "| `streams[].consumers[].registered.pid` | integer or null |" in text
    assert "| `[].deliveries` | integer or null |" in text
