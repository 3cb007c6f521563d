"""The analyzer a worker asks, lanes included, as the settings describe it.

The live analyzer (``SENTINEL_ANALYZER_*``,
:func:`~workers.analyzer.configured.analyzer_from_settings`) and, each when its URL is
set, the second analyzers of :mod:`sentinel_platform.settings.roles`:
``SENTINEL_ANALYZER_FALLBACK_*`` wraps the live one in a
:class:`~workers.analyzer.lanes.fallback.FallbackAnalyzer`, and
``SENTINEL_ANALYZER_SHADOW_*`` (with ``SENTINEL_ANALYZER_SHADOW_FRACTION`` above 0) wraps
that in a :class:`~workers.analyzer.lanes.shadow.ShadowAnalyzer`. Each role's analyzer is
built exactly as the live one is, from its own settings, so it has its own breaker,
fleet hold, rate limit, token budget and key holds.
"""

from __future__ import annotations

from collections.abc import Callable

from sentinel_platform.settings import (
    Role,
    Settings,
    SettingsError,
    role_env_name,
    role_settings,
)
from workers.analyzer.apis.model_api import Analyzer
from workers.analyzer.configured import analyzer_from_settings
from workers.analyzer.lanes.fallback import FallbackAnalyzer
from workers.analyzer.lanes.shadow import ShadowAnalyzer
from workers.analyzer.prompts import StreamPrompt


def lanes_from_settings(
    settings: Settings,
    *declared: StreamPrompt,
    falls_through: Callable[[BaseException], bool],
) -> Analyzer | None:
    """The live analyzer with its lanes, or None for rules only. ``falls_through`` says
    which failures of the live analyzer send a message to the fallback (the processors'
    reading of a failure, so the two never disagree). A lane without a live analyzer
    fails start-up naming both settings."""
    live = with_fallback(settings, declared, falls_through)
    trial = role_settings(settings, "shadow")
    if trial is None or settings.analyzer_shadow_fraction <= 0:
        return live
    live = needs_live(live, "shadow")
    shadow = analyzer_from_settings(trial, *declared)
    if shadow is None:  # its URL is set: never so
        return live
    fraction, deadline_s = settings.analyzer_shadow_fraction, trial.analyzer_call_timeout_s
    # As many calls at once as the live path may make: the pinned number, or auto's
    # ceiling (the shadow's connection pool is sized alike).
    threads = settings.worker_concurrency
    return ShadowAnalyzer(live, shadow, fraction, deadline_s, threads=threads)


def with_fallback(
    settings: Settings,
    declared: tuple[StreamPrompt, ...],
    falls_through: Callable[[BaseException], bool],
) -> Analyzer | None:
    """The live analyzer, behind it the fallback's when ``SENTINEL_ANALYZER_FALLBACK_URL``
    is set."""
    live = analyzer_from_settings(settings, *declared)
    second = role_settings(settings, "fallback")
    if second is None:
        return live
    primary = needs_live(live, "fallback")
    fallback = analyzer_from_settings(second, *declared)
    if fallback is None:  # its URL is set: never so
        return primary
    return FallbackAnalyzer(primary, fallback, falls_through)


def needs_live(live: Analyzer | None, role: Role) -> Analyzer:
    """``live``, or :class:`SettingsError`: a lane is beside a live analyzer."""
    if live is None:
        raise SettingsError(
            f"{role_env_name(role, 'analyzer_url')} needs SENTINEL_ANALYZER_URL: the {role} "
            "is a second model beside the live analyzer"
        )
    return live
