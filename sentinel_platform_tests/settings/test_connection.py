"""The Redis connection's settings: a cluster URL switches cluster mode, the password is
never shown, and TLS options on a URL without TLS fail at start-up naming them."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import SettingsError, load_settings, redact_url


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
