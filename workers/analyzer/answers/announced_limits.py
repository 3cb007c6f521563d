"""The rate limits a model API announces on every answer, read into one small value.

Hosted APIs say, on each answer, how much of their budget is left and when it refills, so
a client can pace itself *before* a 429 instead of learning from refusals:

* OpenAI (and Azure, and servers copying it): ``x-ratelimit-{limit,remaining,reset}-
  {requests,tokens}``, the resets as Go durations (``1s``, ``6m0s``,
  ``23h47m36.648s``, ``20ms``);
* Anthropic: ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
  {limit,remaining,reset}``, the resets as RFC 3339 times (``2026-11-27T05:00:30Z``).

:func:`announced_limits` is pure (the headers and the clock in, an
:class:`AnnouncedLimits` out), so every dialect is a row of a table test; pacing from it is
the fleet limits' business. A header that is absent or not valid leaves its field None: a
half-announced budget is still worth the half, and a malformed one must never stop a call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

#: The budgets an API may announce, as their header names spell them.
KINDS = ("requests", "tokens", "input-tokens", "output-tokens")
#: Go's duration units in seconds (``time.ParseDuration``).
GO_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_COUNT = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Budget:
    """One announced budget: its size per window, what is left of it, and the seconds
    until it is whole again (each None when not announced, or not valid)."""

    limit: int | None = None
    remaining: int | None = None
    reset_s: float | None = None


@dataclass(frozen=True)
class AnnouncedLimits:
    """Every budget one answer announced; a budget not announced at all is None.
    ``input_tokens`` and ``output_tokens`` are Anthropic's separate token budgets."""

    requests: Budget | None = None
    tokens: Budget | None = None
    input_tokens: Budget | None = None
    output_tokens: Budget | None = None

    @property
    def any(self) -> bool:
        """Whether the answer announced anything at all."""
        return any((self.requests, self.tokens, self.input_tokens, self.output_tokens))


def announced_limits(headers: Mapping[str, str], now: datetime) -> AnnouncedLimits:
    """The budgets ``headers`` announce, in either dialect (OpenAI's wins for a budget
    both announce, which no real API does). ``now`` is an aware time, for Anthropic's
    reset times."""
    lower = {name.lower(): value for name, value in headers.items()}
    budgets: dict[str, Budget | None] = {}
    for kind in KINDS:
        openai = _openai_budget(lower, kind) if kind in ("requests", "tokens") else None
        budgets[kind.replace("-", "_")] = openai or _anthropic_budget(lower, kind, now)
    return AnnouncedLimits(**budgets)


def go_duration_s(text: str | None) -> float | None:
    """Seconds of a Go duration (``6m0s``, ``23h47m36.648s``, ``20ms``, ``0s``), None
    when ``text`` is not one (a sign is refused: a reset is never in the past)."""
    value = (text or "").strip()
    if not value:
        return None
    if value == "0":
        return 0.0
    total, at = 0.0, 0
    for part in _GO_PART.finditer(value):
        if part.start() != at:
            return None
        total += float(part[1]) * GO_UNITS[part[2]]
        at = part.end()
    return total if at == len(value) else None


def rfc3339_in_s(text: str | None, now: datetime) -> float | None:
    """Seconds from ``now`` to an RFC 3339 time (``2026-11-27T05:00:30Z``, with a
    fraction or an offset); 0 for a past one; None when ``text`` is not one."""
    value = (text or "").strip()
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - now).total_seconds())


def _count(text: str | None) -> int | None:
    value = (text or "").strip()
    return int(value) if _COUNT.fullmatch(value) else None


def _openai_budget(headers: Mapping[str, str], kind: str) -> Budget | None:
    names = [f"x-ratelimit-{field}-{kind}" for field in ("limit", "remaining", "reset")]
    if not any(name in headers for name in names):
        return None
    limit, remaining, reset = (headers.get(name) for name in names)
    return Budget(_count(limit), _count(remaining), go_duration_s(reset))


def _anthropic_budget(headers: Mapping[str, str], kind: str, now: datetime) -> Budget | None:
    names = [f"anthropic-ratelimit-{kind}-{field}" for field in ("limit", "remaining", "reset")]
    if not any(name in headers for name in names):
        return None
    limit, remaining, reset = (headers.get(name) for name in names)
    return Budget(_count(limit), _count(remaining), rfc3339_in_s(reset, now))
