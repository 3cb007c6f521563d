"""Loading the settings: the defaults the issues give, the environment read with its prefix,
and a clear error naming each bad variable."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import Settings, SettingsError, load_settings


def test_defaults_match_the_documented_table() -> None:
    settings = load_settings()
    assert settings.redis_url is None
    assert settings.reclaim_idle_ms == 30_000
    assert settings.reclaim_delivery_limit == 3
    assert settings.lease_ttl_ms == 5_000
    assert (settings.lag_warn, settings.lag_pause) == (None, None)  # unset: seconds of work
    assert (settings.lag_warn_s, settings.lag_pause_s) == (2.0, 10.0)
    assert settings.lag_warn_sleep_ms == 500
    assert settings.lag_pause_poll_ms == 100
    assert settings.max_pause_s == 600
    assert settings.axiom_audit_threshold == 0.8
    assert settings.high_risk_amount == 400.00
    assert str(settings.home) == ".sentinel"
    assert (settings.transactions_stream, settings.transactions_group) == (
        "transactions",
        "sentinel-consumers",
    )
    assert (settings.axioms_stream, settings.axioms_group) == ("synapse:axioms", "axiom-workers")
    assert settings.dlq_stream == "sentinel:dlq"
    assert settings.dlq_maxlen == 100_000
    assert settings.idempotency_ttl_s == 7 * 24 * 3600
    assert settings.spark_master == "local[*]"


def test_environment_variables_are_read_with_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN", "10")
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "20")
    monkeypatch.setenv("REDIS_URL", "redis://localhost:6390/0")
    settings = Settings()
    assert (settings.lag_warn, settings.lag_pause) == (10, 20)
    assert settings.redis_url_value == "redis://localhost:6390/0"


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("SENTINEL_RECLAIM_IDLE_MS", "5", "SENTINEL_RECLAIM_IDLE_MS='5'"),
        ("SENTINEL_RECLAIM_DELIVERY_LIMIT", "0", "greater than or equal to 1"),
        ("SENTINEL_LEASE_TTL_MS", "-1", "SENTINEL_LEASE_TTL_MS"),
        ("SENTINEL_LAG_WARN", "twelve", "SENTINEL_LAG_WARN='twelve'"),  # no piece of a test key
        ("SENTINEL_LAG_WARN_SLEEP_MS", "-5", "SENTINEL_LAG_WARN_SLEEP_MS"),
        ("SENTINEL_LAG_PAUSE_POLL_MS", "1", "greater than or equal to 10"),
        ("SENTINEL_MAX_PAUSE_S", "0", "SENTINEL_MAX_PAUSE_S"),
        ("SENTINEL_AXIOM_AUDIT_THRESHOLD", "1.5", "less than or equal to 1"),
        ("SENTINEL_HIGH_RISK_AMOUNT", "0", "greater than 0"),
        ("REDIS_URL", "http://example:80", "REDIS_URL"),
        ("SENTINEL_SPARK_CONF", "spark.x", "key=value"),
    ],
)
def test_bad_value_names_the_variable_and_the_rule(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert expected in str(error.value)
    assert variable in str(error.value)
