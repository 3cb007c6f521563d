"""The Redis connection's settings: which server, how clients reach it, and what it may be.

``REDIS_URL`` may carry a password, so it is a secret and its checks never quote it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator

from sentinel_platform.settings.urls import tls_problem, url_problem

REDIS_URL_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster", "unix")


class ConnectionSettings(BaseModel):
    """The Redis server and its clients: a part of :class:`~sentinel_platform.settings.Settings`."""

    redis_url: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "SENTINEL_REDIS_URL"),
        description="redis://, rediss:// (TLS) or redis+cluster:// URL with user/password "
        "(secret: never shown); unset starts the embedded server",
    )
    redis_cluster: bool = Field(False, description="treat REDIS_URL as a Redis Cluster seed node")
    redis_server: str | None = Field(
        None,
        description="redis-server/valkey-server binary (7.0+) for the embedded server and "
        "the tests",
    )
    redis_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="embedded server port; 0 picks a free one (kept across restarts)",
    )
    redis_socket_timeout_s: float = Field(
        10.0, gt=0, le=300, description="socket timeout of every Redis client"
    )
    allow_evicting_server: bool = Field(
        False,
        description="run on a server whose maxmemory-policy is allkeys-* (it may evict the "
        "streams, markers and leases: messages lost or applied twice); refused otherwise; "
        "noeviction is the safe policy, volatile-* runs with a warning",
    )

    @field_validator("redis_url")
    @classmethod
    def _known_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        problem = url_problem(value.get_secret_value(), REDIS_URL_SCHEMES) or tls_problem(
            value.get_secret_value()
        )
        if problem:
            raise ValueError(problem)
        return value

    @property
    def is_cluster(self) -> bool:
        if self.redis_cluster:
            return True
        return self.redis_url is not None and "+cluster" in urlsplit(self.redis_url_value).scheme

    @property
    def redis_url_value(self) -> str:
        return self.redis_url.get_secret_value() if self.redis_url else ""
