"""``docs/settings.md`` is generated from the settings model and kept in step with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform import settings_reference
from sentinel_platform.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_DOC = ROOT / "docs" / "settings.md"


def test_docs_settings_md_is_the_generated_reference() -> None:
    assert SETTINGS_DOC.read_text() == settings_reference.render(), (
        "docs/settings.md is out of date with sentinel_platform.settings; regenerate it: "
        f"{settings_reference.COMMAND}"
    )


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_has_a_description(name: str) -> None:
    description = Settings.model_fields[name].description
    assert description and description.strip(), f"Settings.{name} has no description="


def test_every_setting_has_one_row_with_its_environment_variable() -> None:
    text = settings_reference.render()
    for name, field in Settings.model_fields.items():
        row = f"| `{settings_reference.env_name(name, field)}` |"
        assert text.count(row) == 1, f"{row} should appear once"
    assert "| `REDIS_URL` |" in text and "SENTINEL_REDIS_URL" not in text


def test_environment_names_come_from_the_prefix_and_the_aliases() -> None:
    fields = Settings.model_fields
    assert settings_reference.env_name("redis_url", fields["redis_url"]) == "REDIS_URL"
    assert settings_reference.env_name("lag_warn_s", fields["lag_warn_s"]) == "SENTINEL_LAG_WARN_S"


def test_defaults_are_shown_as_the_environment_would_spell_them() -> None:
    fields = Settings.model_fields
    shown = {name: settings_reference.shown_default(field) for name, field in fields.items()}
    assert shown["redis_cluster"] == "`false`"
    assert shown["stream_retention_s"] == "unset"
    assert shown["spark_conf"] == '`""`'
    assert shown["stream_modules"] == '`""`'
    assert shown["home"] == "`.sentinel`"
    assert shown["idempotency_ttl_s"] == "`604800`"


def test_secrets_are_never_shown_with_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = [n for n, f in Settings.model_fields.items() if settings_reference.is_secret(f)]
    assert {"redis_url", "analyzer_url", "alert_webhook_url", "dagster_postgres_url"} <= set(
        secrets
    )
    for name in secrets:
        assert settings_reference.shown_default(Settings.model_fields[name]) == "unset"
    # The reference depends on the model alone, never on the environment it runs in.
    monkeypatch.setenv("REDIS_URL", "redis://:hunter2@example.invalid:6379/0")
    monkeypatch.setenv("SENTINEL_ALERT_WEBHOOK_URL", "https://hooks.example.invalid/hunter2")
    assert "hunter2" not in settings_reference.render()


def test_table_cells_stay_one_markdown_cell() -> None:
    for line in settings_reference.render().splitlines():
        if line.startswith("| `"):
            unescaped = line.replace("\\|", "")
            assert unescaped.count("|") == 4, f"a description breaks the table: {line}"
