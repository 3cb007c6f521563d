"""A worker's run of busy answers: the backoff where no wait was given, and its bound.

Two decisions follow from the busy answers a worker reads in a row, both kept here with an
injected clock and random source so each is table-tested:

* **The backoff** (:func:`backoff_s`). A busy answer that gives no wait (no header, 0, a
  date already past) is waited out as the ``openai`` and ``anthropic`` SDKs wait it out:
  0.5 s, doubled per consecutive busy answer, at most 8 s, less a random 0-25 %. The
  client sets it as the fleet's hold, so the whole fleet backs off, not only this worker.
  Busy answers of calls sent before the last one counted arrived are the same wave of
  refusals, not a new one: they do not double it again.
* **The bound** (:data:`BUSY_BOUND_S`). A service that has answered nothing but busy for
  longer than that is down (:class:`~workers.analyzer.answers.replies.AnalyzerDown`): the breaker
  counts it and ``SENTINEL_ANALYZER_WHEN_DOWN=rules`` gets each message a rules verdict
  within seconds, even where a proxy in front of a dead model answers only busy (Envoy's
  503 "no healthy upstream").

Which busy answers count towards the bound: those that give no wait and come from no rate
limiter (:class:`~workers.analyzer.answers.waits.BusyOrDead`: 408, 409, 503, 529, ``x-should-retry:
true``), the answers a dead upstream's proxy gives too. A 429, or any answer with an
explicit wait, neither counts nor ends the run: a rate limiter is a live component saying
"too fast", and a server that names its wait (a per-minute quota's 42 s, say) is telling
when it will serve, which may well be past the bound; calling that down would turn a rate
limit into rules verdicts, the very thing busy exists to prevent. Any other answer (a
success, a refusal, an outage, an exhaustion) ends the run.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable

from workers.analyzer.answers.replies import AnalyzerBusy, AnalyzerDown
from workers.analyzer.answers.waits import BusyOrDead

#: Nothing but busy answers (that count, see the module) for longer than this is down.
#: Long enough for five backoffs (so the sixth such answer decides), in which a full queue
#: of a self-hosted server (Ollama, vLLM) clears; short enough that, with
#: ``WHEN_DOWN=rules``, a dead model behind a proxy costs each message at most this plus
#: one capped backoff before its rules verdict.
BUSY_BOUND_S = 10.0
#: The SDKs' backoff: the first wait, its cap, and the jitter taken off (0 to 25 %).
BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 8.0
BACKOFF_JITTER = 0.25


def backoff_s(consecutive: int, rand: float) -> float:
    """The wait after the ``consecutive``-th busy answer in a row (1 for the first) that
    gave none: ``BACKOFF_START_S`` doubled each time, at most ``BACKOFF_CAP_S``, less
    ``BACKOFF_JITTER`` times ``rand`` (in [0, 1)) of it, as the SDKs compute theirs."""
    doublings = min(max(consecutive, 1) - 1, 64)
    return min(BACKOFF_START_S * 2.0**doublings, BACKOFF_CAP_S) * (1 - BACKOFF_JITTER * rand)


class BusySpell:
    """One worker's run of busy answers. Thread-safe: every thread of a worker reads its
    answers into the same run. :meth:`clock` is read when a call is sent; :meth:`busy`
    reads a busy answer of a call sent then; :meth:`ended` any other answer."""

    def __init__(
        self,
        bound_s: float = BUSY_BOUND_S,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if not bound_s > 0:
            raise ValueError(f"the busy bound must be positive, got {bound_s}")
        self.bound_s = bound_s
        self.clock = clock
        self._rand = rand
        self._lock = threading.Lock()
        self._streak = 0
        self._last_counted = -math.inf  # when the streak last grew
        self._since: float | None = None  # the first answer counting towards the bound

    def busy(self, answer: AnalyzerBusy, sent_at: float) -> AnalyzerBusy | AnalyzerDown:
        """What a busy ``answer`` to a call sent at ``sent_at`` (:meth:`clock`) comes to:
        :class:`AnalyzerDown` once the run's countable answers have lasted past the bound;
        else ``answer`` itself when it gave a wait, or the same busy with the backoff."""
        with self._lock:
            now = self.clock()
            if sent_at >= self._last_counted:  # not a late answer of the last wave
                self._streak += 1
                self._last_counted = now
            streak, counts = self._streak, isinstance(answer, BusyOrDead)
            if counts and self._since is None:
                self._since = now
            lasted = None if self._since is None or not counts else now - self._since
        if lasted is not None and lasted > self.bound_s:
            return AnalyzerDown(
                f"{answer.reason}; nothing but busy answers for {lasted:.1f}s "
                f"(more than {self.bound_s:g}s): taken as down"
            )
        if answer.retry_after_s is not None:
            return answer
        wait = backoff_s(streak, self._rand())
        return type(answer)(wait, f"{answer.reason}, no wait given: backing off {wait:.2f}s")

    def ended(self) -> None:
        """Any answer but busy (a success, a refusal, an outage, an exhaustion): the run
        is over, the backoff starts again from its first step."""
        with self._lock:
            self._streak, self._last_counted, self._since = 0, -math.inf, None

    @property
    def streak(self) -> int:
        """Busy answers in the run, late answers of one wave counted once."""
        with self._lock:
            return self._streak
