"""An announced budget read as what it is: a token bucket refilling at its limit per window.

OpenAI's ``x-ratelimit-reset-*`` and Anthropic's ``anthropic-ratelimit-*-reset`` say when
a budget is *whole again*, and both buckets refill continuously at the limit per minute:
an answer announcing little ``remaining`` means a short wait for the next call, not what
is left spread over the time to the reset. In the terms of the fleet's GCRA (the
theoretical arrival time, TAT, of :class:`~workers.analyzer.limits.token_budget.TokenBudget`,
with a burst tolerance of one window):

* the steady pace of a budget is its limit per window (:func:`rate_of`);
* after an announcement the fleet's shared state is ``limit - remaining`` units ahead,
  ``TAT = now + (limit - remaining) / rate`` (:func:`debt_s`), never more than one window,
  and set by the announcement, so a fuller budget shortens a wait as surely as an emptier
  one lengthens it;
* a call needing ``n`` units waits ``max(0, (n - remaining) / rate)``, never past the
  announced reset (:func:`wait_s`, :func:`turn_in`).

Which budgets pace the fleet (:func:`paced_budgets`): requests, and OpenAI's combined
tokens; where Anthropic announces its input and output token budgets those are paced
instead of its ``tokens`` budget, which its documentation defines as the most restrictive
of them (a call's input and output weigh differently on each). All pure: the decisions
are table-tested, the script that applies a correction in Redis is :data:`CORRECT_SCRIPT`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sentinel_platform.streams.plumbing.scripts import LuaScript
from workers.analyzer.answers.announced_limits import AnnouncedLimits, Budget

#: The window announced limits are per (OpenAI's and Anthropic's RPM and TPM).
WINDOW_S = 60.0
#: The paced budgets, in the order the reserve script returns their marks.
PACED = ("requests", "tokens", "input_tokens", "output_tokens")

#: KEYS[1..n] the TATs of the corrected budgets (expiry = TAT, value = sub-ms rest in us),
#: KEYS[n+1] the hash counting every unit reserved of each budget. ARGV[1] the furthest
#: a TAT may be (us: one window, plus the turns reserved calls may still be waiting
#: for); then for each budget: its counter's field, the mark of the announcing call's
#: reservation (-1: none), us per unit, the announced debt (us). The TAT is set to the
#: debt plus the units reserved since the announcing call (the server had not seen
#: them); for a call that reserved nothing (sent before anything was learnt) what was
#: reserved since is unknown, so its announcement only ever lengthens the state.
#: Returns each budget's new TAT, us from now.
CORRECT_SCRIPT = LuaScript(
    "analyzer_tokens_correct",
    """
local furthest = tonumber(ARGV[1])
local counter = KEYS[#KEYS]
local out = {}
for i = 1, #KEYS - 1 do
  local b = 2 + (i - 1) * 4
  local since, mark = 0, tonumber(ARGV[b + 1])
  if mark >= 0 then
    since = math.max(0, (tonumber(redis.call('HGET', counter, ARGV[b])) or 0) - mark)
  end
  local at = math.min(tonumber(ARGV[b + 3]) + since * tonumber(ARGV[b + 2]), furthest)
  if mark < 0 then
    local left = redis.call('PTTL', KEYS[i])
    if left >= 0 then
      at = math.max(at, left * 1000 + (tonumber(redis.call('GET', KEYS[i])) or 0))
    end
  end
  local ms = math.floor(at / 1000)
  if ms < 1 then
    redis.call('DEL', KEYS[i])
  else
    redis.call('SET', KEYS[i], tostring(at - ms * 1000), 'PX', ms)
  end
  out[i] = math.floor(at)
end
return out
""",
)


@dataclass(frozen=True)
class Weights:
    """The units one call takes of each paced budget: one request; its reservation of
    combined tokens (prompt estimate plus ``max_tokens``, which OpenAI charges at
    admission); its prompt's estimate of input tokens; its ``max_tokens`` of output
    tokens (Anthropic estimates the output from ``max_tokens`` at admission)."""

    tokens: int
    input_tokens: int
    output_tokens: int
    requests: int = 1

    @classmethod
    def of_call(cls, reserved: int, max_output_tokens: int) -> Weights:
        """A call reserving ``reserved`` tokens of which ``max_output_tokens`` are output."""
        output = max(0, min(max_output_tokens, reserved))
        return cls(reserved, reserved - output, output)

    def of(self, kind: str) -> int:
        return int(getattr(self, kind))


@dataclass(frozen=True)
class Pace:
    """The steady rates (units a second) of the announced budgets the fleet paces, by
    kind (:data:`PACED`); None where none is announced."""

    requests: float | None = None
    tokens: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None

    def rate(self, kind: str) -> float | None:
        rate: float | None = getattr(self, kind)
        return rate


@dataclass(frozen=True)
class Correction:
    """What one announcement sets one paced budget's shared state to: its ``debt_us``
    ahead of now, at ``per_unit_us`` a unit; ``cost_s`` the announcing call's weight."""

    kind: str
    per_unit_us: float
    debt_us: float
    cost_s: float

    def turn_s(self, ahead_s: float) -> float:
        """The wait of a call like the announcing one once the state is ``ahead_s``."""
        return turn_in(ahead_s, self.cost_s)


def pace_of(announced: AnnouncedLimits) -> Pace:
    """The steady rates of one answer's paced budgets (:func:`paced_budgets`)."""
    budgets = paced_budgets(announced)
    return Pace(**{kind: rate_of(budgets.get(kind)) for kind in PACED})


def corrections(announced: AnnouncedLimits, weights: Weights) -> list[Correction]:
    """The paced budgets one answer's announcement sets (those announcing what is left),
    for a call of ``weights``."""
    found = []
    for kind, budget in paced_budgets(announced).items():
        rate, need = rate_of(budget), weights.of(kind)
        debt = debt_s(budget, need)
        if rate is not None and debt is not None:
            found.append(Correction(kind, 1e6 / rate, debt * 1e6, need / rate))
    return found


def paced_budgets(announced: AnnouncedLimits) -> dict[str, Budget]:
    """The announced budgets the fleet paces, by kind (:data:`PACED`), each with a limit:
    requests; input and output tokens where announced; else the combined tokens."""
    found: dict[str, Budget | None] = {"requests": announced.requests}
    if announced.input_tokens or announced.output_tokens:
        found["input_tokens"] = announced.input_tokens
        found["output_tokens"] = announced.output_tokens
    else:
        found["tokens"] = announced.tokens
    return {kind: b for kind, b in found.items() if b is not None and b.limit}


def rate_of(budget: Budget | None, window_s: float = WINDOW_S) -> float | None:
    """A budget's steady pace, units a second: its limit per window (None: no limit)."""
    if budget is None or not budget.limit:
        return None
    return budget.limit / window_s


def debt_s(budget: Budget, need: int, window_s: float = WINDOW_S) -> float | None:
    """How far ahead of now the fleet's shared state is after ``budget`` was announced:
    ``(limit - remaining) / rate``, at most one window, and no further than lets a call
    of ``need`` units go by the announced reset. None when the limit or what remains is
    not announced (nothing to correct)."""
    rate = rate_of(budget, window_s)
    if rate is None or budget.remaining is None:
        return None
    ahead = max(0, budget.limit - budget.remaining) / rate  # type: ignore[operator]
    if budget.reset_s is not None:
        ahead = min(ahead, budget.reset_s + window_s - min(need / rate, window_s))
    return min(max(0.0, ahead), window_s)


def turn_in(ahead_s: float, cost_s: float, window_s: float = WINDOW_S) -> float:
    """Seconds a call costing ``cost_s`` of a budget's time waits when the shared state
    is ``ahead_s`` ahead: the bucket holds ``window - ahead`` seconds' worth."""
    return max(0.0, min(ahead_s, window_s) + min(cost_s, window_s) - window_s)


def wait_s(budget: Budget, need: int, window_s: float = WINDOW_S) -> float:
    """The wait of a call needing ``need`` units right after ``budget`` was announced:
    ``max(0, (need - remaining) / rate)``, never past the reset (0 when not known)."""
    ahead, rate = debt_s(budget, need, window_s), rate_of(budget, window_s)
    if ahead is None or rate is None:
        return 0.0
    return turn_in(ahead, need / rate, window_s)
