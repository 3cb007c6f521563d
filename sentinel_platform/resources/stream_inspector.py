"""``StreamInspector``: read-only Redis access for the operations sensors and checks.

Kept apart from the publisher resource on purpose: watching the pipeline must never be
able to write to the data streams. The only writes it offers are the producer-pause flag,
which is the sensors' job to own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from pydantic import Field, field_validator

from sentinel_platform.resources.alerts import settings_from
from sentinel_platform.resources.config_secrets import refuse_passwords_in_overrides
from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient, connect


class StreamInspector(dg.ConfigurableResource):
    """Settings and a short-lived Redis client for one sensor tick or check run."""

    overrides: dict[str, str] = Field(
        default_factory=dict,
        description="settings overrides by field name (e.g. lag_warn); env otherwise",
    )

    @field_validator("overrides")
    @classmethod
    def _no_password(cls, value: dict[str, str]) -> dict[str, str]:
        """Refuse a secret setting carrying a password (shown in the UI), never quoting it."""
        refuse_passwords_in_overrides("StreamInspector", value)
        return value

    def get_settings(self) -> Settings:
        return settings_from(self.overrides)

    @contextmanager
    def client(self) -> Iterator[RedisClient]:
        client = connect(self.get_settings())
        try:
            yield client
        finally:
            client.close()
