"""The settings reference (``docs/settings.md``), generated from :class:`Settings`.

Every field's environment variable, default and description come from the model itself,
so the document cannot drift from the code: a test compares ``docs/settings.md`` with
:func:`render`. Regenerate it with::

    python -m sentinel_platform.settings_reference > docs/settings.md
"""

from __future__ import annotations

from pydantic import AliasChoices, SecretStr
from pydantic.fields import FieldInfo

from sentinel_platform.settings import ROLE_FIELDS, ROLES, Settings, role_env_name

COMMAND = "python -m sentinel_platform.settings_reference > docs/settings.md"


def env_name(name: str, field: FieldInfo) -> str:
    """The environment variable of a field: its first validation alias, if it has one,
    else the model's ``env_prefix`` followed by the field name in upper case."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        first = alias.choices[0]
        if isinstance(first, str):
            return first
    elif isinstance(alias, str):
        return alias
    prefix = str(Settings.model_config.get("env_prefix") or "")
    return f"{prefix}{name}".upper()


def is_secret(field: FieldInfo) -> bool:
    """The field may hold a credential (a ``SecretStr``): its default is never shown."""
    return "SecretStr" in str(field.annotation)


def shown_default(field: FieldInfo) -> str:
    """The default as the table shows it: ``unset`` for None and for every secret,
    booleans as ``true``/``false``, a list as its comma-separated environment value."""
    if is_secret(field):
        return "unset"
    value = field.get_default(call_default_factory=True)
    if value is None or isinstance(value, SecretStr):
        return "unset"
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, list | tuple):
        text = ",".join(str(item) for item in value)
    else:
        text = str(value)
    return '`""`' if text == "" else f"`{text}`"


def _cell(text: str) -> str:
    """A table cell: one line, with the characters markdown would read as a column break,
    an HTML tag or emphasis escaped."""
    text = " ".join(text.split())
    for char in "|<>*":
        text = text.replace(char, "\\" + char)
    return text


def render() -> str:
    """The whole of ``docs/settings.md``."""
    lines = [
        "# Settings",
        "",
        f"Generated from `sentinel_platform/settings/` by `{COMMAND}`; do not edit by hand.",
        "",
        "Every process (workers, Dagster, `sentinel`, Spark executors) reads these environment",
        "variables; a bad value or combination stops the process at start-up, naming the",
        "variable. How they fit together: [configuration.md](configuration.md).",
        "",
        "| variable | default | meaning |",
        "|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        description = _cell(field.description or "")
        lines.append(f"| `{env_name(name, field)}` | {shown_default(field)} | {description} |")
    return "\n".join([*lines, *_roles()]) + "\n"


def _roles() -> list[str]:
    """The second analyzers' settings: each role takes every analyzer setting under its
    prefix (:mod:`sentinel_platform.settings.roles`), listed by the setting it mirrors."""
    lines = [
        "",
        "## A second analyzer: fallback and shadow",
        "",
        "Each role takes the analyzer's settings under its own prefix, with the analyzer's",
        "defaults (never the live analyzer's values); a role is on when its `_URL` is set.",
        "`FALLBACK` is asked when the live analyzer cannot be, before the rules; `SHADOW`",
        "beside it, never deciding ([analyzer.md](analyzer.md)).",
        "",
        "| variables | default | meaning |",
        "|---|---|---|",
    ]
    for field in ROLE_FIELDS:
        names = ", ".join(f"`{role_env_name(role, field)}`" for role in ROLES)
        live = env_name(field, Settings.model_fields[field])
        lines.append(f"| {names} | {shown_default(Settings.model_fields[field])} | as {live} |")
    return lines


if __name__ == "__main__":
    print(render(), end="")
