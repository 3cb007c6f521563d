"""The settings of a second analyzer (a role): the analyzer's own settings under a prefix.

A role is a model beside the live one: ``fallback`` (asked when the live one cannot be,
before the rules) or ``shadow`` (asked beside it, never deciding). Each takes every
``SENTINEL_ANALYZER_<NAME>`` setting of
:class:`~sentinel_platform.settings.analyzer.AnalyzerSettings` as
``SENTINEL_ANALYZER_<ROLE>_<NAME>`` (``SENTINEL_ANALYZER_FALLBACK_URL``,
``SENTINEL_ANALYZER_SHADOW_MODEL``, ``..._API_KEY_FILE``, ``..._TOKENS_PER_MINUTE``,
the prompt files, ...), derived from the model's fields so a new analyzer setting is a
role's too. A role's unset settings take the analyzer's defaults, never the live
analyzer's values: a shadow must not borrow the live model's key or budget by accident.
Its fleet identity (hold, rate limit, token budget, key holds) follows its own URL and
``..._ID``, so a hold on one model never holds the other.

A role is checked as the analyzer is (:func:`check_model_api`,
:func:`check_call_within_hang`), when its worker starts, and its errors name the role's
variables without quoting a secret.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import ValidationError

from sentinel_platform.redaction import remember_secret, scrub
from sentinel_platform.settings.analyzer import (
    AnalyzerSettings,
    check_call_within_hang,
    check_model_api,
)
from sentinel_platform.settings.loading import SettingsError
from sentinel_platform.settings.model import ENV_PREFIX, Settings

Role = Literal["fallback", "shadow"]
ROLES: tuple[Role, ...] = ("fallback", "shadow")

#: The analyzer settings a role has: every ``analyzer_*`` field of the analyzer's model.
ROLE_FIELDS: tuple[str, ...] = tuple(
    name for name in AnalyzerSettings.model_fields if name.startswith("analyzer_")
)


def role_env_name(role: Role, field: str) -> str:
    """``analyzer_url`` of ``fallback`` -> ``SENTINEL_ANALYZER_FALLBACK_URL``."""
    return f"{ENV_PREFIX}ANALYZER_{role.upper()}_{field.removeprefix('analyzer_').upper()}"


def role_values(role: Role, environ: Mapping[str, str]) -> dict[str, str]:
    """The role's settings in ``environ`` by field name (names matched in any case, as
    the settings read the environment); blank values count as unset."""
    upper = {name.upper(): value for name, value in environ.items()}
    wanted = {role_env_name(role, field): field for field in ROLE_FIELDS}
    return {field: upper[env] for env, field in wanted.items() if upper.get(env, "").strip()}


def renamed(text: str, role: Role) -> str:
    """``text`` (a check's message) naming the role's variables instead of the analyzer's."""
    others = "|".join(r.upper() + "_" for r in ROLES)
    return re.sub(
        rf"{ENV_PREFIX}ANALYZER_(?!{others})", f"{ENV_PREFIX}ANALYZER_{role.upper()}_", text
    )


def role_settings(
    settings: Settings, role: Role, environ: Mapping[str, str] | None = None
) -> Settings | None:
    """``settings`` with the role's analyzer settings in place of the live analyzer's, or
    None when ``SENTINEL_ANALYZER_<ROLE>_URL`` is unset (no such role). Everything else
    (concurrency, the hang timeout, the streams) is the worker's own. A bad value raises
    :class:`SettingsError` naming the role's variable."""
    values = role_values(role, os.environ if environ is None else environ)
    if "analyzer_url" not in values:
        return None
    for name in ("analyzer_url", "analyzer_api_key"):
        if name in values:
            remember_secret(values[name])
    try:
        part = AnalyzerSettings.model_validate(values)
    except ValidationError as error:
        lines = [
            f"{role_env_name(role, str(item['loc'][0]))}: "
            f"{item['msg'].removeprefix('Value error, ')}"
            for item in error.errors()
        ]
        raise SettingsError(scrub("invalid settings:\n  " + "\n  ".join(lines))) from None
    try:
        check_model_api(part)
        check_call_within_hang(part, settings.hang_timeout_ms)
    except ValueError as exc:
        raise SettingsError(scrub(renamed(str(exc), role))) from None
    update = {name: getattr(part, name) for name in ROLE_FIELDS}
    return settings.model_copy(update=update)
