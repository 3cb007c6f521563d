"""``SENTINEL_WORKER_CONCURRENCY=auto`` and the analyzer's capacity settings.

``auto`` must reach every current reader as a number (the maximum, for sizing threads and
the analyzer's pool) while :attr:`Settings.worker_concurrency_pinned` still tells it apart
from a pinned value, and it must survive the worker's dump-and-reload of its settings
(``--count`` and friends re-validate ``model_dump()``). Bad values fail at start-up
naming the variable, and so does a hang timeout not above the lease's TTL.
"""

from __future__ import annotations

import pytest

from sentinel_platform.settings import SettingsError, load_settings


@pytest.mark.parametrize(
    ("env", "threads", "pinned"),
    [
        ({}, 256, None),  # the default: auto
        ({"SENTINEL_WORKER_CONCURRENCY": "32"}, 32, 32),
        ({"SENTINEL_WORKER_CONCURRENCY": "auto"}, 256, None),
        ({"SENTINEL_WORKER_CONCURRENCY": " AUTO "}, 256, None),
        (
            {"SENTINEL_WORKER_CONCURRENCY": "auto", "SENTINEL_WORKER_CONCURRENCY_MAX": "64"},
            64,
            None,
        ),
        ({"SENTINEL_WORKER_CONCURRENCY": "300", "SENTINEL_WORKER_CONCURRENCY_MAX": "64"}, 300, 300),
    ],
)
def test_concurrency_is_a_number_or_auto_up_to_the_maximum(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], threads: int, pinned: int | None
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert (settings.worker_concurrency, settings.worker_concurrency_pinned) == (threads, pinned)
    again = load_settings(**settings.model_dump())  # what a worker does with --count
    assert (again.worker_concurrency, again.worker_concurrency_pinned) == (threads, pinned)


def test_a_command_line_number_pins_an_auto_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_WORKER_CONCURRENCY", "auto")
    settings = load_settings()
    pinned = settings.model_copy(update={"worker_concurrency": 4})  # `sentinel up`'s override
    assert (pinned.worker_concurrency, pinned.worker_concurrency_pinned) == (4, 4)
    reloaded = load_settings(**{**settings.model_dump(), "worker_concurrency": 8})
    assert reloaded.worker_concurrency_pinned == 8


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("SENTINEL_WORKER_CONCURRENCY", "0", "1 to 1024, or auto"),
        ("SENTINEL_WORKER_CONCURRENCY", "many", "1 to 1024, or auto"),
        ("SENTINEL_WORKER_CONCURRENCY", "2000", "1 to 1024, or auto"),
        ("SENTINEL_WORKER_CONCURRENCY_MAX", "0", "greater than or equal to 1"),
        ("SENTINEL_ANALYZER_WHEN_DOWN", "fallback", "'rules' or 'wait'"),
        ("SENTINEL_ANALYZER_RATE_LIMIT", "0", "greater than 0"),
        ("SENTINEL_ANALYZER_TOKENS_PER_MINUTE", "0", "greater than 0"),
        ("SENTINEL_ANALYZER_TOKENS_PER_MINUTE", "lots", "valid integer"),
        ("SENTINEL_ANALYZER_DAILY_TOKENS", "-5", "greater than 0"),
        ("SENTINEL_ANALYZER_ID", "a b", "should match pattern"),
        ("SENTINEL_ANALYZER_ID", "{tag}", "should match pattern"),
    ],
)
def test_a_bad_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert f"{variable}=" in str(caught.value) and says in str(caught.value)


def test_the_analyzer_capacity_defaults() -> None:
    settings = load_settings()
    assert (
        settings.worker_concurrency_max,
        settings.analyzer_when_down,
        settings.analyzer_id,
        settings.analyzer_rate_limit,
    ) == (256, "rules", None, None)


def test_hang_timeout_must_exceed_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENTINEL_HANG_TIMEOUT_MS", "2000")
    monkeypatch.setenv("SENTINEL_LEASE_TTL_MS", "3000")
    with pytest.raises(SettingsError, match="SENTINEL_HANG_TIMEOUT_MS"):
        load_settings()
