"""``sentinel dlq export``: every dead letter, all fields verbatim, as JSON Lines; with
``--delete-exported`` only what was written leaves the DLQ."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators import dlq_export
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, axiom_fields, transaction_fields

Cli = Callable[..., CliResult]
AddLetter = Callable[..., str]


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def _stored(client: RedisClient, dlq: str) -> list[dict[str, object]]:
    """The DLQ as Redis holds it, in the export's line format."""
    return [{"dlq": dlq, "id": i, "fields": f} for i, f in client.xrange(dlq)]


def _seed(client: RedisClient, keys: StreamKeys, add_dead_letter: AddLetter) -> list[str]:
    """Three kinds of entry: a worker's dead letter, one with a base64 payload and an
    ``encoding`` field and non-ASCII text, and one that is not a dead letter at all."""
    ids = [add_dead_letter(keys, transaction_fields("t-1"), "10-0")]
    raw = base64.b64encode(b"\x00\xff binary \xfe").decode()
    ids.append(
        client.xadd(
            keys.dlq,
            {
                "stream": keys.stream,
                "payload": raw,
                "encoding": "base64",
                "error": "Zürich ≠ Zurich\nsecond line",
                "reason": "invalid_message",
            },
        )
    )
    ids.append(client.xadd(keys.dlq, {"odd": "  spaces kept  ", "empty": ""}))
    return ids


def test_export_writes_every_entry_with_all_fields_verbatim_as_json_lines(
    cli: Cli,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    add_dead_letter: AddLetter,
    tmp_path: Path,
) -> None:
    _seed(redis_client, tx_keys, add_dead_letter)
    expected = _stored(redis_client, tx_keys.dlq)

    to_stdout = cli("dlq", "export")
    assert to_stdout.code == EXIT_OK, to_stdout.err
    assert _lines(to_stdout.out) == expected

    target = tmp_path / "dlq.jsonl"
    to_file = cli("dlq", "export", "--output", str(target))
    assert to_file.code == EXIT_OK, to_file.err
    assert _lines(target.read_text(encoding="utf-8")) == expected
    assert "exported 3 dead letter(s)" in to_file.err
    assert redis_client.xlen(tx_keys.dlq) == 3  # exporting alone deletes nothing


def test_export_since_an_id_writes_only_the_entries_after_it(
    cli: Cli, redis_client: RedisClient, tx_keys: StreamKeys, add_dead_letter: AddLetter
) -> None:
    first, second, third = _seed(redis_client, tx_keys, add_dead_letter)
    result = cli("dlq", "export", "--since", first)
    assert result.code == EXIT_OK, result.err
    assert [line["id"] for line in _lines(result.out)] == [second, third]
    assert _lines(cli("dlq", "export", "--since", third).out) == []


def test_export_with_delete_exported_empties_the_dlq_of_exactly_what_it_wrote(
    cli: Cli,
    redis_client: RedisClient,
    settings: Settings,
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
    add_dead_letter: AddLetter,
    tmp_path: Path,
) -> None:
    pipe = redis_client.pipeline(transaction=False)
    for n in range(dlq_export.PAGE_SIZE + 7):  # more than one page
        pipe.xadd(tx_keys.dlq, {"stream": tx_keys.stream, "payload": "{}", "n": str(n)})
    pipe.execute()
    add_dead_letter(ax_keys, axiom_fields("sensor-1"), "12-0")
    expected = _stored(redis_client, tx_keys.dlq)

    target = tmp_path / "made-room.jsonl"
    result = cli("dlq", "export", "--output", str(target), "--delete-exported")
    assert result.code == EXIT_OK, result.err
    assert _lines(target.read_text(encoding="utf-8")) == expected
    assert redis_client.xlen(tx_keys.dlq) == 0
    assert f"deleted {len(expected)}" in result.err

    # A letter arriving after the export is not touched by a later export of nothing.
    late = add_dead_letter(tx_keys, transaction_fields("t-late"), "13-0")
    again = cli("dlq", "export", "--since", late, "--delete-exported")
    assert again.code == EXIT_OK and again.out == ""
    assert [i for i, _ in redis_client.xrange(tx_keys.dlq)] == [late]


def test_export_refuses_to_overwrite_a_file_and_then_deletes_nothing(
    cli: Cli,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    add_dead_letter: AddLetter,
    tmp_path: Path,
) -> None:
    _seed(redis_client, tx_keys, add_dead_letter)
    earlier = tmp_path / "earlier-export.jsonl"
    earlier.write_text("the only copy of yesterday's dead letters\n", encoding="utf-8")
    result = cli("dlq", "export", "--output", str(earlier), "--delete-exported")
    assert result.code == EXIT_ERROR
    assert str(earlier) in result.err
    assert earlier.read_text(encoding="utf-8") == "the only copy of yesterday's dead letters\n"
    assert redis_client.xlen(tx_keys.dlq) == 3

    missing_dir = tmp_path / "no-such-dir" / "out.jsonl"
    failed = cli("dlq", "export", "--output", str(missing_dir), "--delete-exported")
    assert failed.code == EXIT_ERROR
    assert redis_client.xlen(tx_keys.dlq) == 3


def test_export_rejects_a_since_that_is_not_a_stream_id(cli: Cli) -> None:
    result = cli("dlq", "export", "--since", "yesterday")
    assert result.code == 2
    assert "--since" in result.err


def test_export_keeps_bytes_that_are_not_utf8_exactly_as_base64(
    cli: Cli, redis_client: RedisClient, tx_keys: StreamKeys, add_dead_letter: AddLetter
) -> None:
    text_id = add_dead_letter(tx_keys, transaction_fields("t-1"), "10-0")
    raw_id = redis_client.xadd(tx_keys.dlq, {b"payload": b"\xff\xfe raw", b"reason\xc3": b"x"})
    result = cli("dlq", "export")
    assert result.code == EXIT_OK, result.err
    text_line, raw_line = _lines(result.out)
    assert text_line["id"] == text_id and "fields_encoding" not in text_line
    assert raw_line["id"] == raw_id and raw_line["fields_encoding"] == "base64"
    decoded = {
        base64.b64decode(str(name)): base64.b64decode(str(value))
        for name, value in dict(raw_line["fields"]).items()  # type: ignore[call-overload]
    }
    assert decoded == {b"payload": b"\xff\xfe raw", b"reason\xc3": b"x"}
