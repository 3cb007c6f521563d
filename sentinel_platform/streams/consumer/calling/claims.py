"""One paid call per natural key across the fleet: an in-flight claim tied to the lease.

The commit keeps one *effect* per natural key (``idempotency.py``), but two copies of a
transaction read by two workers at the same moment would each make the processor's
call, and an analyzer call is paid for. So a processor that makes paid calls (it says
so: ``Processor.paid_calls``) has its keys *claimed* before the call:

* :data:`CLAIM` takes, in one script call per batch, a claim key per natural key
  (``<marker prefix>__claim:<key>``, the markers' hash slot on a cluster) holding the
  claimant's consumer name, with the lease's TTL. A key already claimed by another
  consumer is not called: its message *waits* (:class:`Claims`), in hand and pending on
  this worker, until the key's marker appears (the claimant committed: the copy is
  acknowledged as a duplicate, no call) or the claim lapses (the claimant died with its
  lease: the survivor claims the key and calls).
* The claimant refreshes the claims of the keys it holds with every lag write once they
  are older than a third of their TTL (:meth:`Claims.queue_refresh`, the heartbeat's
  side write too), so a claim lives exactly as long as its holder: it lapses within one
  lease TTL of the holder's death, like the lease.
* The commit that sets a key's marker deletes its claim in the same script call
  (``idempotency.py``): the marker answers for the key from then on, and a claim left
  to lapse would cost the server its memory and an expiry per message. A claim whose
  message was dead-lettered or handed back lapses with its TTL.
* So does the claim of a message whose call *failed*, while it waits out
  ``SENTINEL_RETRY_BACKOFF_MS``: it is in no call, so :meth:`Claims.keep` drops its key.
  That costs no second call: the retry is triaged like any redelivery and claims the key
  again first, so it waits for (or is acknowledged by) a copy that called meanwhile. A
  copy elsewhere thus calls after one lease TTL instead of waiting out the failed
  worker's backoff, and the key still gets one call after the failure.

Processors that make no paid call (the rules, a no-op) skip all of this: no claim key is
ever written and the batch costs no extra round trip.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sentinel_platform.streams.consumer.outcomes import Acknowledge, Outcome, Prepared
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.scripts import LuaScript

#: How often messages waiting on another worker's claim look again.
RECHECK_S = 0.1
#: A claim is refreshed once it is older than this part of its TTL: a call of a second
#: never needs it, and every message would otherwise cost the server two more commands
#: per lag write (the claim script's ``SET ... NX GET`` already set the TTL).
REFRESH_AFTER = 1 / 3

#: KEYS: per key, its marker then its claim; ARGV: consumer, ttl_ms. Per key: 2 committed
#: (marker found), 1 ours (taken now, or ours already: refreshed), 0 another's. Two
#: commands per key (``SET NX GET``, Redis 7.0): the per-command cost inside a script is
#: what the server's time per message is made of.
CLAIM = LuaScript(
    "claim_keys",
    """
local result = {}
for i = 1, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    result[#result + 1] = 2
  else
    local holder = redis.call('SET', KEYS[i + 1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
    if not holder then
      result[#result + 1] = 1
    elseif holder == ARGV[1] then
      redis.call('PEXPIRE', KEYS[i + 1], ARGV[2])
      result[#result + 1] = 1
    else
      result[#result + 1] = 0
    end
  end
end
return result
""",
)

#: KEYS: claims; ARGV: consumer, ttl_ms. Extends the claims that are still ours.
REFRESH = LuaScript(
    "refresh_claims",
    """
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
  end
end
return #KEYS
""",
)


def claim_key(keys: StreamKeys, natural_key: str) -> str:
    """The claim of ``natural_key``: beside its marker, in the stream's hash slot."""
    return f"{keys.marker_prefix}__claim:{natural_key}"


def sort_claimed(
    due: Sequence[Prepared], flags: Sequence[int]
) -> tuple[list[Prepared], list[Prepared], list[Outcome]]:
    """Split ``due`` by the claim script's flags (one per distinct key, in first-seen
    order): ours to call, another's to wait on, committed meanwhile (acknowledged)."""
    by_key = dict(zip(dict.fromkeys(p.natural_key for p in due), flags, strict=True))
    mine: list[Prepared] = []
    waiting: list[Prepared] = []
    done: list[Outcome] = []
    for prepared in due:
        flag = int(by_key[prepared.natural_key])
        if flag == 2:
            done.append(Acknowledge(prepared.delivery, "duplicate", prepared.natural_key))
        elif flag == 1:
            mine.append(prepared)
        else:
            waiting.append(prepared)
    return mine, waiting, done


class Claims:
    """The claims of one consumer and the messages waiting on others' claims. Used from
    the consumer's thread; :meth:`queue_refresh` from the side-write thread reads only
    :attr:`held`, a frozenset replaced whole."""

    def __init__(self, client: RedisClient, keys: StreamKeys, consumer: str, ttl_ms: int) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.ttl_ms = ttl_ms
        self.waiting: dict[str, Prepared] = {}  # by message id
        #: the natural keys this consumer holds claims for, with when each was taken
        #: (monotonic): replaced whole, read by the side-write thread
        self.held: dict[str, float] = {}
        self._taken: dict[str, float] = {}
        self._next_check = 0.0

    def take(self, due: Sequence[Prepared]) -> tuple[list[Prepared], list[Outcome]]:
        """Claim the keys of ``due``: the messages to call now, and the outcomes decided
        (a key committed meanwhile); messages on another's claim wait here."""
        if not due:
            return [], []
        mine, waiting, done = self._claim(due)
        self.waiting.update((p.delivery.id, p) for p in waiting)
        return mine, done

    def recheck(self, now: float) -> tuple[list[Prepared], list[Outcome]]:
        """At most every :data:`RECHECK_S`: the waiting messages whose claimant committed
        (acknowledged) or whose claim lapsed (ours now, to call)."""
        if not self.waiting or now < self._next_check:
            return [], []
        self._next_check = now + RECHECK_S
        mine, waiting, done = self._claim(list(self.waiting.values()))
        self.waiting = {p.delivery.id: p for p in waiting}
        return mine, done

    def keep(self, natural_keys: set[str]) -> None:
        """The keys this consumer still works on (their claims are refreshed)."""
        now = time.monotonic()
        self._taken = {key: self._taken.get(key, now) for key in natural_keys}
        self.held = dict(self._taken)

    def take_back(self) -> list[Prepared]:
        """The waiting messages, to hand back (a stop)."""
        back = list(self.waiting.values())
        self.waiting.clear()
        return back

    def queue_refresh(self, pipe: Any) -> None:
        """Queue the refresh of our claims older than :data:`REFRESH_AFTER` of their TTL
        on ``pipe`` (nothing when there are none)."""
        before = time.monotonic() - REFRESH_AFTER * self.ttl_ms / 1000
        old = sorted(key for key, taken in self.held.items() if taken <= before)
        if old:
            claims = [claim_key(self.keys, key) for key in old]
            REFRESH.queue(pipe, claims, [self.consumer, self.ttl_ms])

    def queue_claim(self, pipe: Any, names: Sequence[str]) -> None:
        """Queue the claim of ``names`` (distinct) on ``pipe``: triage sends it in its own
        round trip, where the claim's marker check replaces the markers' ``MGET``. Its
        reply goes to :meth:`split`."""
        CLAIM.queue(pipe, self._pairs(names), [self.consumer, self.ttl_ms])

    def split(
        self, due: Sequence[Prepared], flags: dict[str, int]
    ) -> tuple[list[Prepared], list[Outcome]]:
        """``due`` by the claim's ``flags`` (by natural key): the messages to call now
        and the outcomes decided; messages on another's claim wait here."""
        mine, waiting, done = sort_claimed(due, [flags[n] for n in _names(due)])
        self.waiting.update((p.delivery.id, p) for p in waiting)
        return mine, done

    def _pairs(self, names: Sequence[str]) -> list[str]:
        """The claim script's keys: per natural key, its marker then its claim."""
        return [k for n in names for k in (self.keys.marker(n), claim_key(self.keys, n))]

    def _claim(
        self, due: Sequence[Prepared]
    ) -> tuple[list[Prepared], list[Prepared], list[Outcome]]:
        names = _names(due)
        flags = CLAIM.run(self.client, self._pairs(names), [self.consumer, self.ttl_ms])
        return sort_claimed(due, flags)


def _names(due: Sequence[Prepared]) -> list[str]:
    return list(dict.fromkeys(p.natural_key for p in due))
