"""The analyzer a worker asks, lanes included, as the settings describe it.

The live analyzer (``SENTINEL_ANALYZER_*``,
:func:`~workers.analyzer.configured.analyzer_from_settings`) and, each when its URL is
set, the second analyzers of :mod:`sentinel_platform.settings.roles`:
``SENTINEL_ANALYZER_FALLBACK_*`` wraps the live one in a
:class:`~workers.analyzer.lanes.fallback.FallbackAnalyzer`. Each role's analyzer is
built exactly as the live one is, from its own settings, so it has its own breaker,
fleet hold, rate limit, token budget and key holds.
"""

from __future__ import annotations

from collections.abc import Callable

from sentinel_platform.settings import Settings, SettingsError, role_env_name, role_settings
from workers.analyzer.apis.model_api import Analyzer
from workers.analyzer.configured import analyzer_from_settings
from workers.analyzer.lanes.fallback import FallbackAnalyzer
from workers.analyzer.prompts import StreamPrompt


def lanes_from_settings(
    settings: Settings,
    *declared: StreamPrompt,
    falls_through: Callable[[BaseException], bool],
) -> Analyzer | None:
    """The live analyzer with its lanes, or None for rules only. ``falls_through`` says
    which failures of the live analyzer send a message to the fallback (the processors'
    reading of a failure, so the two never disagree). A fallback without a live analyzer
    fails start-up naming both settings."""
    primary = analyzer_from_settings(settings, *declared)
    second = role_settings(settings, "fallback")
    if second is None:
        return primary
    if primary is None:
        raise SettingsError(
            f"{role_env_name('fallback', 'analyzer_url')} needs SENTINEL_ANALYZER_URL: the "
            "fallback is asked when the live analyzer cannot be"
        )
    fallback = analyzer_from_settings(second, *declared)
    if fallback is None:  # its URL is set: never so
        return primary
    return FallbackAnalyzer(primary, fallback, falls_through)
