"""``sentinel dlq import``: an export's lines go back into the DLQ, byte for byte, once
each; a bad file imports nothing and names its line."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

from sentinel_platform.exit_codes import EXIT_OK, EXIT_USAGE
from sentinel_platform.streams.operators import dlq_import
from sentinel_platform.streams.operators.dlq_import import IMPORTED_FROM_FIELD
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, transaction_fields

Cli = Callable[..., CliResult]
AddLetter = Callable[..., str]


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def _without_origin(line: dict[str, object]) -> tuple[object, object, dict[str, str]]:
    """An export line as (dlq, encoding, fields) minus the import's own field."""
    fields = dict(line["fields"])  # type: ignore[call-overload]
    origin = IMPORTED_FROM_FIELD
    if line.get("fields_encoding") == "base64":
        origin = base64.b64encode(origin.encode()).decode()
    fields.pop(origin, None)
    return line["dlq"], line.get("fields_encoding"), fields


def _seed(client: RedisClient, keys: StreamKeys, add_dead_letter: AddLetter) -> None:
    """A worker's dead letter, an entry with text that is not ASCII, one with bytes that
    are not UTF-8."""
    add_dead_letter(keys, transaction_fields("t-1"), "10-0")
    client.xadd(keys.dlq, {"stream": keys.stream, "error": "Zürich ≠ Zurich\nline 2"})
    client.xadd(keys.dlq, {b"payload": b"\xff\xfe raw", b"reason\xc3": b"x"})


def _export_deleting(cli: Cli, path: Path) -> list[str]:
    """``sentinel dlq export -o path --delete-exported``; the file's lines."""
    assert cli("dlq", "export", "-o", str(path), "--delete-exported").code == EXIT_OK
    return path.read_text(encoding="utf-8").splitlines()


def test_an_export_deleted_from_the_dlq_comes_back_exactly_and_can_be_replayed(
    cli: Cli,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    add_dead_letter: AddLetter,
    tmp_path: Path,
) -> None:
    _seed(redis_client, tx_keys, add_dead_letter)
    exported = tmp_path / "dlq.jsonl"
    before = [json.loads(line) for line in _export_deleting(cli, exported)]
    assert redis_client.xlen(tx_keys.dlq) == 0

    result = cli("dlq", "import", str(exported))
    assert result.code == EXIT_OK, result.err
    assert "imported 3 dead letter(s); 0 skipped" in result.out
    after = _lines(cli("dlq", "export").out)
    assert [_without_origin(line) for line in after] == [_without_origin(b) for b in before]
    origins = [dict(line["fields"]).get(IMPORTED_FROM_FIELD) for line in after[:2]]  # type: ignore[call-overload]
    assert origins == [before[0]["id"], before[1]["id"]]

    # The imported worker's dead letter is a dead letter again: replay publishes it.
    letter_id = str(after[0]["id"])
    replayed = cli("dlq", "replay", letter_id, "--json")
    assert replayed.code == EXIT_OK, replayed.err
    assert redis_client.xlen(tx_keys.stream) == 1
    assert redis_client.xlen(tx_keys.dlq) == 2


def test_importing_twice_or_what_is_still_in_the_dlq_adds_each_entry_once(
    cli: Cli,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    add_dead_letter: AddLetter,
    tmp_path: Path,
) -> None:
    _seed(redis_client, tx_keys, add_dead_letter)
    kept = tmp_path / "kept.jsonl"
    assert cli("dlq", "export", "-o", str(kept)).code == EXIT_OK  # nothing deleted
    still_there = cli("dlq", "import", str(kept), "--json")
    assert still_there.code == EXIT_OK, still_there.err
    assert json.loads(still_there.out) == {"imported": 0, "skipped": 3}
    assert redis_client.xlen(tx_keys.dlq) == 3

    moved = tmp_path / "moved.jsonl"
    _export_deleting(cli, moved)
    first = cli("dlq", "import", str(moved), "--json")
    second = cli("dlq", "import", str(moved), "--json")
    assert json.loads(first.out) == {"imported": 3, "skipped": 0}
    assert json.loads(second.out) == {"imported": 0, "skipped": 3}
    assert redis_client.xlen(tx_keys.dlq) == 3


def test_a_bad_line_imports_nothing_and_names_the_line(
    cli: Cli,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    add_dead_letter: AddLetter,
    tmp_path: Path,
) -> None:
    _seed(redis_client, tx_keys, add_dead_letter)
    good = _export_deleting(cli, tmp_path / "dlq.jsonl")
    cases = {
        "not JSON": ([*good[:2], "{truncated"], "line 3: not JSON"),
        "another deployment's DLQ": (
            [json.dumps({"dlq": "elsewhere:dlq", "id": "1-0", "fields": {"a": "b"}})],
            "line 1: 'elsewhere:dlq' is not a DLQ stream of this deployment",
        ),
        "bad base64": (
            [*good[:1], json.dumps({**json.loads(good[2]), "fields": {"!!": "x"}})],
            "line 2: '!!' is not base64",
        ),
        "no entry id": (
            [json.dumps({**json.loads(good[0]), "id": "yesterday"})],
            "line 1: 'yesterday' is not a stream entry id",
        ),
    }
    for name, (lines, expected) in cases.items():
        bad = tmp_path / f"{name}.jsonl"
        bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
        result = cli("dlq", "import", str(bad))
        assert result.code == EXIT_USAGE, name
        assert expected in result.err and "nothing was imported" in result.err, result.err
        assert redis_client.xlen(tx_keys.dlq) == 0, name


def test_a_file_of_several_pages_is_imported_whole_in_order(
    cli: Cli, redis_client: RedisClient, tx_keys: StreamKeys, tmp_path: Path
) -> None:
    pipe = redis_client.pipeline(transaction=False)
    for n in range(dlq_import.PAGE_SIZE + 7):  # more than one round trip
        pipe.xadd(tx_keys.dlq, {"stream": tx_keys.stream, "payload": "{}", "n": str(n)})
    pipe.execute()
    _export_deleting(cli, tmp_path / "big.jsonl")
    result = cli("dlq", "import", str(tmp_path / "big.jsonl"), "--json")
    assert json.loads(result.out) == {"imported": dlq_import.PAGE_SIZE + 7, "skipped": 0}
    order = [fields["n"] for _id, fields in redis_client.xrange(tx_keys.dlq)]
    assert order == [str(n) for n in range(dlq_import.PAGE_SIZE + 7)]
