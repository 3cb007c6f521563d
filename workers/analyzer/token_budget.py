"""Tokens are the unit of a model API's limits: the fleet's token budget, in Redis.

Hosted model APIs limit tokens per minute, and count a request's ``max_tokens`` against
the budget before it runs. :class:`TokenBudget` keeps, for one analyzer and every worker
of its fleet, two weighted GCRA limiters (the theoretical arrival time of the next call,
kept as a key's expiry time in the server's clock, as the calls-per-second limiter does,
so no ``TIME``) and a daily counter, all touched by one script per call. Their keys share
one ``{id}`` hash tag, so the scripts run on a Redis Cluster.

* **Reserve** before a call: its prompt's estimated tokens plus its ``max_tokens``
  (:func:`reservation`), and one request. The call goes at the limiters' next free time
  and pushes it on by its weight; a time further than the wait bound is not reserved
  (:class:`~workers.analyzer.fleet_limits.FleetBusy`), a nearer one is waited for as a
  turn (``waited_for_turn``), which the worker's stop ends.
* **Settle** after the answer (:func:`settled`): the tokens the API really charged
  replace the estimate, the unused part is returned, and the daily counter grows by the
  tokens used.
* **Learn** from announced limits (``x-ratelimit-*``, ``anthropic-ratelimit-*``) with no
  setting: a budget's steady rate is its limit per minute, and when ``remaining`` runs
  low what is left is spread over the time to ``reset`` (:func:`paced_rate`). What one
  worker learns is shared through Redis, so the whole fleet paces from it.
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
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import redis

from sentinel_platform.streams.consumer.processor import waited_for_turn
from sentinel_platform.streams.operators.analyzer_holds import KEY_PREFIX
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.scripts import LuaScript
from workers.analyzer.announced_limits import AnnouncedLimits, Budget, announced_limits
from workers.analyzer.fleet_limits import RATE_WAIT_BOUND_S, FleetBusy
from workers.analyzer.replies import AnalyzerExhausted, Usage

log = logging.getLogger(__name__)

#: The window announced limits are per (OpenAI's and Anthropic's TPM and RPM).
WINDOW_S = 60.0
#: Below this share of its limit, an announced budget's remainder is spread to its reset.
LOW_FRACTION = 0.2
#: A reset this close is taken as this long (a remainder is never spread over nothing).
MIN_RESET_S = 0.05
#: What was learnt from announced limits outlives its last announcement this long.
LEARNED_TTL_MS = 300_000
#: How often a worker re-reads what the fleet has learnt.
LEARNED_REFRESH_S = 1.0
#: The daily counter outlives its day by a day (a late settle still finds it).
DAY_TTL_MS = 2 * 86_400_000
#: Characters per token when estimating a prompt before it is sent (OpenAI's rule of
#: thumb; the settle corrects it from ``usage``).
CHARS_PER_TOKEN = 4

#: KEYS[1] tokens' TAT, KEYS[2] requests' TAT (expiry = TAT, value = the sub-ms rest in
#: us), KEYS[3] today's tokens used. ARGV: us per token (0: no limit), tokens, us per
#: request (0: no limit), longest wait (us), daily budget (0: none). Returns
#: {1, wait us} reserved, {0, wait us} too far, {-1, used} the daily budget is spent.
RESERVE_SCRIPT = LuaScript(
    "analyzer_tokens_reserve",
    """
local daily = tonumber(ARGV[5])
if daily > 0 then
  local used = tonumber(redis.call('GET', KEYS[3])) or 0
  if used >= daily then return {-1, used} end
end
local function ahead(key)
  local left = redis.call('PTTL', key)
  if left < 0 then return 0 end
  return left * 1000 + (tonumber(redis.call('GET', key)) or 0)
end
local function push(key, at)
  local ms = math.floor(at / 1000)
  if ms < 1 then redis.call('DEL', key) return end
  redis.call('SET', key, tostring(at - ms * 1000), 'PX', ms)
end
local per_token, per_request = tonumber(ARGV[1]), tonumber(ARGV[3])
local t, r = 0, 0
if per_token > 0 then t = ahead(KEYS[1]) end
if per_request > 0 then r = ahead(KEYS[2]) end
local wait = math.max(t, r)
if wait > tonumber(ARGV[4]) then return {0, math.floor(wait)} end
if per_token > 0 then push(KEYS[1], wait + tonumber(ARGV[2]) * per_token) end
if per_request > 0 then push(KEYS[2], wait + per_request) end
return {1, math.floor(wait)}
""",
)

#: KEYS[1] tokens' TAT, KEYS[2] today's tokens used. ARGV: us per token (0: no limit),
#: tokens returned (negative: charged on top), tokens used today. Returns today's total.
SETTLE_SCRIPT = LuaScript(
    "analyzer_tokens_settle",
    """
local per = tonumber(ARGV[1])
local back = tonumber(ARGV[2]) * per
if per > 0 and back ~= 0 then
  local left = redis.call('PTTL', KEYS[1])
  local at = -back
  if left >= 0 then at = left * 1000 + (tonumber(redis.call('GET', KEYS[1])) or 0) - back end
  local ms = math.floor(at / 1000)
  if ms < 1 then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], tostring(at - ms * 1000), 'PX', ms)
  end
end
local used = tonumber(ARGV[3])
if used > 0 then
  local total = redis.call('INCRBY', KEYS[2], used)
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return total
end
return tonumber(redis.call('GET', KEYS[2])) or 0
""",
)


@dataclass(frozen=True)
class Pace:
    """The rates (per second) the fleet keeps to, None where nothing limits; ``pause_s``
    a wait before any call (an announced budget with nothing left until its reset)."""

    tokens_per_s: float | None = None
    requests_per_s: float | None = None
    pause_s: float = 0.0


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


def paced_rate(budget: Budget | None, window_s: float = WINDOW_S) -> tuple[float | None, float]:
    """The steady rate (units a second) of an announced budget, and a pause: its limit
    per window; when ``remaining`` is below ``LOW_FRACTION`` of the limit, what remains
    spread over the time to ``reset`` (slower, never faster); nothing remaining, a pause
    until the reset. (None, 0) when the budget announces no limit."""
    if budget is None or not budget.limit:
        return None, 0.0
    steady = budget.limit / window_s
    if budget.remaining is None or budget.reset_s is None:
        return steady, 0.0
    if budget.remaining >= LOW_FRACTION * budget.limit:
        return steady, 0.0
    if budget.remaining <= 0:
        return steady, budget.reset_s
    return min(steady, budget.remaining / max(budget.reset_s, MIN_RESET_S)), 0.0


def pace_of(announced: AnnouncedLimits) -> Pace:
    """The fleet's pace from one answer's announced limits (Anthropic's input-token budget
    stands for tokens where it announces no combined one)."""
    tokens, token_pause = paced_rate(announced.tokens or announced.input_tokens)
    requests, request_pause = paced_rate(announced.requests)
    return Pace(tokens, requests, max(token_pause, request_pause))


def tightest(*rates: float | None) -> float | None:
    """The lowest of the rates that are set (None: none is)."""
    known = [rate for rate in rates if rate is not None and rate > 0]
    return min(known) if known else None


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
    learnt on top (:meth:`learn`), the tighter one winning. Thread-safe."""

    def __init__(
        self,
        analyzer_id: str,
        tokens_per_minute: int | None = None,
        daily_tokens: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.analyzer_id = analyzer_id
        self.tokens_per_minute = tokens_per_minute
        self.daily_tokens = daily_tokens
        self._keys = [budget_key(analyzer_id, n) for n in ("tokens", "requests", "learned")]
        self._client: RedisClient | None = None
        self._clock = clock
        self._lock = threading.Lock()
        self._learned = Pace()
        self._next_read = 0.0
        self._closed = threading.Event()
        self._stop = self._closed

    def bind(self, client: RedisClient) -> None:
        """Share the budget through ``client`` from now on (once, at start-up)."""
        self._client = client

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
        per_token = _per_unit(tightest(pace.tokens_per_s, self._configured_rate()))
        per_request = _per_unit(pace.requests_per_s)
        if self._client is None or (not per_token and not per_request and not self.daily_tokens):
            return
        bound_us = max(RATE_WAIT_BOUND_S, 1.5 * per_request / 1e6) * 1e6
        args = [f"{per_token:.3f}", tokens, f"{per_request:.3f}", f"{bound_us:.0f}"]
        try:
            code, value = RESERVE_SCRIPT.run(
                self._client, self._day_keys(), [*args, self.daily_tokens or 0]
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
        if wait > 0:
            waited_for_turn(wait)
            if self._stop.wait(wait):
                raise FleetBusy(None, f"analyzer {self.analyzer_id}: stopping before a call")

    def settle(self, api_kind: str, reserved: int, max_tokens: int, usage: Usage | None) -> None:
        """Return what the call did not use (:func:`settled`) and count its tokens today."""
        if self._client is None or usage is None:
            return
        back = settled(api_kind, reserved, max_tokens, usage)
        per_token = _per_unit(tightest(self._pace().tokens_per_s, self._configured_rate()))
        used = usage.input_tokens + usage.output_tokens
        keys = [self._keys[0], self._day_keys()[2]]
        try:
            SETTLE_SCRIPT.run(self._client, keys, [f"{per_token:.3f}", back, used, DAY_TTL_MS])
        except redis.RedisError as exc:
            log.warning("analyzer_token_settle_failed", extra={"error": type(exc).__name__})

    def learn(self, headers: Mapping[str, str]) -> float:
        """Pace the fleet from an answer's announced limits; returns a pause (seconds the
        fleet should not call: the budget is spent until its reset), 0 for none."""
        announced = announced_limits(headers, datetime.now(timezone.utc))
        if not announced.any:
            return 0.0
        pace = pace_of(announced)
        with self._lock:
            changed, self._learned = pace != self._learned, pace
            self._next_read = self._clock() + LEARNED_REFRESH_S
        if self._client is not None and changed:  # one write per change, not per call
            try:
                pipe = self._client.pipeline(transaction=False)
                pipe.hset(self._keys[2], "tokens_per_s", pace.tokens_per_s or 0)
                pipe.hset(self._keys[2], "requests_per_s", pace.requests_per_s or 0)
                pipe.pexpire(self._keys[2], LEARNED_TTL_MS)
                pipe.execute()
            except redis.RedisError as exc:
                log.warning("analyzer_pace_not_shared", extra={"error": type(exc).__name__})
        return pace.pause_s

    def _pace(self) -> Pace:
        """What the fleet learnt, re-read from Redis at most every ``LEARNED_REFRESH_S``."""
        with self._lock:
            if self._client is None or self._clock() < self._next_read:
                return self._learned
            self._next_read = self._clock() + LEARNED_REFRESH_S
        try:
            tokens, requests = self._client.hmget(self._keys[2], ["tokens_per_s", "requests_per_s"])
        except redis.RedisError:
            return self._learned
        pace = Pace(_rate(tokens), _rate(requests))
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
