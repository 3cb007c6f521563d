"""When the re-screen may call: never ahead of live traffic, never into a held analyzer.

The re-screen's consumer has no limit of its own: it takes what its worker's live
consumer leaves, read from that consumer as it runs (no Redis call). Its limit
(:class:`RescreenLimit`, the ``ConcurrencyLimit`` the consumer loop asks before each read,
recovery and call) is :func:`rescreen_room`: nothing while the live stream is backlogged
(its last read got all it asked for, so undelivered messages wait in the group) or
before its first read, nothing while the analyzer cannot be asked (its breaker open, the
fleet held: :func:`analyzer_ready`), and otherwise the live limit's free calls (the limit
less what the live consumer holds: in calls, waiting or parked). So the queue drains in
the live stream's idle moments, at most as fast as the live limit allows, and a live
message that arrives finds its call free as soon as a re-screen's ends. Nothing is
learnt from the re-screen's calls: the live limit learns from live calls alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sentinel_platform.streams.consumer.calling.concurrency_limit import LimitChange


class LiveSide(Protocol):
    """What the gate reads of the live consumer (``Consumer``)."""

    @property
    def caught_up(self) -> bool: ...

    def held(self) -> int: ...

    @property
    def calls(self) -> Any: ...


def rescreen_room(live_limit: int, live_held: int, caught_up: bool, analyzer_ready: bool) -> int:
    """Calls the re-screen may have in flight now: the live limit's free calls once the
    live consumer has caught up (no undelivered message after its last read) and the
    analyzer may be asked, else none."""
    if not caught_up or not analyzer_ready:
        return 0
    return max(0, live_limit - live_held)


def analyzer_ready(analyzer: object) -> bool:
    """Whether a call to ``analyzer`` may go now as far as this worker knows: its breaker
    does not refuse calls and the fleet holds none (a ``Retry-After``, an exhaustion).
    An analyzer without a breaker or fleet limits is always ready. A lane (a wrapper of
    analyzers, :mod:`workers.analyzer.lanes`) is ready when any analyzer that may decide
    through it (its ``deciders()``) is."""
    deciders = getattr(analyzer, "deciders", None)
    if callable(deciders):
        return any(analyzer_ready(inner) for inner in deciders())
    breaker = getattr(analyzer, "breaker", None)
    if breaker is not None and breaker.state_now() == "open":
        return False
    limits = getattr(analyzer, "limits", None)
    return limits is None or limits.held_for() <= 0


class RescreenLimit:
    """The re-screen consumer's limit: :func:`rescreen_room` of ``live`` (read from the
    re-screen's thread: plain numbers, a moment stale at most)."""

    def __init__(self, live: LiveSide, ready: Callable[[], bool]) -> None:
        self._live = live
        self._ready = ready

    @property
    def limit(self) -> int:
        live = self._live
        return rescreen_room(live.calls.limit.limit, live.held(), live.caught_up, self._ready())

    @property
    def steady_limit(self) -> int:
        return int(self._live.calls.limit.steady_limit)

    def on_sample(self, rtt_s: float, in_flight: int) -> None:
        """Nothing learnt: the live limit learns from live calls."""

    def on_drop(self, in_flight: int, rtt_s: float) -> None:
        """Nothing cut: the live limit is the live consumer's."""

    def on_hold(self) -> None:
        """Nothing held: the gate reads the analyzer's hold itself."""

    def change(self) -> LimitChange | None:
        return None
