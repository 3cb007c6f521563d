"""The analyzer the settings describe, built once per worker at start-up.

Everything a worker needs to call its analyzer is read and checked here, so a bad value
fails start-up naming its setting instead of turning every verdict into a rules fallback:
the URL, the API it speaks (``SENTINEL_ANALYZER_API``) with its model, key and output
bound, and the prompts its stream declared (:class:`~workers.analyzer.prompts.StreamPrompt`).
"""

from __future__ import annotations

from sentinel_platform.settings import Settings, SettingsError
from workers.analyzer.answers.replies import AnalyzerError
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.apis.context_window import ContextWindow
from workers.analyzer.apis.model_api import ModelApi
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.apis.sentinel_api import SentinelApi
from workers.analyzer.breaker import CircuitBreaker
from workers.analyzer.client import HttpAnalyzer
from workers.analyzer.limits.fleet_limits import FleetLimits, analyzer_key_id
from workers.analyzer.limits.token_budget import TokenBudget
from workers.analyzer.prompts import StreamPrompt, load_prompt


def model_api_from_settings(settings: Settings) -> ModelApi:
    """The API module ``SENTINEL_ANALYZER_API`` names, with its model, key and the
    model's context where ``SENTINEL_ANALYZER_CONTEXT_TOKENS`` gives it (the settings
    have already refused a model API without a model)."""
    model = settings.analyzer_model or ""
    try:
        key = settings.analyzer_key_value
    except ValueError as exc:  # the key file went away since the settings were read
        raise SettingsError(str(exc)) from None
    context = ContextWindow(settings.analyzer_context_tokens)
    if settings.analyzer_api_kind == "openai":
        return OpenAiApi(
            model,
            key,
            settings.analyzer_max_output_tokens,
            settings.analyzer_response_format,
            context=context,
        )
    if settings.analyzer_api_kind == "anthropic":
        return AnthropicApi(model, key, settings.analyzer_max_output_tokens, context=context)
    return SentinelApi()


def analyzer_from_settings(settings: Settings, *declared: StreamPrompt) -> HttpAnalyzer | None:
    """The configured analyzer, or None for rules only. A bad URL fails start-up.

    Its pool holds one connection per message the worker may have in hand at once:
    ``SENTINEL_WORKER_CONCURRENCY`` when pinned, ``SENTINEL_WORKER_CONCURRENCY_MAX`` for
    ``auto`` (both are ``settings.worker_concurrency``). Its breaker follows
    ``SENTINEL_ANALYZER_BREAKER_FAILURES`` / ``SENTINEL_ANALYZER_BREAKER_COOLDOWN_S``, a
    down analyzer ``SENTINEL_ANALYZER_WHEN_DOWN``, and its fleet limits
    ``SENTINEL_ANALYZER_ID``, ``SENTINEL_ANALYZER_RATE_LIMIT`` and its token budget
    ``SENTINEL_ANALYZER_TOKENS_PER_MINUTE`` / ``SENTINEL_ANALYZER_DAILY_TOKENS`` (shared
    once the worker calls :meth:`HttpAnalyzer.bind_redis`). ``declared`` are the prompts
    of the stream the worker serves, loaded now (a prompt file that cannot be read, or
    one that alone does not fit ``SENTINEL_ANALYZER_CONTEXT_TOKENS``, fails start-up);
    the ``sentinel`` API sends none. A key from ``SENTINEL_ANALYZER_API_KEY_FILE`` is
    re-read when the file changes (:class:`~workers.analyzer.keys.key_source.KeySource`)."""
    if settings.analyzer_url is None:
        return None
    url = settings.analyzer_url.get_secret_value()
    api = model_api_from_settings(settings)
    prompts = {} if api.kind == "sentinel" else {p.kind: load_prompt(p, settings) for p in declared}
    try:
        for kind, prompt in prompts.items():  # the prompt alone must fit a context set
            api.request(kind, {}, prompt)
    except AnalyzerError as exc:
        raise SettingsError(f"SENTINEL_ANALYZER_CONTEXT_TOKENS: {exc}") from None
    breaker = CircuitBreaker(
        settings.analyzer_breaker_failures, settings.analyzer_breaker_cooldown_s
    )
    key_id = analyzer_key_id(url, settings.analyzer_id)
    limits = FleetLimits(key_id, settings.analyzer_rate_limit, analyzer_url=url)
    budget = TokenBudget(
        key_id,
        settings.analyzer_tokens_per_minute,
        settings.analyzer_daily_tokens,
        max_output_tokens=getattr(api, "max_output_tokens", 0),
        first_call_s=settings.analyzer_call_timeout_s,
    )
    try:
        return HttpAnalyzer(
            url,
            settings.analyzer_call_timeout_s,
            max_connections=settings.worker_concurrency,
            breaker=breaker,
            when_down=settings.analyzer_when_down,
            limits=limits,
            api=api,
            prompts=prompts,
            budget=budget,
            key_file=None if api.kind == "sentinel" else settings.analyzer_api_key_file,
        )
    except ValueError as exc:
        raise SettingsError(f"SENTINEL_ANALYZER_URL: {exc}") from None
