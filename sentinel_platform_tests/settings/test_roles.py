"""A second analyzer's settings: the analyzer's own under ``SENTINEL_ANALYZER_<ROLE>_``."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform.settings import Settings, SettingsError, load_settings, role_settings
from sentinel_platform.settings.roles import ROLE_FIELDS, renamed, role_env_name, role_values

LIVE_KEY = "sk-live-Secr3t-0123456789"
SHADOW_KEY = "sk-shadow-Secr3t-0123456789"


@pytest.mark.parametrize(
    ("role", "field", "env"),
    [
        ("fallback", "analyzer_url", "SENTINEL_ANALYZER_FALLBACK_URL"),
        ("shadow", "analyzer_api_key_file", "SENTINEL_ANALYZER_SHADOW_API_KEY_FILE"),
        ("shadow", "analyzer_tokens_per_minute", "SENTINEL_ANALYZER_SHADOW_TOKENS_PER_MINUTE"),
        (
            "fallback",
            "analyzer_transactions_prompt_file",
            "SENTINEL_ANALYZER_FALLBACK_TRANSACTIONS_PROMPT_FILE",
        ),
    ],
)
def test_a_role_names_the_analyzer_setting_after_its_prefix(
    role: str, field: str, env: str
) -> None:
    assert field in ROLE_FIELDS
    assert role_env_name(role, field) == env  # type: ignore[arg-type]


def test_every_analyzer_setting_is_a_roles_and_nothing_else_is() -> None:
    assert {"analyzer_url", "analyzer_model", "analyzer_daily_tokens"} <= set(ROLE_FIELDS)
    assert "analyzer_max_output_tokens" in ROLE_FIELDS and "analyzer_rate_limit" in ROLE_FIELDS
    assert "high_risk_amount" not in ROLE_FIELDS
    assert "analyzer_shadow_fraction" not in ROLE_FIELDS, "the lane's own, not the analyzer's"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, {}),
        ({"SENTINEL_ANALYZER_URL": "http://live"}, {}),
        ({"SENTINEL_ANALYZER_SHADOW_URL": "http://s"}, {"analyzer_url": "http://s"}),
        ({"sentinel_analyzer_shadow_model": "m"}, {"analyzer_model": "m"}),
        ({"SENTINEL_ANALYZER_SHADOW_MODEL": "  "}, {}),
        ({"SENTINEL_ANALYZER_SHADOW_FRACTION": "0.5"}, {}),
        ({"SENTINEL_ANALYZER_FALLBACK_URL": "http://f"}, {}),
    ],
)
def test_role_values_come_from_the_roles_variables_alone(
    environ: dict[str, str], expected: dict[str, str]
) -> None:
    assert role_values("shadow", environ) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SENTINEL_ANALYZER_MODEL is required", "SENTINEL_ANALYZER_SHADOW_MODEL is required"),
        ("SENTINEL_ANALYZER_SHADOW_URL", "SENTINEL_ANALYZER_SHADOW_URL"),
        ("SENTINEL_HANG_TIMEOUT_MS (9)", "SENTINEL_HANG_TIMEOUT_MS (9)"),
    ],
)
def test_a_checks_message_names_the_roles_variables(text: str, expected: str) -> None:
    assert renamed(text, "shadow") == expected


@pytest.fixture
def live(tmp_path: Path) -> Settings:
    return load_settings(
        home=tmp_path,
        analyzer_url="http://127.0.0.1:9/v1",
        analyzer_api="openai",
        analyzer_model="gpt-4o",
        analyzer_api_key=LIVE_KEY,
        analyzer_daily_tokens=1000,
    )


def test_a_role_takes_its_own_values_and_the_analyzers_defaults_not_the_live_ones(
    live: Settings,
) -> None:
    environ = {
        "SENTINEL_ANALYZER_SHADOW_URL": "http://127.0.0.1:8/",
        "SENTINEL_ANALYZER_SHADOW_API": "anthropic",
        "SENTINEL_ANALYZER_SHADOW_MODEL": "claude-3-5-haiku-latest",
        "SENTINEL_ANALYZER_SHADOW_API_KEY": SHADOW_KEY,
        "SENTINEL_ANALYZER_SHADOW_RATE_LIMIT": "2",
    }
    shadow = role_settings(live, "shadow", environ)
    assert shadow is not None
    assert shadow.analyzer_api_kind == "anthropic"
    assert shadow.analyzer_key_value == SHADOW_KEY
    assert (shadow.analyzer_rate_limit, shadow.analyzer_daily_tokens) == (2.0, None)
    assert shadow.worker_concurrency == live.worker_concurrency, "the worker's own"
    assert live.analyzer_key_value == LIVE_KEY, "the live settings are unchanged"


def test_no_url_no_role(live: Settings) -> None:
    assert role_settings(live, "fallback", {"SENTINEL_ANALYZER_FALLBACK_MODEL": "m"}) is None


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        (
            {
                "SENTINEL_ANALYZER_FALLBACK_URL": "ftp://x",
                "SENTINEL_ANALYZER_FALLBACK_API_KEY": SHADOW_KEY,
            },
            "SENTINEL_ANALYZER_FALLBACK_URL",
        ),
        (
            {
                "SENTINEL_ANALYZER_FALLBACK_URL": "http://h/",
                "SENTINEL_ANALYZER_FALLBACK_API": "openai",
            },
            "SENTINEL_ANALYZER_FALLBACK_MODEL",
        ),
        (
            {
                "SENTINEL_ANALYZER_FALLBACK_URL": "http://h/",
                "SENTINEL_ANALYZER_FALLBACK_RATE_LIMIT": "0.001",
            },
            "SENTINEL_ANALYZER_FALLBACK_RATE_LIMIT",
        ),
        (
            {"SENTINEL_ANALYZER_FALLBACK_URL": "https://api.openai.com/v1"},
            "SENTINEL_ANALYZER_FALLBACK_API=openai",
        ),
    ],
)
def test_a_bad_role_setting_fails_naming_it_without_a_secret(
    live: Settings, environ: dict[str, str], named: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        role_settings(live, "fallback", environ)
    assert named in str(raised.value)
    assert SHADOW_KEY not in str(raised.value) and LIVE_KEY not in str(raised.value)
