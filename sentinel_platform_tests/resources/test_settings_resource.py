"""``SettingsResource``: the Dagster code's one way to the settings, with the loader's rules."""

from __future__ import annotations

import pytest

from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import SettingsError


def test_overrides_go_on_top_of_the_environment_and_calls_on_top_of_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN", "111")
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "999")
    resource = SettingsResource(overrides={"lag_warn": "222"})
    assert resource.load().lag_warn == 222
    assert resource.load().lag_pause == 999
    assert resource.load(lag_warn=333).lag_warn == 333


def test_a_bad_environment_variable_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN", "lots")
    with pytest.raises(SettingsError, match="SENTINEL_LAG_WARN"):
        SettingsResource().load()


def test_a_bad_override_fails_naming_the_setting() -> None:
    with pytest.raises(SettingsError, match="SENTINEL_LAG_PAUSE"):
        SettingsResource(overrides={"lag_pause": "-1"}).load()
