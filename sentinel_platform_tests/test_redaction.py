"""Redaction from a table of cases: every shape a password can take in a URL is hidden,
and what helps debugging (scheme, user, host, port, path, harmless parameters) stays."""

from __future__ import annotations

import json
import logging

import pytest

from sentinel_platform.logs import JsonFormatter
from sentinel_platform.redaction import redact_url, scrub

SECRET = "s3cret"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://admin:s3cretpw@host/0", "redis://admin:***@host/0"),
        ("http://admin:s3cretpw@host/0", "http://admin:***@host/0"),
        ("rediss://admin:s3cretpw@host:6380/1", "rediss://admin:***@host:6380/1"),
        ("redis+cluster://:s3cretpw@h:7000", "redis+cluster://:***@h:7000"),
        ("rediss+cluster://u:s3cretpw@h:7000/0", "rediss+cluster://u:***@h:7000/0"),
        ("redis://admin:s3cret%40pw@host/0", "redis://admin:***@host/0"),
        ("redis://admin:s3cret@pw@host/0", "redis://admin:***@host/0"),
        ("redis://admin:s3c/ret@host/0", "redis://admin:***@host/0"),
        ("redis://admin:s3c?ret@host/0", "redis://admin:***@host/0"),
        ("redis://admin:s3c#ret@host/0", "redis://admin:***@host/0"),
        ("redis://h:1/0?password=s3cretpw", "redis://h:1/0?password=***"),
        ("redis://h:1/0?db=2&PassWord=s3cret%26pw&x=1", "redis://h:1/0?db=2&PassWord=***&x=1"),
        ("redis://h:1/0?pass%77ord=s3cretpw", "redis://h:1/0?pass%77ord=***"),
        ("redis://h:1/0?password=s3c@ret", "redis://h:1/0?password=***"),
        (
            "rediss://h:1/0?ssl_keyfile=/k.pem&ssl_password=s3cretpw",
            "rediss://h:1/0?ssl_keyfile=/k.pem&ssl_password=***",
        ),
        (
            "unix:///run/redis.sock?password=s3cretpw&db=1",
            "unix:///run/redis.sock?password=***&db=1",
        ),
        ("https://hooks.example/x?token=s3cretpw", "https://hooks.example/x?token=***"),
        # API keys and signed URLs of hosted model APIs and object stores
        (
            "https://ai.example/v1/m:generate?key=s3cretpw",
            "https://ai.example/v1/m:generate?key=***",
        ),
        (
            "https://ai.example/d?api-version=2024-02-01&api-key=s3cretpw",
            "https://ai.example/d?api-version=2024-02-01&api-key=***",
        ),
        (
            "https://ai.example/x?Subscription-Key=s3cretpw",
            "https://ai.example/x?Subscription-Key=***",
        ),
        (
            "https://b.s3.example/o?X-Amz-Credential=s3cretpw&X-Amz-Signature=s3cretpw&x=1",
            "https://b.s3.example/o?X-Amz-Credential=***&X-Amz-Signature=***&x=1",
        ),
        ("https://h/cb?refresh_token=s3cretpw", "https://h/cb?refresh_token=***"),
    ],
)
def test_password_is_hidden_and_the_rest_kept(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert SECRET not in scrub(f"error at {url}: refused")


@pytest.mark.parametrize(
    "url",
    [
        "redis://host:6379/0",
        "redis://user@host/0",
        "http://127.0.0.1:9/assess?mode=fast",
        "rediss://h:1/0?ssl_keyfile=/k.pem&monkey=1&partition_key=2026-11-24",
        "",
    ],
)
def test_url_without_password_is_unchanged(url: str) -> None:
    assert redact_url(url) == url
    assert scrub(f"at {url} now") == f"at {url} now"


def test_key_is_a_secret_in_a_url_and_a_syntax_in_free_text() -> None:
    assert scrub("see https://ai.example/v1?key=s3cretpw") == "see https://ai.example/v1?key=***"
    assert scrub("'spark.x' is not key=value") == "'spark.x' is not key=value"


def test_malformed_urls_never_raise() -> None:
    assert redact_url("http://a:s3cret pw@host/0") == "http://a:***@host/0"
    for url in ("redis://u:s3cretpw@[::1/0", "redis://u:s3cretpw@h:notaport/0", "://:s3cret@"):
        assert SECRET not in redact_url(url)


def test_json_log_line_is_scrubbed_field_by_field_and_stays_valid_json() -> None:
    record = logging.LogRecord(
        "w", logging.ERROR, __file__, 1, "at redis://u:s3cretpw@h/0", (), None
    )
    record.error = 'cannot reach redis://h:1/0?password=s3cret"pw: refused'
    record.nested = {"urls": ["rediss://a:s3cretpw@h/0"], "n": 3}
    line = JsonFormatter().format(record)
    entry = json.loads(line)
    assert SECRET not in line
    assert entry["event"] == "at redis://u:***@h/0"
    assert entry["error"] == "cannot reach redis://h:1/0?password=*** refused"
    assert entry["nested"] == {"urls": ["rediss://a:***@h/0"], "n": 3}


KNOWN_URL = "postgresql+psycopg2://u:50%off-s3cret%40Ky7 Lq9@db:5432/d?sslmode=require"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # libpq's shapes: the whole token quoted, a fragment quoted, the value alone
        ('invalid percent-encoded token: "50%off-s3cret%40Ky7 Lq9"', 'token: "***"'),
        ('invalid dsn: missing "=" after "Lq9" in connection info string', 'after "***" in'),
        ('missing "=" after "s3cret@Ky7" in connection info string', 'after "***" in'),
        ("password=50%off-s3cret@Ky7 Lq9 dbname=d", "password=*** dbname=d"),
        (
            "decoded 50%off-s3cret@Ky7 Lq9, encoded 50%25off-s3cret%40Ky7%20Lq9",
            "decoded ***, encoded ***",
        ),
        # what is not the secret stays
        ('password authentication failed for user "u"', 'for user "u"'),
        ('connection to server at "db", port 5432 failed', 'at "db", port 5432'),
        ("a short quoted word: '50'", "'50'"),
    ],
)
def test_known_secrets_are_masked_wherever_they_appear(text: str, shown: str) -> None:
    from sentinel_platform.redaction import remember_secret

    remember_secret(KNOWN_URL)
    scrubbed = scrub(text)
    assert shown in scrubbed
    assert "s3cret" not in scrubbed and "50%off" not in scrubbed and "Lq9" not in scrubbed


def test_loading_settings_makes_their_secrets_known() -> None:
    from sentinel_platform.settings import SettingsError, load_settings

    load_settings(dagster_postgres_url="postgresql+psycopg2://u:Kn0wn%pw@h/d")
    assert scrub('token: "Kn0wn%pw"') == 'token: "***"'
    with pytest.raises(SettingsError):  # refused, and still never shown afterwards
        load_settings(dagster_postgres_url="mysql://u:Ref%used-pw@h/d")
    assert scrub("said Ref%used-pw") == "said ***"
