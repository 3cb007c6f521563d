"""The backpressure settings: a soft lag limit at or above the hard one fails at start-up,
in messages or in seconds, naming both settings."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import SettingsError, load_settings


def test_warn_must_be_below_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN", "200")
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "200")
    with pytest.raises(SettingsError, match=r"SENTINEL_LAG_WARN \(200\) must be below"):
        load_settings()


def test_warn_seconds_must_be_below_pause_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN_S", "10")
    with pytest.raises(SettingsError, match=r"SENTINEL_LAG_WARN_S \(10.0\) must be below"):
        load_settings()
