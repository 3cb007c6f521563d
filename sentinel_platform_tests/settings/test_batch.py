"""The batch lane's settings: when a partition is past, and what a batch token costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform.settings import SettingsError, load_settings


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
