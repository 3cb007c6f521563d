"""The key a worker calls with: a rewritten key file is read within a second (at once after
a rejection), its headers rebuilt by the API module, its fingerprint switched; a worker
whose key was rejected calls again once the file holds another key, with no release; an
unreadable file keeps the key in use; nothing of a key is logged. On the real Redis."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.answers.replies import AnalyzerExhausted
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.keys.key_fingerprint import key_digest
from workers.analyzer.keys.key_holds import KeyHolds
from workers.analyzer.keys.key_source import KeySource, api_render
from workers.analyzer.limits.fleet_limits import FleetExhausted

REVOKED = "sk-proj-Rev0ked-0123456789abcdefghijOLD1"
VALID = "sk-proj-Val1d-0123456789abcdefghijklNEW2"
URL = "https://api.openai.com/v1"
REJECTED = AnalyzerExhausted("analyzer rejected the credentials (HTTP 401)", None, "rejected_key")


def write_key(path: Path, key: str) -> None:
    """As a secret mount or a careful operator does: a new file renamed over the old."""
    fresh = path.with_suffix(".new")
    fresh.write_text(key + "\n", encoding="utf-8")
    os.replace(fresh, path)


def source(path: Path, key: str, client: RedisClient | None = None) -> KeySource:
    write_key(path, key)
    render = api_render(OpenAiApi("gpt-4o-mini", key), URL)
    return KeySource(key, render, KeyHolds("svc", URL, client), path, check_every_s=0.05)


def test_a_rewritten_key_file_is_read_and_every_call_carries_the_new_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keys = source(tmp_path / "key", REVOKED)
    assert keys.current().headers == {"Authorization": f"Bearer {REVOKED}"}
    caplog.set_level(logging.INFO)
    write_key(tmp_path / "key", VALID)
    wait_until(lambda: keys.current().digest == key_digest(VALID), timeout_s=5, what="re-read")
    key = keys.current()
    assert key.headers == {"Authorization": f"Bearer {VALID}"}
    assert (key.fingerprint, keys.fingerprint) == ("sk-proj-...NEW2", "sk-proj-...NEW2")
    (changed,) = [r for r in caplog.records if r.getMessage() == "analyzer_key_changed"]
    fields = vars(changed)
    assert (fields["key"], fields["previous"]) == ("sk-proj-...NEW2", "sk-proj-...OLD1")
    assert VALID not in caplog.text and REVOKED not in caplog.text
    assert VALID not in repr(key), "a key's repr shows no header"


def test_a_rejected_key_holds_its_worker_until_the_file_holds_another_key(
    tmp_path: Path, clients: Callable[[], RedisClient]
) -> None:
    keys = source(tmp_path / "key", REVOKED, clients())
    rejected = keys.current()
    assert keys.refused(rejected, REJECTED), "a rejected key's hold is the key's"
    with pytest.raises(FleetExhausted) as caught:
        keys.current()
    assert caught.value.reason.startswith("rejected_key: ")
    assert "(key sk-proj-...OLD1)" in caught.value.reason and REVOKED not in caught.value.reason
    with pytest.raises(FleetExhausted):
        keys.check_hold()
    write_key(tmp_path / "key", VALID)
    # Looked at again at once after the rejection: the next call already has the new key.
    assert keys.current().headers == {"Authorization": f"Bearer {VALID}"}
    keys.check_hold()  # nothing raised, and nothing released:
    old_hold = holds.key_hold_key("svc", key_digest(REVOKED))
    assert clients().exists(old_hold) == 1, "the revoked key stays held for whoever has it"


def test_a_rejection_not_of_the_key_or_of_no_key_is_left_to_the_analyzers_hold(
    tmp_path: Path,
) -> None:
    keys = source(tmp_path / "key", REVOKED)
    quota = AnalyzerExhausted("quota spent", None, "insufficient_quota")
    assert not keys.refused(keys.current(), quota)
    keys.current()  # not held
    keyless = KeySource("", api_render(OpenAiApi("m"), URL), KeyHolds("svc"))
    assert keyless.current().headers == {}, "a local server without a key"
    assert not keyless.refused(keyless.current(), REJECTED), "nothing to tell apart"


def test_an_unreadable_key_file_keeps_the_key_in_use_and_never_logs_its_content(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "key"
    keys = source(path, REVOKED)
    caplog.set_level(logging.INFO)
    path.write_text("   \n", encoding="utf-8")  # emptied mid-rotation
    wait_until(
        lambda: keys.current() is not None and "analyzer_key_unreadable" in caplog.text,
        timeout_s=5,
        what="the empty file noticed",
    )
    assert keys.current().digest == key_digest(REVOKED)
    (line,) = [r for r in caplog.records if r.getMessage() == "analyzer_key_unreadable"]
    assert "SENTINEL_ANALYZER_API_KEY_FILE" in vars(line)["error"]
    write_key(path, VALID)
    wait_until(lambda: keys.current().digest == key_digest(VALID), timeout_s=5, what="back")
    assert VALID not in caplog.text and REVOKED not in caplog.text


def test_a_key_given_directly_never_changes_and_anthropic_gets_its_own_headers() -> None:
    render = api_render(AnthropicApi("claude", VALID), "https://api.anthropic.com")
    keys = KeySource(VALID, render, KeyHolds("svc"))
    assert keys.current().headers == {"anthropic-version": "2023-06-01", "x-api-key": VALID}


def test_threads_calling_during_a_rotation_each_get_one_whole_key(tmp_path: Path) -> None:
    path = tmp_path / "key"
    keys = source(path, REVOKED)
    seen: list[tuple[str, str]] = []
    stop = threading.Event()

    def call() -> None:
        while not stop.is_set():
            key = keys.current()
            seen.append((key.digest, key.headers["Authorization"]))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    write_key(path, VALID)
    wait_until(lambda: seen[-1][0] == key_digest(VALID), timeout_s=5, what="the new key")
    stop.set()
    for thread in threads:
        thread.join(timeout=5)
    expected = {key_digest(k): f"Bearer {k}" for k in (REVOKED, VALID)}
    assert all(expected[digest] == header for digest, header in seen)
