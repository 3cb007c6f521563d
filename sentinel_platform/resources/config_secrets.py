"""No password in a Dagster resource's config: the one rule every resource applies.

Resource config is listed on the UI's Resources page and run config is stored with every
run, so a password must reach a resource only through the settings (``REDIS_URL``,
``SENTINEL_ALERT_WEBHOOK_URL``, ... read from the environment as secrets). A value that
would carry one is refused with :class:`PasswordInConfigError`, whose message names the
field and where the password belongs but never quotes the value.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import AliasChoices

from sentinel_platform.redaction import redact_url
from sentinel_platform.settings import ENV_PREFIX, Settings


class PasswordInConfigError(Exception):
    """A password in a resource's config. Deliberately not a ``ValueError``: pydantic
    would wrap that in a ``ValidationError`` quoting the rejected value, password and all."""


def carries_password(value: str | None) -> bool:
    """The value holds a credential that redaction would hide (URL user-info password or a
    secret query parameter such as ``?password=`` or ``?token=``)."""
    return value is not None and redact_url(value) != value


def is_bare_secret(value: str | None) -> bool:
    """A secret setting's value that is no URL (a model API's key): all of it is the
    credential, so any non-blank one carries a password."""
    return value is not None and bool(value.strip()) and "://" not in value


def refuse_password(
    value: str | None, field: str, name: str, env_var: str, bare: bool = False
) -> None:
    """Raise :class:`PasswordInConfigError` if ``value`` carries a password (with ``bare``,
    also if it is a secret that is no URL, :func:`is_bare_secret`).

    ``field`` is how the UI shows the config entry (``RedisPublisherResource.redis_url``),
    ``name`` the entry to leave unset and ``env_var`` where the password goes instead.
    """
    if carries_password(value) or (bare and is_bare_secret(value)):
        raise PasswordInConfigError(
            f"{field} must not carry a password: resource and run config are shown in the "
            f"Dagster UI. Leave {name} unset and set {env_var} (with the password) in the "
            "code location's environment instead."
        )


def secret_setting_env_vars() -> dict[str, str]:
    """Every name a secret setting (a ``SecretStr`` field) is given by, lower-cased, to its
    environment variable.

    Field names and aliases both count (``redis_url`` and ``REDIS_URL``), because settings
    overrides accept either; case is ignored so no spelling slips past.
    """
    names: dict[str, str] = {}
    for name, field in Settings.model_fields.items():
        if "SecretStr" not in str(field.annotation):
            continue
        alias = field.validation_alias
        aliases = (
            [a for a in alias.choices if isinstance(a, str)]
            if isinstance(alias, AliasChoices)
            else []
        )
        env_var = aliases[0] if aliases else f"{ENV_PREFIX}{name.upper()}"
        for key in (name, *aliases):
            names[key.lower()] = env_var
    return names


def refuse_passwords_in_overrides(resource: str, overrides: Mapping[str, str]) -> None:
    """Refuse settings overrides whose secret settings carry a password (see module doc)."""
    secret = secret_setting_env_vars()
    for key, value in overrides.items():
        env_var = secret.get(key.lower())
        if env_var:
            name = f"overrides[{key!r}]"
            refuse_password(value, f"{resource}.{name}", name, env_var, bare=True)
