"""When the batch lane acts: how long it gathers before submitting, how often it polls.

Pure. A batch is worth its wait only when it carries many messages, and a provider's
batch is minutes to hours at the provider, so polling it every second buys nothing:

* :func:`submit_now`: the entries gathered go to the provider when a batch is full, or
  once the lane's stream had nothing new for the settled window
  (``SENTINEL_ANALYZER_BATCH_GATHER_S``), or once the oldest has waited
  :data:`MAX_GATHER_WINDOWS` windows (a lane fed a trickle is never quiet), never while
  submissions are held (OpenAI's enqueued-token limit: until an outstanding batch ends);
* :func:`next_poll_s`: the wait before a batch's next poll starts at
  ``SENTINEL_ANALYZER_BATCH_POLL_S`` and doubles at every poll that finds it still
  running, up to ``SENTINEL_ANALYZER_BATCH_POLL_MAX_S``.
"""

from __future__ import annotations

#: Each poll that finds a batch still running multiplies the next wait by this.
POLL_GROWTH = 2.0
#: The longest the oldest entry gathered waits, in settled windows.
MAX_GATHER_WINDOWS = 12


def next_poll_s(previous_s: float | None, first_s: float, max_s: float) -> float:
    """The wait before the next poll of a batch whose last wait was ``previous_s``
    (None: not polled yet): ``first_s``, then doubling, never above ``max_s`` (nor below
    ``first_s``)."""
    ceiling = max(first_s, max_s)
    if previous_s is None:
        return min(first_s, ceiling)
    return min(ceiling, max(first_s, previous_s * POLL_GROWTH))


def submit_now(
    gathered: int, full: int, quiet_s: float, oldest_s: float, window_s: float, held: bool
) -> bool:
    """Whether ``gathered`` entries go to the provider now: never while ``held``, nor
    with nothing gathered; at once when a batch is ``full``; otherwise once nothing new
    came for ``window_s`` (``quiet_s`` since the last new entry) or the oldest entry
    gathered has waited :data:`MAX_GATHER_WINDOWS` windows (``oldest_s``)."""
    if held or gathered == 0:
        return False
    waited_long = oldest_s >= MAX_GATHER_WINDOWS * window_s
    return gathered >= full or quiet_s >= window_s or waited_long
