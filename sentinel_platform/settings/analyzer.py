"""The domain rules' and the analyzer's settings: when the rules decide, which analyzer is
asked beyond them, what API it speaks, and the fleet's limits on calling it.

The analyzer's URL and key may carry credentials: they are secrets, and every check here
names the setting without quoting its value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator

from sentinel_platform.redaction import remember_secret
from sentinel_platform.settings.urls import url_problem

#: The lowest fleet rate limit for the analyzer, one call a minute. Below it a call's slot
#: is minutes away: each waiting call holds a worker's thread, a message and its claim
#: that long, a stop or restart throws the reserved slots away, and the fleet passes one
#: message a minute, which no stream lives with (quotas are per minute at the finest).
ANALYZER_MIN_RATE_PER_S = 1 / 60

#: One call's bound per API when ``SENTINEL_ANALYZER_TIMEOUT_S`` is unset (seconds).
DEFAULT_TIMEOUT_S: dict[str, float] = {"sentinel": 5.0, "openai": 60.0, "anthropic": 60.0}


class AnalyzerSettings(BaseModel):
    """The domain rules and the analyzer: a part of
    :class:`~sentinel_platform.settings.Settings`."""

    # --- domain rules --------------------------------------------------------------------
    axiom_audit_threshold: float = Field(
        0.8,
        ge=0.0,
        le=1.0,
        description="axioms scoring strictly above it go to the analyzer",
    )
    high_risk_amount: float = Field(
        400.00, gt=0, description="rule-based threat threshold for transactions"
    )

    # --- the analyzer --------------------------------------------------------------------
    analyzer_url: SecretStr | None = Field(
        None,
        description="http(s):// analyzer asked about every transaction and every audited "
        "axiom; user:password@ becomes Basic auth (secret: never shown); unset uses the rules",
    )
    analyzer_timeout_s: float | None = Field(
        None,
        gt=0,
        le=600,
        description="analyzer timeout for connecting and answering; on failure the rules "
        "decide (driver_used=fallback). Unset: 5 for the sentinel API, 60 for openai and "
        "anthropic (a model writing its verdict takes seconds: 4-8 s a call is common)",
    )
    analyzer_breaker_failures: int = Field(
        5,
        ge=1,
        le=1000,
        description="consecutive analyzer failures or timeouts that open its circuit "
        "breaker: calls then fail at once and the rules decide (docs/analyzer.md)",
    )
    analyzer_breaker_cooldown_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="how long an open analyzer breaker refuses calls before one probe "
        "call may try again (a Retry-After is not a failure: it holds the fleet's calls, "
        "not the breaker)",
    )
    analyzer_when_down: Literal["rules", "wait"] = Field(
        "rules",
        description="an analyzer that is down (refused, timing out, 5xx without Retry-After, "
        "breaker open): rules decides by the rules (driver_used=fallback); wait keeps the "
        "message waiting for the analyzer (docs/analyzer.md). A busy analyzer (429, 503 with "
        "Retry-After) always means wait",
    )
    analyzer_rescreen: bool = Field(
        True,
        description="a rules fallback made because the analyzer could not be asked (down, "
        "breaker open, held, exhausted, over budget) is provisional and queued in its "
        "stream's re-screen queue, which the workers ask the model about once it is back, "
        "after live traffic; false: still marked provisional, but not queued "
        "(docs/analyzer.md)",
    )
    analyzer_id: str | None = Field(
        None,
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="names the analyzer service in the fleet's shared Retry-After hold and "
        "rate limit; unset: a hash of the URL's scheme, host, port and path (never its "
        "credentials), so workers calling one URL share them",
    )
    analyzer_rate_limit: float | None = Field(
        None,
        gt=0,
        le=1000,
        description="most analyzer calls per second across all workers (one shared Redis "
        "limiter, fair between workers; at least 1/60, one call a minute, and at most "
        "1000, one call a millisecond); unset: no limit",
    )
    analyzer_tokens_per_minute: int | None = Field(
        None,
        gt=0,
        description="most model tokens per minute across all workers (one shared Redis "
        "budget: each call reserves its prompt's estimate plus its max_tokens and is "
        "settled with the answer's usage); unset: only the limits the API announces "
        "(x-ratelimit-*, anthropic-ratelimit-* headers), learnt with no setting",
    )
    analyzer_daily_tokens: int | None = Field(
        None,
        gt=0,
        description="most model tokens per UTC day across all workers; spent, the analyzer "
        "is exhausted (held with an ERROR alert) until midnight UTC or `sentinel analyzer "
        "release`; unset: no daily budget",
    )

    analyzer_api: Literal["openai", "anthropic", "sentinel"] | None = Field(
        None,
        description="what SENTINEL_ANALYZER_URL speaks: openai (Chat Completions at a base URL "
        "such as https://api.openai.com/v1: OpenAI, Azure OpenAI, Gemini, vLLM, Ollama, "
        "llama.cpp, OpenRouter), anthropic (the Messages API), sentinel (the platform's own "
        "{kind, payload} contract); unset: sentinel, refused for a known model API's URL "
        "(docs/analyzer.md)",
    )
    analyzer_model: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="the model the openai and anthropic APIs are asked for (e.g. gpt-4o-mini, "
        "claude-3-5-haiku-latest); required for them",
    )
    analyzer_api_key: SecretStr | None = Field(
        None,
        description="the model API's key, sent as Authorization: Bearer (Azure: api-key; "
        "Anthropic: x-api-key); secret: never shown. Or SENTINEL_ANALYZER_API_KEY_FILE",
    )
    analyzer_api_key_file: Path | None = Field(
        None,
        description="a file holding the model API's key (a mounted secret), read at start-up "
        "and again when it changes (a key rotation); exclusive with SENTINEL_ANALYZER_API_KEY",
    )
    analyzer_max_output_tokens: int = Field(
        400,
        ge=16,
        le=32_000,
        description="most tokens the model may write per verdict (sent as max_tokens; the "
        "verdict itself needs about 100)",
    )
    analyzer_context_tokens: int | None = Field(
        None,
        ge=64,
        le=10_000_000,
        description="the model's context in tokens (prompt and max_tokens together), for "
        "the openai and anthropic APIs: a message that cannot fit it is not sent but decided "
        "as SENTINEL_ANALYZER_WHEN_DOWN says (wait: dead-lettered), counting its bytes at "
        "their fewest tokens; must exceed SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS; unset: "
        "learnt from the first refusal that announces it",
    )
    analyzer_response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema",
        description="how the openai API is asked for the verdict's JSON schema: json_schema "
        "(OpenAI, Azure, Gemini, vLLM, Ollama, OpenRouter) or json_object with the schema "
        "beside it (llama.cpp's Python server, which answers json_schema with HTTP 500)",
    )
    analyzer_transactions_prompt_file: Path | None = Field(
        None,
        description="a text file replacing the packaged instructions the model gets for "
        "each transaction (its content hash becomes the verdicts' prompt_version)",
    )
    analyzer_axioms_prompt_file: Path | None = Field(
        None,
        description="a text file replacing the packaged instructions the model gets for "
        "each audited axiom (its content hash becomes the events' prompt_version)",
    )
    analyzer_price_input_per_mtok: float | None = Field(
        None,
        ge=0,
        description="the model's price per million prompt tokens, for the cost the reporting "
        "assets show (with SENTINEL_ANALYZER_PRICE_OUTPUT_PER_MTOK; unset: tokens only)",
    )
    analyzer_price_output_per_mtok: float | None = Field(
        None,
        ge=0,
        description="the model's price per million completion tokens (with "
        "SENTINEL_ANALYZER_PRICE_INPUT_PER_MTOK; unset: tokens only, no cost)",
    )
    analyzer_price_cached_input_per_mtok: float | None = Field(
        None,
        ge=0,
        description="the price per million prompt tokens served from the provider's prompt "
        "cache (unset: billed at SENTINEL_ANALYZER_PRICE_INPUT_PER_MTOK)",
    )

    @field_validator("analyzer_url")
    @classmethod
    def _http_analyzer(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        problem = url_problem(value.get_secret_value(), ("http", "https"), needs_host=True)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("analyzer_api_key")
    @classmethod
    def _blank_key_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        return value if value is not None and value.get_secret_value().strip() else None

    @field_validator("analyzer_rate_limit")
    @classmethod
    def _livable_rate(cls, value: float | None) -> float | None:
        if value is not None and value < ANALYZER_MIN_RATE_PER_S:
            raise ValueError(
                f"{value:g} calls/s is below the lowest rate a fleet lives with, "
                f"{ANALYZER_MIN_RATE_PER_S:.4f}/s (one call a minute): a call would wait "
                f"{1 / value:.0f} s for its slot"
            )
        return value

    @property
    def analyzer_api_kind(self) -> Literal["openai", "anthropic", "sentinel"]:
        """The API the analyzer speaks: ``SENTINEL_ANALYZER_API``, else ``sentinel``."""
        return self.analyzer_api or "sentinel"

    @property
    def analyzer_call_timeout_s(self) -> float:
        """The bound of one analyzer call: ``SENTINEL_ANALYZER_TIMEOUT_S``, else the API's
        own default (:data:`DEFAULT_TIMEOUT_S`). A model API gets a minute because its
        answers are generated: a hosted model takes 4-8 s a verdict under load and a local
        one queues its calls, while the platform's own contract answers in under a second.
        A timeout is a bound on a stuck call, not a pace: the in-flight limit follows the
        latency below it, and a call that reaches it costs its verdict."""
        if self.analyzer_timeout_s is not None:
            return self.analyzer_timeout_s
        return DEFAULT_TIMEOUT_S[self.analyzer_api_kind]

    @property
    def analyzer_key_value(self) -> str:
        """The model API's key (``SENTINEL_ANALYZER_API_KEY``, else the file's content,
        stripped), or "" when neither is set. Read from the file on each call: a worker
        reads it at start-up, then again whenever the file changes
        (:class:`~workers.analyzer.keys.key_source.KeySource`)."""
        if self.analyzer_api_key is not None:
            return self.analyzer_api_key.get_secret_value()
        if self.analyzer_api_key_file is None:
            return ""
        return read_key_file(self.analyzer_api_key_file)


def read_key_file(path: Path) -> str:
    """The key in ``path`` without surrounding white space (a mounted secret often ends in a
    newline), remembered as a secret; ValueError naming the setting when it cannot be read
    or is empty. The error never quotes the file's content."""
    name = "SENTINEL_ANALYZER_API_KEY_FILE"
    try:
        key = path.expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{name}: cannot read {str(path)!r} ({type(exc).__name__})") from None
    if not key:
        raise ValueError(f"{name}: {str(path)!r} is empty")
    remember_secret(key)
    return key


#: Domains of model APIs (a host or any host below it), and the API each speaks.
MODEL_API_HOSTS = (
    ("api.openai.com", "openai"),
    ("openai.azure.com", "openai"),
    ("generativelanguage.googleapis.com", "openai"),
    ("openrouter.ai", "openai"),
    ("api.anthropic.com", "anthropic"),
)


def model_api_host(url: str) -> tuple[str, str] | None:
    """``(host, api)`` when ``url`` is a known model API's, else None."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return None
    for domain, api in MODEL_API_HOSTS:
        if host == domain or host.endswith(f".{domain}"):
            return host, api
    return None


def check_call_within_hang(settings: AnalyzerSettings, hang_timeout_ms: int) -> None:
    """Refuse an analyzer call allowed to last as long as a hung message, naming both
    settings: the watchdog would take a slow call for a hung worker and end it."""
    if settings.analyzer_url is None:
        return
    timeout_s = settings.analyzer_call_timeout_s
    if hang_timeout_ms <= timeout_s * 1000:
        unset = "" if settings.analyzer_timeout_s is not None else ", its default for this API"
        raise ValueError(
            f"SENTINEL_HANG_TIMEOUT_MS ({hang_timeout_ms}) must be above "
            f"SENTINEL_ANALYZER_TIMEOUT_S ({timeout_s:g} s{unset}): a slow analyzer call "
            "would be taken for a hung worker"
        )


def check_model_api(settings: AnalyzerSettings) -> None:
    """Refuse, naming the setting, what cannot call a model API: a known model API's URL
    with no ``SENTINEL_ANALYZER_API`` (today's contract would be sent to it and every
    verdict fall back to the rules), no model for openai or anthropic, an API without a
    URL, both key settings, an unreadable or empty key file, a context that leaves no room
    for a message."""
    api = settings.analyzer_api
    hosted = model_api_host(
        settings.analyzer_url.get_secret_value() if settings.analyzer_url else ""
    )
    if api is None and hosted is not None:
        raise ValueError(
            f"SENTINEL_ANALYZER_URL names {hosted[0]}, a model API: set "
            f"SENTINEL_ANALYZER_API={hosted[1]} (and SENTINEL_ANALYZER_MODEL); unset, the "
            "platform's own contract would be sent to it"
        )
    if api is not None and settings.analyzer_url is None:
        raise ValueError(f"SENTINEL_ANALYZER_API={api} needs SENTINEL_ANALYZER_URL")
    if api in ("openai", "anthropic") and settings.analyzer_model is None:
        raise ValueError(f"SENTINEL_ANALYZER_MODEL is required with SENTINEL_ANALYZER_API={api}")
    if settings.analyzer_api_key is not None and settings.analyzer_api_key_file is not None:
        raise ValueError(
            "SENTINEL_ANALYZER_API_KEY and SENTINEL_ANALYZER_API_KEY_FILE are both set: keep one"
        )
    if settings.analyzer_api_key_file is not None:
        read_key_file(settings.analyzer_api_key_file)
    context = settings.analyzer_context_tokens
    if context is not None and api not in ("openai", "anthropic"):
        raise ValueError(
            "SENTINEL_ANALYZER_CONTEXT_TOKENS is for SENTINEL_ANALYZER_API=openai or anthropic"
        )
    if context is not None and context <= settings.analyzer_max_output_tokens:
        raise ValueError(
            f"SENTINEL_ANALYZER_CONTEXT_TOKENS ({context}) must exceed "
            f"SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS ({settings.analyzer_max_output_tokens}): "
            "no message would fit beside the verdict"
        )
