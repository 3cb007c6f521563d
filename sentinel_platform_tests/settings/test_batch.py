"""The batch lane's settings: when a partition is past, and what a batch token costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform.settings import SettingsError, load_settings
from sentinel_platform.settings.batch import BatchLaneSetting, serves_batches


@pytest.mark.parametrize(
    ("api", "pinned", "share"),
    [
        ("openai", None, 0.5),
        ("anthropic", None, 0.5),
        ("sentinel", None, 1.0),
        ("openai", 0.4, 0.4),
        ("sentinel", 0.7, 0.7),
    ],
)
def test_the_batch_price_is_the_documented_discount_unless_pinned(
    tmp_path: Path, api: str, pinned: float | None, share: float
) -> None:
    settings = load_settings(home=tmp_path, analyzer_batch_price_share=pinned)
    assert settings.batch_price_share(api) == share


def test_a_day_is_past_after_a_day_by_default(tmp_path: Path) -> None:
    assert load_settings(home=tmp_path).analyzer_batch_after_s == 86_400.0


@pytest.mark.parametrize(
    ("name", "value"),
    [("SENTINEL_ANALYZER_BATCH_PRICE_SHARE", "0"), ("SENTINEL_ANALYZER_BATCH_AFTER_S", "-1")],
)
def test_a_bad_batch_setting_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        load_settings(home=tmp_path)


@pytest.mark.parametrize(
    ("api", "url", "pinned", "serves"),
    [
        ("openai", "https://api.openai.com/v1", "auto", True),
        ("anthropic", "https://API.anthropic.com", "auto", True),
        ("openai", "http://127.0.0.1:8080/v1", "auto", False),  # llama.cpp, vLLM, a proxy
        ("openai", "https://api.openai.com.evil.example/v1", "auto", False),
        ("openai", "http://127.0.0.1:8080/v1", "on", True),
        ("openai", "https://api.openai.com/v1", "off", False),
        ("sentinel", "http://127.0.0.1:8080", "on", False),
        ("openai", None, "on", False),
    ],
)
def test_a_server_has_a_batch_lane_on_the_providers_host_or_when_pinned(
    api: str, url: str | None, pinned: BatchLaneSetting, serves: bool
) -> None:
    assert serves_batches(api, url, pinned) is serves
