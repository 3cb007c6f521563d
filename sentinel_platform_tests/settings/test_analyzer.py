"""The analyzer's settings: what cannot call the model API fails at start-up naming the
setting, the key, from the environment or a file, is never shown, a fleet rate limit
below one call a minute is refused, and a call's timeout is the API's own unless pinned."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.redaction import scrub
from sentinel_platform.settings import SettingsError, load_settings

URL = "https://api.openai.com/v1"
#: A self-hosted server: nothing says which API it speaks, so unset means sentinel.
LOCAL = "http://127.0.0.1:8000/v1"
KEY = "sk-proj-Adapt3rs-K3y-0123456789"
MODEL_API = {"analyzer_api": "openai", "analyzer_url": LOCAL, "analyzer_model": "m"}


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"analyzer_api": "openai", "analyzer_url": URL}, "SENTINEL_ANALYZER_MODEL is required"),
        ({"analyzer_api": "anthropic", "analyzer_url": URL}, "SENTINEL_ANALYZER_MODEL is required"),
        ({"analyzer_api": "openai", "analyzer_model": "m"}, "needs SENTINEL_ANALYZER_URL"),
        ({"analyzer_api": "gemini", "analyzer_url": URL}, "SENTINEL_ANALYZER_API="),
        (
            {"analyzer_url": LOCAL, "analyzer_api_key": KEY, "analyzer_api_key_file": "{file}"},
            "SENTINEL_ANALYZER_API_KEY and SENTINEL_ANALYZER_API_KEY_FILE are both set",
        ),
        ({"analyzer_url": LOCAL, "analyzer_api_key_file": "{missing}"}, "KEY_FILE: cannot read"),
        ({"analyzer_url": LOCAL, "analyzer_api_key_file": "{empty}"}, "KEY_FILE: "),
        ({"analyzer_url": LOCAL, "analyzer_response_format": "xml"}, "RESPONSE_FORMAT="),
        ({"analyzer_url": LOCAL, "analyzer_max_output_tokens": 0}, "MAX_OUTPUT_TOKENS="),
        (
            {**MODEL_API, "analyzer_context_tokens": 400},
            "SENTINEL_ANALYZER_CONTEXT_TOKENS (400) must exceed "
            "SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS (400)",
        ),
        ({**MODEL_API, "analyzer_context_tokens": 0}, "SENTINEL_ANALYZER_CONTEXT_TOKENS="),
        (
            {"analyzer_url": LOCAL, "analyzer_context_tokens": 8192},
            "SENTINEL_ANALYZER_CONTEXT_TOKENS is for SENTINEL_ANALYZER_API=openai or anthropic",
        ),
        # a model API's URL with the API unset: today's contract would be sent to it
        (
            {"analyzer_url": URL},
            "names api.openai.com, a model API: set SENTINEL_ANALYZER_API=openai",
        ),
        (
            {"analyzer_url": "https://api.anthropic.com"},
            "set SENTINEL_ANALYZER_API=anthropic",
        ),
        (
            {"analyzer_url": "https://res.openai.azure.com/openai/deployments/d?api-version=1"},
            "names res.openai.azure.com",
        ),
        (
            {"analyzer_url": "https://generativelanguage.googleapis.com/v1beta/openai"},
            "SENTINEL_ANALYZER_API=openai",
        ),
    ],
)
def test_what_cannot_call_the_api_fails_naming_the_setting(
    tmp_path: Path, values: dict[str, Any], named: str
) -> None:
    files = {"file": tmp_path / "key", "missing": tmp_path / "nope", "empty": tmp_path / "empty"}
    files["file"].write_text(KEY)
    files["empty"].write_text("\n")
    values = {k: v.format(**files) if isinstance(v, str) else v for k, v in values.items()}
    with pytest.raises(SettingsError) as raised:
        load_settings(home=tmp_path, **values)
    assert named in str(raised.value)
    assert KEY not in str(raised.value)


def test_the_api_defaults_to_sentinel_and_the_key_file_is_read_stripped(tmp_path: Path) -> None:
    assert load_settings(home=tmp_path, analyzer_url=LOCAL).analyzer_api_kind == "sentinel"
    explicit = load_settings(home=tmp_path, analyzer_url=URL, analyzer_api="sentinel")
    assert explicit.analyzer_api_kind == "sentinel", "said explicitly, any host may serve it"
    key_file = tmp_path / "key"
    key_file.write_text(f"{KEY}\n")  # a mounted secret often ends with a newline
    settings = load_settings(
        home=tmp_path,
        analyzer_api="openai",
        analyzer_url=URL,
        analyzer_model="gpt-4o-mini",
        analyzer_api_key_file=str(key_file),
    )
    assert settings.analyzer_key_value == KEY
    assert KEY not in repr(settings)
    assert KEY not in scrub(f"echoed: {KEY}"), "a key read from a file is masked like any secret"


MODEL = {"analyzer_url": URL, "analyzer_model": "m"}


@pytest.mark.parametrize(
    ("values", "timeout_s"),
    [
        ({"analyzer_url": LOCAL}, 5.0),  # the platform's own contract answers in under 1 s
        ({**MODEL, "analyzer_api": "openai"}, 60.0),  # a model writes its verdict: seconds
        ({**MODEL, "analyzer_api": "anthropic"}, 60.0),
        ({**MODEL, "analyzer_api": "openai", "analyzer_timeout_s": 12}, 12.0),  # pinned
        ({"analyzer_url": LOCAL, "analyzer_timeout_s": 0.5}, 0.5),
    ],
)
def test_a_calls_timeout_is_the_apis_own_unless_pinned(
    tmp_path: Path, values: dict[str, Any], timeout_s: float
) -> None:
    assert load_settings(home=tmp_path, **values).analyzer_call_timeout_s == timeout_s


@pytest.mark.parametrize(
    ("values", "refused"),
    [
        ({**MODEL, "analyzer_api": "openai", "hang_timeout_ms": 60_000},
         "SENTINEL_HANG_TIMEOUT_MS (60000) must be above SENTINEL_ANALYZER_TIMEOUT_S (60 s, "
         "its default for this API)"),
        ({"analyzer_url": LOCAL, "analyzer_timeout_s": 30, "hang_timeout_ms": 20_000},
         "SENTINEL_HANG_TIMEOUT_MS (20000) must be above SENTINEL_ANALYZER_TIMEOUT_S (30 s)"),
        ({**MODEL, "analyzer_api": "openai", "hang_timeout_ms": 60_001}, None),
        # a slow model on a CPU: a long timeout, with the watchdog raised to match
        ({**MODEL, "analyzer_api": "openai", "analyzer_timeout_s": 300},
         "SENTINEL_HANG_TIMEOUT_MS (300000) must be above SENTINEL_ANALYZER_TIMEOUT_S (300 s)"),
        ({**MODEL, "analyzer_api": "openai", "analyzer_timeout_s": 300,
          "hang_timeout_ms": 600_000}, None),
        ({"hang_timeout_ms": 2_000, "lease_ttl_ms": 1_000}, None),  # no analyzer: no call
    ],
)  # fmt: skip
def test_an_analyzer_call_as_long_as_a_hung_message_is_refused(
    tmp_path: Path, values: dict[str, Any], refused: str | None
) -> None:
    if refused is None:
        load_settings(home=tmp_path, **values)
        return
    with pytest.raises(SettingsError, match=re.escape(refused)):
        load_settings(home=tmp_path, **values)


def test_the_key_from_the_environment_is_never_shown(tmp_path: Path) -> None:
    settings = load_settings(
        home=tmp_path,
        analyzer_api="anthropic",
        analyzer_url="https://api.anthropic.com",
        analyzer_model="claude-3-5-haiku-latest",
        analyzer_api_key=KEY,
    )
    assert settings.analyzer_key_value == KEY
    assert KEY not in repr(settings) and KEY not in str(settings.model_dump())
    assert KEY not in scrub(f"echoed: {KEY}")


@pytest.mark.parametrize(
    ("rate", "accepted"),
    [
        ("1e-9", False),  # a call every 31 years: every slot wait would outlive the fleet
        ("0.0033", False),  # one call in five minutes
        ("0.0166", False),  # just under one call a minute
        (str(1 / 60), True),  # one call a minute: the lowest the fleet lives with
        ("0.15", True),
        ("1000", True),
    ],
)
def test_an_analyzer_rate_limit_below_one_call_a_minute_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, rate: str, accepted: bool
) -> None:
    monkeypatch.setenv("SENTINEL_ANALYZER_RATE_LIMIT", rate)
    if accepted:
        assert load_settings().analyzer_rate_limit == pytest.approx(float(rate))
        return
    with pytest.raises(SettingsError, match=r"SENTINEL_ANALYZER_RATE_LIMIT.*one call a minute"):
        load_settings()
