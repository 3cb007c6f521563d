"""``SettingsResource``: the one way Dagster code (assets, checks, sensors, schedules and
the other resources) gets the settings.

The settings come from the environment (``REDIS_URL``, ``SENTINEL_*``) through
:func:`~sentinel_platform.settings.load_settings`, the same loader the workers and the CLI
call at their entry points, so a bad variable fails the same way everywhere: naming the
variable and the allowed values. ``overrides`` (settings field names) go on top, for tests
and one-off deployments; they are resource config, which the Dagster UI lists and every
run stores, so a secret setting carrying a password there is refused
(:mod:`~sentinel_platform.resources.config_secrets`).
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field, field_validator

from sentinel_platform.resources.config_secrets import refuse_passwords_in_overrides
from sentinel_platform.settings import Settings, load_settings


class SettingsResource(dg.ConfigurableResource):
    """The validated settings: the environment's, with ``overrides`` on top."""

    overrides: dict[str, str] = Field(
        default_factory=dict,
        description="settings overrides by field name (e.g. lag_warn); environment otherwise",
    )

    @field_validator("overrides")
    @classmethod
    def _no_password(cls, value: dict[str, str]) -> dict[str, str]:
        """Refuse a secret setting carrying a password (shown in the UI), never quoting it."""
        refuse_passwords_in_overrides("SettingsResource", value)
        return value

    def load(self, **more: object) -> Settings:
        """The settings, read and validated now; ``more`` (field names) goes on top of the
        overrides. Raises :class:`~sentinel_platform.settings.SettingsError` naming each
        bad variable."""
        return load_settings(**{**self.overrides, **more})


def settings_or_environment(resource: SettingsResource | None) -> SettingsResource:
    """``resource``, or the environment's settings when a resource was built without one."""
    return resource if resource is not None else SettingsResource()
