"""Tokens are the unit of a model API's limits: the fleet's token budget, in Redis.

Hosted model APIs limit tokens per minute, and count a request's ``max_tokens`` against
the budget before it runs. :class:`TokenBudget` keeps, for one analyzer and every worker
of its fleet, weighted GCRA limiters (the configured tokens, and each announced budget:
the theoretical arrival time of the next call, kept as a key's expiry time in the
server's clock, as the calls-per-second limiter does, so no ``TIME``) and a daily
counter, all touched by one script per call. Their keys share
one ``{id}`` hash tag, so the scripts run on a Redis Cluster.

* **Reserve** before a call: its prompt's estimated tokens plus its ``max_tokens``
  (:func:`reservation`), and one request. The call goes at the limiters' next free time
  and pushes it on by its weight; a time further than the wait bound is not reserved
  (:class:`~workers.analyzer.limits.fleet_limits.FleetBusy`), a nearer one is waited for as a
  turn (``waited_for_turn``), which the worker's stop ends.
* **Settle** after the answer (:func:`settled`): the tokens the API really charged
  replace the estimate in the configured limiter, the unused part is returned, and the
  daily counter grows by the tokens used (an announced budget is set by the answer's own
  announcement instead).
* **Learn** from announced limits (``x-ratelimit-*``, ``anthropic-ratelimit-*``) with no
  setting: each announced budget is a token bucket refilling at its limit per minute
  (:mod:`workers.analyzer.limits.announced_bucket`), its own GCRA with a burst tolerance of one
  window beside the configured one, and every answer's announcement *sets* its shared
  state (:data:`~workers.analyzer.limits.announced_bucket.CORRECT_SCRIPT`). What one worker
  learns is shared through Redis, so the whole fleet paces from it; a wait longer than
  the on-thread bound is returned as a pause, which the client makes a fleet hold.
  While the fleet knows nothing yet, one call at a time goes
  (:class:`~workers.analyzer.limits.first_call.FirstCallGate`, with ``first_call_s``).
* **The daily budget** (``SENTINEL_ANALYZER_DAILY_TOKENS``) spent makes the analyzer
  *exhausted* until midnight UTC (:func:`seconds_to_midnight`), or until released.

A Redis error fails closed (``FleetBusy``): a limit that cannot be checked must not be
exceeded. Without a Redis client, or with nothing to limit, every call goes at once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone

import redis

from sentinel_platform.streams.consumer.processor import waited_for_turn
from sentinel_platform.streams.operators.analyzer_holds import KEY_PREFIX
from sentinel_platform.streams.plumbing.connection import RedisClient
from workers.analyzer.answers.announced_limits import AnnouncedLimits, announced_limits
from workers.analyzer.answers.replies import AnalyzerExhausted, Usage
from workers.analyzer.limits.announced_bucket import (
    CORRECT_SCRIPT,
    PACED,
    WINDOW_S,
    Pace,
    Weights,
    corrections,
    pace_of,
)
from workers.analyzer.limits.first_call import FirstCallGate
from workers.analyzer.limits.fleet_limits import RATE_WAIT_BOUND_S, FleetBusy
from workers.analyzer.limits.token_scripts import RESERVE_SCRIPT, SETTLE_SCRIPT

log = logging.getLogger(__name__)

#: What was learnt from announced limits outlives its last announcement this long.
LEARNED_TTL_MS = 300_000
#: How often a worker re-reads what the fleet has learnt.
LEARNED_REFRESH_S = 1.0
#: ... and how often while it has learnt nothing: the fleet's first answers reach every
#: worker within this long, so few calls go out unpaced against a budget already spent.
UNLEARNED_REFRESH_S = 0.1
#: The daily counter outlives its day by a day (a late settle still finds it).
DAY_TTL_MS = 2 * 86_400_000
#: Characters per token when estimating a prompt before it is sent (OpenAI's rule of
#: thumb; the settle corrects it from ``usage``).
CHARS_PER_TOKEN = 4


def reservation(body_chars: int, max_tokens: int) -> int:
    """Tokens a call reserves before it is sent: its prompt's estimate (characters over
    ``CHARS_PER_TOKEN``, rounded up) plus its ``max_tokens``, which the APIs count
    against the budget before the call runs."""
    return math.ceil(body_chars / CHARS_PER_TOKEN) + max(0, max_tokens)


def settled(api_kind: str, reserved: int, max_tokens: int, usage: Usage | None) -> int:
    """Tokens to return to the budget (negative: to charge on top) once ``usage`` is
    known. OpenAI keeps charging ``max_tokens`` for the output (its limit counts it at
    admission), so only the prompt's estimate is corrected; the others charge what was
    used. No usage: the reservation stands (what was charged is unknown)."""
    if usage is None:
        return 0
    output = max(0, max_tokens) if api_kind == "openai" else usage.output_tokens
    return reserved - (usage.input_tokens + output)


def seconds_to_midnight(now: datetime) -> float:
    """Seconds from ``now`` (aware) to the next midnight UTC, when a daily budget renews."""
    utc = now.astimezone(timezone.utc)
    midnight = (utc + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return (midnight - utc).total_seconds()


def budget_key(analyzer_id: str, name: str) -> str:
    """A key of the token budget: every one of an analyzer shares the ``{id}`` hash tag."""
    return f"{KEY_PREFIX}{{{analyzer_id}}}:{name}"


class TokenBudget:
    """The token budget of one analyzer, for all the threads of one worker.

    ``tokens_per_minute`` (``SENTINEL_ANALYZER_TOKENS_PER_MINUTE``) and ``daily_tokens``
    (``SENTINEL_ANALYZER_DAILY_TOKENS``) are the configured limits; announced limits are
    learnt on top (:meth:`learn`), each a limiter of its own, and a call waits for the
    latest of them. ``max_output_tokens`` (each call's ``max_tokens``) splits a
    reservation into input and output, for budgets announced apart. Thread-safe."""

    def __init__(
        self,
        analyzer_id: str,
        tokens_per_minute: int | None = None,
        daily_tokens: int | None = None,
        *,
        max_output_tokens: int = 0,
        first_call_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.analyzer_id = analyzer_id
        self.tokens_per_minute = tokens_per_minute
        self.daily_tokens = daily_tokens
        self.max_output_tokens = max_output_tokens
        self._keys = [budget_key(analyzer_id, n) for n in ("tokens", "requests", "learned")]
        #: each paced budget's TAT key, and the hash counting the units reserved of each
        self._paced_keys = {kind: budget_key(analyzer_id, f"announced:{kind}") for kind in PACED}
        self._paced_keys["requests"] = self._keys[1]
        self._reserved_key = budget_key(analyzer_id, "reserved")
        self._client: RedisClient | None = None
        self._clock = clock
        self._lock = threading.Lock()
        self._learned = Pace()
        self._next_read = 0.0
        self._closed = threading.Event()
        self._stop = self._closed
        #: this thread's last reservation (its counters' marks, its weights), for the
        #: announcement its answer brings (:meth:`learn`, on the same thread)
        self._last = threading.local()
        #: one call at a time while nothing is known (``first_call_s``: its longest hold)
        keys = [self._keys[2], *(budget_key(analyzer_id, n) for n in ("silent", "gate"))]
        self.first_call = FirstCallGate(keys, first_call_s or 1.0, LEARNED_TTL_MS, clock=clock)
        self._gated = first_call_s is not None

    def bind(self, client: RedisClient) -> None:
        """Share the budget through ``client`` from now on (once, at start-up)."""
        self._client = client
        if self._gated:
            self.first_call.bind(client)

    def bind_stop(self, stop: threading.Event) -> None:
        """The worker's stop: it ends a wait for a turn, and the call is not made."""
        self._stop = stop

    def close(self) -> None:
        """Wake a wait for a turn when no worker's stop is bound (it ends its own)."""
        self._closed.set()

    def reserve(self, tokens: int) -> None:
        """Reserve ``tokens`` and one request, and wait for the turn; :class:`FleetBusy`
        when the turn is further than the wait bound, the wait is stopped or Redis cannot
        be asked; :class:`AnalyzerExhausted` when the daily budget is spent."""
        pace = self._pace()
        if pace == Pace() and self.first_call.admit():  # the fleet knows: read what
            pace = self._pace(fresh=True)
        per_token = _per_unit(self._configured_rate())
        per_request = _per_unit(pace.requests)
        weights = Weights.of_call(tokens, self.max_output_tokens)
        announced = [(f"{_per_unit(pace.rate(kind)):.3f}", weights.of(kind)) for kind in PACED[1:]]
        self._last.reserved = ({}, weights)  # nothing reserved yet: the call's weights
        if self._client is None or (
            not per_token and not any(pace.rate(k) for k in PACED) and not self.daily_tokens
        ):
            return
        bound_us = max(RATE_WAIT_BOUND_S, 1.5 * per_request / 1e6) * 1e6
        args = [f"{per_token:.3f}", tokens, f"{per_request:.3f}", f"{bound_us:.0f}"]
        keys = [*self._day_keys(), *(self._paced_keys[k] for k in PACED[1:]), self._reserved_key]
        paced = [f"{WINDOW_S * 1e6:.0f}", *(v for pair in announced for v in pair)]
        try:
            code, value, *marks = RESERVE_SCRIPT.run(
                self._client, keys, [*args, self.daily_tokens or 0, *paced, LEARNED_TTL_MS]
            )
        except redis.RedisError as exc:
            log.warning("analyzer_token_budget_unknown", extra={"error": type(exc).__name__})
            raise FleetBusy(
                None, f"analyzer {self.analyzer_id}: token budget unreachable"
            ) from None
        if int(code) < 0:
            left = seconds_to_midnight(datetime.now(timezone.utc))
            raise AnalyzerExhausted(
                f"daily token budget spent ({int(value)} of SENTINEL_ANALYZER_DAILY_TOKENS="
                f"{self.daily_tokens})",
                left,
                "daily_tokens",
            )
        wait = int(value) / 1e6
        if not int(code):
            raise FleetBusy(wait, f"analyzer {self.analyzer_id}: token budget, turn in {wait:.2f}s")
        self._last.reserved = (dict(zip(PACED, map(int, marks), strict=True)), weights)
        if wait > 0:
            waited_for_turn(wait)
            if self._stop.wait(wait):
                raise FleetBusy(None, f"analyzer {self.analyzer_id}: stopping before a call")

    def settle(self, api_kind: str, reserved: int, max_tokens: int, usage: Usage | None) -> None:
        """Return what the call did not use (:func:`settled`) and count its tokens today.
        Only the configured budget is settled: an announced one is set by the answer's
        own announcement, which already counts what the call was charged."""
        if self._client is None or usage is None:
            return
        back = settled(api_kind, reserved, max_tokens, usage)
        per_token = _per_unit(self._configured_rate())
        used = usage.input_tokens + usage.output_tokens
        keys = [self._keys[0], self._day_keys()[2]]
        try:
            SETTLE_SCRIPT.run(self._client, keys, [f"{per_token:.3f}", back, used, DAY_TTL_MS])
        except redis.RedisError as exc:
            log.warning("analyzer_token_settle_failed", extra={"error": type(exc).__name__})

    def learn(self, headers: Mapping[str, str]) -> float:
        """Pace the fleet from an answer's announced limits, on the thread that made the
        call: set each paced budget's state from what it says is left (plus what the fleet
        reserved after this call), then share their rates. Returns a pause: how long a
        call like this one now waits, when that is longer than the on-thread bound (the
        fleet should be held meanwhile), else 0."""
        reserved: tuple[dict[str, int], Weights] | None = getattr(self._last, "reserved", None)
        self._last.reserved = None
        announced = announced_limits(headers, datetime.now(timezone.utc))
        if not announced.any:
            self.first_call.answered(announced=False)
            return 0.0
        pace = pace_of(announced)
        # The state corrected before the rates are known: no call paces from rates alone.
        pause = 0.0 if self._client is None else self._correct(announced, reserved)
        with self._lock:
            changed, self._learned = pace != self._learned, pace
            self._next_read = self._clock() + LEARNED_REFRESH_S
        if changed and self._client is not None:  # one write per change, not per call
            self._share(pace)
        self.first_call.answered(announced=True)  # last: the gate's waiters see it all
        return pause

    def _correct(
        self, announced: AnnouncedLimits, reserved: tuple[dict[str, int], Weights] | None
    ) -> float:
        """Set each paced budget's shared state from ``announced`` (:meth:`learn`)."""
        assert self._client is not None
        marks, weights = reserved or ({}, Weights(0, 0, 0, 0))
        due = corrections(announced, weights)
        if not due:
            return 0.0
        args: list[object] = [f"{(WINDOW_S + RATE_WAIT_BOUND_S) * 1e6:.0f}"]
        for c in due:
            args += [c.kind, marks.get(c.kind, -1), f"{c.per_unit_us:.3f}", f"{c.debt_us:.0f}"]
        keys = [*(self._paced_keys[c.kind] for c in due), self._reserved_key]
        try:
            aheads = CORRECT_SCRIPT.run(self._client, keys, args)
        except redis.RedisError as exc:
            log.warning("analyzer_pace_not_corrected", extra={"error": type(exc).__name__})
            return 0.0
        pause = max(c.turn_s(int(ahead) / 1e6) for c, ahead in zip(due, aheads, strict=True))
        return pause if pause > RATE_WAIT_BOUND_S else 0.0

    def _share(self, pace: Pace) -> None:
        """Write the learnt rates for the fleet (each worker re-reads them, :meth:`_pace`)."""
        assert self._client is not None
        try:
            pipe = self._client.pipeline(transaction=False)
            for kind in PACED:
                pipe.hset(self._keys[2], kind, pace.rate(kind) or 0)
            pipe.pexpire(self._keys[2], LEARNED_TTL_MS)
            pipe.execute()
        except redis.RedisError as exc:
            log.warning("analyzer_pace_not_shared", extra={"error": type(exc).__name__})

    def _pace(self, fresh: bool = False) -> Pace:
        """What the fleet learnt, re-read from Redis at most every ``LEARNED_REFRESH_S``
        (``UNLEARNED_REFRESH_S`` while nothing is known), or now when ``fresh``."""
        with self._lock:
            if self._client is None or (not fresh and self._clock() < self._next_read):
                return self._learned
            known = self._learned != Pace()
            self._next_read = self._clock() + (LEARNED_REFRESH_S if known else UNLEARNED_REFRESH_S)
        try:
            rates = self._client.hmget(self._keys[2], list(PACED))
        except redis.RedisError:
            return self._learned
        pace = Pace(*(_rate(rate) for rate in rates))
        with self._lock:
            self._learned = pace
        return pace

    def _configured_rate(self) -> float | None:
        return None if self.tokens_per_minute is None else self.tokens_per_minute / WINDOW_S

    def _day_keys(self) -> list[str]:
        day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        return [*self._keys[:2], budget_key(self.analyzer_id, f"day:{day}")]


def _per_unit(rate: float | None) -> float:
    """Microseconds per unit at ``rate`` a second (0: no limit)."""
    return 0.0 if rate is None else 1e6 / rate


def _rate(value: object) -> float | None:
    try:
        rate = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return rate if rate > 0 else None
