"""Settings: the defaults the issues give, and a clear error naming each bad variable."""

from __future__ import annotations

import json

import pytest

from sentinel_platform.settings import Settings, SettingsError, load_settings, redact_url


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
        ("SENTINEL_LAG_WARN", "abc", "SENTINEL_LAG_WARN='abc'"),
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


def test_warn_must_be_below_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN", "200")
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "200")
    with pytest.raises(SettingsError, match=r"SENTINEL_LAG_WARN \(200\) must be below"):
        load_settings()


def test_warn_seconds_must_be_below_pause_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN_S", "10")
    with pytest.raises(SettingsError, match=r"SENTINEL_LAG_WARN_S \(10.0\) must be below"):
        load_settings()


def test_hang_timeout_must_exceed_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_HANG_TIMEOUT_MS", "2000")
    monkeypatch.setenv("SENTINEL_LEASE_TTL_MS", "3000")
    with pytest.raises(SettingsError, match="SENTINEL_HANG_TIMEOUT_MS"):
        load_settings()


def test_cluster_url_switches_cluster_mode() -> None:
    assert load_settings(redis_url="redis+cluster://127.0.0.1:7000").is_cluster
    assert not load_settings(redis_url="redis://127.0.0.1:7000").is_cluster
    assert load_settings(redis_cluster=True).is_cluster


def test_password_never_appears_in_repr_or_redacted_url() -> None:
    settings = load_settings(redis_url="redis://app:s3cret-pw@127.0.0.1:6379/0")
    assert "s3cret-pw" not in repr(settings)
    assert "s3cret-pw" not in str(settings)
    assert redact_url(settings.redis_url_value) == "redis://app:***@127.0.0.1:6379/0"
    assert redact_url("redis://:s3cret-pw@h:1") == "redis://:***@h:1"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"


@pytest.mark.parametrize(
    "url",
    [
        "redis://:s3cret-pw@h:6379/0?ssl_ca_certs=/ca.pem",
        "redis+cluster://h:7000/0?ssl_certfile=/c.pem&ssl_password=s3cret-pw",
        "unix:///run/redis.sock?ssl_keyfile=/k.pem",
    ],
)
def test_tls_options_on_a_url_without_tls_are_refused_naming_the_options(url: str) -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(redis_url=url)
    assert "REDIS_URL" in str(error.value) and "use rediss://" in str(error.value)
    assert "TLS options (ssl_" in str(error.value)
    assert "s3cret-pw" not in str(error.value)


def test_tls_options_on_a_rediss_url_are_accepted() -> None:
    for url in (
        "rediss://:pw@h:6380/0?ssl_ca_certs=/ca.pem&ssl_certfile=/c.pem&ssl_keyfile=/k.pem",
        "rediss+cluster://h:7000/0?ssl_ca_certs=/ca.pem",
    ):
        assert load_settings(redis_url=url).redis_url_value == url


def test_spark_conf_pairs_are_parsed() -> None:
    settings = load_settings(spark_conf="spark.executor.memory=1g, spark.x.y=a=b")
    assert settings.spark_conf_pairs == {"spark.executor.memory": "1g", "spark.x.y": "a=b"}


def test_spark_conf_as_json_keeps_values_with_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    packages = "org.apache.hadoop:hadoop-aws:3.4.1,com.amazonaws:aws-java-sdk-bundle:1.12.782"
    conf = {"spark.jars.packages": packages, "spark.executor.memory": "2g"}
    monkeypatch.setenv("SENTINEL_SPARK_CONF", json.dumps(conf))
    assert load_settings().spark_conf_pairs == conf


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"spark.executor.cores": 2}', "JSON object of strings"),
        ('["spark.x=1"]', "JSON object of strings"),
        ('{"spark.x": "1"', "not valid JSON"),
    ],
)
def test_bad_spark_conf_json_names_the_variable_and_the_forms(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("SENTINEL_SPARK_CONF", value)
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert "SENTINEL_SPARK_CONF" in str(error.value)
    assert expected in str(error.value)


@pytest.mark.parametrize(
    ("rate", "accepted"),
    [
        ("1e-9", False),  # a call every 31 years: every slot wait would outlive the fleet
        ("0.0033", False),  # one call in five minutes
        ("0.0166", False),  # just under one call a minute
        (str(1 / 60), True),  # one call a minute: the lowest the fleet lives with
        ("0.15", True),
        ("1000", True),
    ],
)
def test_an_analyzer_rate_limit_below_one_call_a_minute_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, rate: str, accepted: bool
) -> None:
    monkeypatch.setenv("SENTINEL_ANALYZER_RATE_LIMIT", rate)
    if accepted:
        assert load_settings().analyzer_rate_limit == pytest.approx(float(rate))
        return
    with pytest.raises(SettingsError, match=r"SENTINEL_ANALYZER_RATE_LIMIT.*one call a minute"):
        load_settings()
