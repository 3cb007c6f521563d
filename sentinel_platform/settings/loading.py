"""Loading the settings: :func:`load_settings` and the error that names each bad variable.

Pydantic's own error quotes every rejected input verbatim, passwords included; a process
starting with a bad setting instead gets :class:`SettingsError`, one line per variable
under its environment name, secrets hidden and the whole text scrubbed.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, SecretStr, ValidationError

from sentinel_platform.redaction import redact_url, scrub
from sentinel_platform.settings.model import ENV_PREFIX, Settings


class SettingsError(ValueError):
    """A setting is invalid; the message names the environment variable and what is allowed."""


def _env_name(loc: tuple[object, ...]) -> str:
    field = str(loc[0]) if loc else ""
    if field in ("redis_url", "REDIS_URL"):
        return "REDIS_URL"
    return f"{ENV_PREFIX}{field.upper()}" if field else "settings"


def _is_secret(loc: tuple[object, ...]) -> bool:
    """The field (or alias, e.g. ``REDIS_URL``) may hold a credential: it is a ``SecretStr``."""
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        aliases = alias.choices if isinstance(alias, AliasChoices) else (alias,)
        if loc and loc[0] in (name, *aliases):
            return "SecretStr" in str(field.annotation)
    return False


def _shown_input(value: object, secret: bool) -> str:
    """The rejected value as an error may show it: a secret only as a redacted URL."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if secret and not (isinstance(value, str) and "://" in value):
        return "(hidden)"
    return repr(redact_url(value) if isinstance(value, str) else value)


def _explain(error: ValidationError) -> str:
    """One line per rejected variable: its name, its value (passwords hidden), the reason.

    The whole text is scrubbed once more, because a reason may quote part of a value.
    """
    lines = []
    for item in error.errors():
        loc = item.get("loc", ())
        name = _env_name(loc)
        message = item["msg"].removeprefix("Value error, ")
        if name == "settings":
            lines.append(message)
        else:
            lines.append(f"{name}={_shown_input(item.get('input'), _is_secret(loc))}: {message}")
    return scrub("invalid settings:\n  " + "\n  ".join(lines))


def load_settings(**overrides: Any) -> Settings:
    """Read and validate settings; raise :class:`SettingsError` naming each bad variable.

    The error is raised outside the ``except`` block so that pydantic's own error, which
    quotes every rejected input verbatim, is not even attached as context.
    """
    try:
        return Settings(**overrides)
    except ValidationError as error:
        message = _explain(error)
    raise SettingsError(message)
