"""Waiting between retries of something that keeps failing (Redis down, out of memory, READONLY).

Two properties matter for a loop that may retry for hours:

* **Bounded arithmetic.** The exponent is capped (:data:`MAX_EXPONENT`), so the delay of
  attempt 5,000 is computed as cheaply and safely as that of attempt 5; an uncapped
  ``base * 2 ** attempt`` overflows a float after about a thousand attempts.
* **Jitter.** Every worker of a fleet sees an outage at the same moment; without jitter
  they would all retry in lockstep and hit a restarted server together. The delay is
  redis-py's "equal jitter": half the exponential delay plus a random part of the other
  half, so it never drops near zero (no busy retry) and workers spread out.
"""

from __future__ import annotations

from redis.backoff import EqualJitterBackoff

#: Attempts past this one wait as long as it does (2**32 times the base is past any cap).
MAX_EXPONENT = 32


def backoff_delay(attempt: int, base_s: float, cap_s: float) -> float:
    """Seconds to wait before retry number ``attempt`` (1 = the first retry).

    Between half and all of ``min(cap_s, base_s * 2 ** (attempt - 1))``.
    """
    exponent = min(max(attempt, 1) - 1, MAX_EXPONENT)
    return EqualJitterBackoff(cap=cap_s, base=base_s).compute(exponent)


class Backoff:
    """Counts consecutive failures and gives the delay before the next retry."""

    def __init__(self, base_s: float, cap_s: float) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self.attempt = 0

    def next_delay(self) -> float:
        self.attempt += 1
        return backoff_delay(self.attempt, self.base_s, self.cap_s)

    def reset(self) -> None:
        self.attempt = 0
