"""The README's settings table is the user's reference: it must list every setting with
the default the code really uses."""

from __future__ import annotations

import re
from pathlib import Path

from sentinel_platform.settings import ENV_PREFIX, Settings

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `(?P<env>[A-Z_]+)` \| (?P<default>[^|]+) \|", re.MULTILINE)


def _env_name(field: str) -> str:
    return "REDIS_URL" if field == "redis_url" else f"{ENV_PREFIX}{field.upper()}"


def _documented(value: object) -> str:
    if value is None:
        return "unset"
    if value == "":
        return '`""`'
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _settings_section() -> str:
    """The "## Settings" section only: other sections may show settings in examples."""
    text = README.read_text()
    start = text.index("\n## Settings\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_readme_lists_every_setting_with_the_default_of_the_code() -> None:
    rows = {m["env"]: m["default"].strip() for m in ROW.finditer(_settings_section())}
    expected = {
        _env_name(name): _documented(field.default) for name, field in Settings.model_fields.items()
    }
    missing = sorted(set(expected) - set(rows))
    assert not missing, f"settings missing from README.md: {missing}"
    unknown = sorted(set(rows) - set(expected))
    assert not unknown, f"README.md documents settings the code does not have: {unknown}"
    wrong = {env: (rows[env], want) for env, want in expected.items() if rows[env] != want}
    assert not wrong, f"README default differs from the code (readme, code): {wrong}"
