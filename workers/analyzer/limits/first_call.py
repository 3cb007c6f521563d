"""The fleet's first call: one at a time while the fleet knows nothing of the limits.

An announced budget paces the fleet only once an answer has announced it. Before that (a
fleet's first start, or after what was learnt has lapsed) every worker's threads would
call at once, and against a budget already spent elsewhere (a shared key) the whole first
wave is refused. So while the fleet knows nothing, neither a learnt pace nor a record
that the analyzer answered without announcing, :class:`FirstCallGate` lets one call out
fleet-wide: a Redis key taken with ``SET NX PX`` (for at most the call's timeout), given
back when its answer has been learnt (:meth:`FirstCallGate.answered`) or when the call
got no answer (:meth:`FirstCallGate.release`: refused, timed out, never sent), so the next
call probes. Every other call is handed back as a turn (:class:`FleetBusy` with a short
retry, ``GATE_RETRY_S``): no thread waits on the gate, so the worker's stop needs nothing
to end.

An answer is *recorded* so that the gate stays shut only while nothing is known: one that
announces keeps the learnt rates alive (their hash's TTL renewed), one that announces
nothing sets a record of its own. An API that never announces (a configured limit, the
``sentinel`` API, a local server) is thus gated for one call, then called at full speed
until the record lapses with the answers (``ttl_ms``), when one call is gated again. Once
anything is known the gate is not asked (the budget's pace decides), and a worker
remembers "known" for ``refresh_s``, so a silent API costs no round trip per call.

A Redis error fails open (the call goes, as it would have before anything was gated):
the gate only spares the first wave, it is not a limit.

Keys (``learned``, ``silent``, ``gate``) share the budget's ``{id}`` hash tag, so the
scripts run on a Redis Cluster.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.scripts import LuaScript
from workers.analyzer.limits.fleet_limits import FleetBusy

log = logging.getLogger(__name__)

#: How soon a call handed back by the gate is tried again: the first answer reaches the
#: waiting calls within about this long.
GATE_RETRY_S = 0.1
#: The shortest retry (the gate is about to lapse): never a spin.
MIN_RETRY_S = 0.01

#: KEYS[1] the learnt rates' hash, KEYS[2] the record of an answer that announced
#: nothing, KEYS[3] the gate. ARGV: this call's token, the gate's longest hold (ms).
#: Returns {1, 0} known (go), {2, 0} this call holds the gate (go: the probe),
#: {0, ms the gate has left} another call holds it (wait).
ENTER_SCRIPT = LuaScript(
    "analyzer_first_call_enter",
    """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then
  return {1, 0}
end
if redis.call('GET', KEYS[3]) == ARGV[1]
  or redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {2, 0}
end
return {0, redis.call('PTTL', KEYS[3])}
""",
)

#: KEYS as :data:`ENTER_SCRIPT`'s. ARGV: the token held ('' none), the records' TTL (ms,
#: 0: record nothing), 1 the answer announced (renew the learnt rates) or 0 (record the
#: silent answer). The gate is given back only by the token that holds it.
ANSWERED_SCRIPT = LuaScript(
    "analyzer_first_call_answered",
    """
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  if ARGV[3] == '1' then
    redis.call('PEXPIRE', KEYS[1], ttl)
  else
    redis.call('SET', KEYS[2], '1', 'PX', ttl)
  end
end
if ARGV[1] ~= '' and redis.call('GET', KEYS[3]) == ARGV[1] then
  redis.call('DEL', KEYS[3])
end
return 0
""",
)


@dataclass(frozen=True)
class Turn:
    """What the gate said to one call: go (and whether it is the fleet's probe, whose
    answer opens the gate), or wait ``retry_s`` for another look."""

    go: bool
    probe: bool = False
    retry_s: float = 0.0


def turn_of(code: int, left_ms: int) -> Turn:
    """The gate's reply (:data:`ENTER_SCRIPT`) as a :class:`Turn`. A waiting call looks
    again within ``GATE_RETRY_S``, sooner when the gate lapses sooner (a probe that died
    with its worker)."""
    if code == 1:
        return Turn(go=True)
    if code == 2:
        return Turn(go=True, probe=True)
    if left_ms < 0:  # gone (or no expiry) between the two reads: look again soon
        return Turn(go=False, retry_s=MIN_RETRY_S)
    return Turn(go=False, retry_s=min(GATE_RETRY_S, max(MIN_RETRY_S, left_ms / 1000)))


def record_due(holds_gate: bool, now: float, next_record: float) -> bool:
    """Whether an answer is written to Redis: always by the probe (its answer opens the
    gate), else at most once per refresh period per worker (the record needs renewing
    only well within its TTL, not per call)."""
    return holds_gate or now >= next_record


class FirstCallGate:
    """The first-call gate of one analyzer, for all the threads of one worker.

    ``keys`` are the learnt rates' hash, the silent record and the gate (one hash tag);
    ``hold_s`` bounds how long one probe holds the gate (the call's timeout: a worker
    that dies mid-call frees it then); ``ttl_ms`` is how long an answer's record lasts;
    ``refresh_s`` how long a worker trusts "known" before asking again. Without a Redis
    client every call goes. Thread-safe; the gate's token is per thread, as a call's
    answer is learnt on the thread that made it."""

    def __init__(
        self,
        keys: Sequence[str],
        hold_s: float,
        ttl_ms: int,
        refresh_s: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if hold_s <= 0:
            raise ValueError(f"first-call gate hold must be positive, got {hold_s}")
        self._keys = list(keys)
        self._hold_ms = max(1, round(hold_s * 1000))
        self._ttl_ms = ttl_ms
        self._refresh_s = refresh_s
        self._clock = clock
        self._client: RedisClient | None = None
        self._lock = threading.Lock()
        self._known_until = 0.0  # this worker saw the fleet knowing something until then
        self._next_record = 0.0
        self._held = threading.local()  # this thread's token while it holds the gate

    def bind(self, client: RedisClient) -> None:
        """Share the gate through ``client`` from now on (once, at start-up)."""
        self._client = client

    def admit(self) -> bool:
        """Before a call made while this worker knows no pace: True when the fleet was
        just found knowing something (re-read it; the call goes), False when the call goes
        as it is (it is the probe, the fleet was seen knowing within ``refresh_s`` and
        what it knows is already read, or there is no Redis to ask). :class:`FleetBusy`
        while another call holds the gate."""
        if self._client is None:
            return False
        with self._lock:
            if self._clock() < self._known_until:
                return False
        token = getattr(self._held, "token", None) or uuid.uuid4().hex
        try:
            code, left = ENTER_SCRIPT.run(self._client, self._keys, [token, self._hold_ms])
        except redis.RedisError as exc:
            log.warning("analyzer_first_call_unknown", extra={"error": type(exc).__name__})
            return False
        turn = turn_of(int(code), int(left))
        if not turn.go:
            raise FleetBusy(turn.retry_s, "analyzer: the fleet's first call is out, awaiting it")
        if turn.probe:
            self._held.token = token
            return False
        with self._lock:
            self._known_until = self._clock() + self._refresh_s
        return True

    def answered(self, announced: bool) -> None:
        """The analyzer answered (whatever the status): record it (renew the learnt rates,
        or record that it announced nothing) and give the gate back if this thread holds
        it. Called after what the answer announced has been shared."""
        token = getattr(self._held, "token", None)
        self._held.token = None
        if self._client is None:
            return
        now = self._clock()
        with self._lock:
            if not announced:
                self._known_until = now + self._refresh_s
            if not record_due(token is not None, now, self._next_record):
                return
            self._next_record = now + self._refresh_s
        args = [token or "", self._ttl_ms, int(announced)]
        try:
            ANSWERED_SCRIPT.run(self._client, self._keys, args)
        except redis.RedisError as exc:
            log.warning("analyzer_first_call_unrecorded", extra={"error": type(exc).__name__})

    def release(self) -> None:
        """The call ended with no answer learnt (refused, timed out, never sent): give the
        gate back, if this thread holds it, so the next call probes. Cheap otherwise."""
        token = getattr(self._held, "token", None)
        self._held.token = None
        if token is None or self._client is None:
            return
        try:
            ANSWERED_SCRIPT.run(self._client, self._keys, [token, 0, 0])
        except redis.RedisError as exc:  # the gate lapses with its hold
            log.warning("analyzer_first_call_unreleased", extra={"error": type(exc).__name__})
