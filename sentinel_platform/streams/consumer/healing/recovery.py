"""Recovering abandoned messages: every worker is also a reclaimer.

Each loop iteration (at least once a second, see ``Consumer.iteration``) runs :meth:`Recovery.step`:

1. ``XPENDING stream group`` (summary: total and per-consumer counts). When nothing is
   pending, or only we hold messages that are not yet due, that is the whole cost: one
   round trip.
2. For the other consumers holding messages: one pipeline of ``GET lease``,
   ``HEXISTS consumers`` and ``GET`` of the connection it registered, per consumer. A
   consumer whose lease is alive is never robbed, however idle its messages are (they
   are counted in ``skipped_alive``), unless the watch (``liveness.py``, its own thread)
   found the connection it registered closed, twice, ``CONFIRM_S`` apart.
3. Claimable holders, each with its own minimum idle time:

   * ourselves, for messages whose processing failed: after ``SENTINEL_RETRY_BACKOFF_MS``;
     looked for only when we hold more pending messages than we have in hand (a busy
     worker's every pending message is in hand: no query for it);
   * holders whose registered connection closed (SIGKILL, crash): at once; the claim
     script takes only ids the holder still holds, so two survivors never take one
     message from each other;
   * registered consumers whose lease is gone (killed, hung, stopped): after
     ``SENTINEL_LEASE_TTL_MS`` (a hung process, a vanished host, a holder without a
     registered connection);
   * consumers that never registered (legacy Sentinel-L7 workers without leases): after
     ``SENTINEL_RECLAIM_IDLE_MS`` of idleness, as they expect.

   Their PELs are paged with the extended ``XPENDING ... IDLE min COUNT n consumer`` and
   a cursor per consumer, so the *whole* PEL is scanned across iterations (the stuck
   pending entry write-up's cursor loop, see the design notes' sources),
   and the ids are claimed with one Lua call (XCLAIM keeps and bumps the delivery count;
   its min-idle check means two survivors never both claim one message). The call claims
   only while the holder's lease is still the one judged (or still absent): a worker
   restarted under the name meanwhile (``lease_takeover.py``) owns what it reads.

Ids whose entry was trimmed or deleted cannot be processed: Redis 7 drops them from
the PEL inside XCLAIM, Redis 6.2 moves them to the claimer without a body. The claim
script detects both (XRANGE of the id is empty), acknowledges them, deletes their
attempt records and reports them as ``trimmed``. A worker claims only while it holds
its own lease (``lease_value``), so a process that lost its name to another claims
nothing. Registered consumers that are dead and hold nothing are removed from the
group and the registry now and then, so the consumer list does not grow with restarts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.backlog.entry_ages import age_s
from sentinel_platform.streams.consumer.healing.liveness import Watch, registration_key
from sentinel_platform.streams.consumer.healing.recovery_grace import RecoveryGrace
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.outcomes import Delivery
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, attempt_key
from sentinel_platform.streams.plumbing.scripts import LuaScript

log = logging.getLogger(__name__)

#: Most ids claimed by one script call (keeps Lua's unpack and the reply small).
CLAIM_CHUNK = 200
#: Longest interval between counts of live consumers' overdue messages (``skipped_alive``);
#: shorter when the reclaim idle time is short, so short overdue spells are seen too.
ALIVE_CHECK_INTERVAL_S = 1.0
#: How often dead, empty consumers are removed from the group.
PRUNE_INTERVAL_S = 10.0

CLAIM = LuaScript(
    "claim",
    """
-- A claimer that does not hold its own lease (taken by a process using the same name)
-- claims nothing: two processes must never act as one consumer.
if ARGV[4] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[4] then return {{}, {}} end
-- The holder's lease must still be the one judged dead ('' none, '*' not checked): a
-- worker restarted under its name since then owns what that name reads now.
if ARGV[6] ~= '*' and (redis.call('GET', KEYS[3]) or '') ~= ARGV[6] then return {{}, {}} end
-- Only ids still held by the holder: another survivor may have claimed some since our
-- XPENDING, and XCLAIM alone would take them from it.
local ids, slots = {}, {}
for i = 7, #ARGV do
  local info = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
  if info[1] and info[1][2] == ARGV[5] then
    ids[#ids + 1] = ARGV[i]
    slots[#slots + 1] = i - 3  -- its attempt record's index in KEYS (from KEYS[4])
  end
end
if #ids == 0 then return {{}, {}} end
local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], unpack(ids))
local got, out, trimmed = {}, {}, {}
for _, entry in ipairs(claimed) do
  if type(entry) == 'table' and type(entry[2]) == 'table' then
    got[entry[1]] = true
    local info = redis.call('XPENDING', KEYS[1], ARGV[1], entry[1], entry[1], 1)
    local count = 0
    if info[1] then count = info[1][4] end
    out[#out + 1] = {entry[1], entry[2], count}
  end
end
for j, id in ipairs(ids) do
  if not got[id] and #redis.call('XRANGE', KEYS[1], id, id) == 0 then
    redis.call('XACK', KEYS[1], ARGV[1], id)
    redis.call('DEL', KEYS[slots[j]])  -- its attempt record
    trimmed[#trimmed + 1] = id
  end
end
return {out, trimmed}
""",
)

PRUNE = LuaScript(
    "prune_consumer",
    """
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
local held = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #held > 0 then return -2 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])
return 1
""",
)


@dataclass
class RecoveryStats:
    pel_depth: int = 0
    alive: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)


def pairs_to_dict(flat: Sequence[Any]) -> dict[str, str]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


class Recovery:
    """The recovery step of one consumer (keeps the PEL cursors between iterations)."""

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        consumer: str,
        *,
        lease_ttl_ms: int,
        reclaim_idle_ms: int,
        retry_backoff_ms: int,
        metrics: Metrics,
        lease_value: str = "",
        in_hand: Callable[[], Collection[str]] = frozenset,
        on_death: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.lease_ttl_ms = lease_ttl_ms
        self.reclaim_idle_ms = reclaim_idle_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.metrics = metrics
        #: our lease's value: claims are made only while it is ours ("" claims regardless)
        self.lease_value = lease_value
        #: ids we hold that are being handled right now (in a call, waiting for one, or
        #: decided and not yet settled): never our own retries, however idle they are
        self.in_hand = in_hand
        self.log = BoundLogger(
            log, {"stream": keys.stream, "group": keys.group, "consumer": consumer}
        )
        self._cursors: dict[str, str] = {}
        self._next_alive_check = 0.0
        self._next_prune = time.monotonic() + PRUNE_INTERVAL_S
        self.last = RecoveryStats()
        #: after an outage, others' messages wait one lease TTL (``recovery_grace.py``)
        self.grace = RecoveryGrace(lease_ttl_ms / 1000)
        #: a holder whose registered connection is gone is dead at once (``liveness.py``)
        self.watch = Watch(client, keys, self._watched, self._read_holders, self.log.fields)
        if on_death is not None:  # a death cuts the owner's blocked read short
            self.watch.on_death = on_death
        self._reported: set[str | None] = set()

    # --- the step ---------------------------------------------------------------------------
    def step(self, budget: int) -> list[Delivery]:
        """Claim up to ``budget`` messages that are due for (re)processing by us."""
        summary = self.client.xpending(self.keys.stream, self.keys.group)
        holders = {c["name"]: int(c["pending"]) for c in summary.get("consumers") or []}
        stats = RecoveryStats(pel_depth=int(summary.get("pending") or 0))
        self.metrics.set_gauge("pel_depth", stats.pel_depth)
        oldest = summary.get("min")  # the group's oldest pending entry, whoever holds it
        self.metrics.set_oldest_pending_age(age_s(str(oldest), time.time()) if oldest else 0.0)
        #: (holder, min idle, the holder's lease as judged: see :data:`CLAIM`)
        targets: list[tuple[str, int, str]] = []
        if holders.get(self.consumer, 0) > len(self.in_hand()):
            targets.append((self.consumer, self.retry_backoff_ms, "*"))
        now = time.monotonic()
        self.grace.reached(now)
        in_grace = not self.grace.allows_others(now)
        others = [] if in_grace else [name for name in holders if name != self.consumer]
        if others:
            leases, registered, registrations = self._liveness(others)
            disconnected = self._disconnected(leases, registrations)
            for name in others:
                if leases.get(name) is not None and name not in disconnected:
                    stats.alive.append(name)
                    continue
                stats.dead.append(name)
                if name in disconnected:
                    idle = 0  # the claim script takes only ids still held by this holder
                elif name in registered:
                    idle = self.lease_ttl_ms
                else:
                    idle = self.reclaim_idle_ms
                targets.append((name, idle, leases.get(name) or ""))
            self._count_skipped_alive(stats.alive)
        self.last = stats
        claimed: list[Delivery] = []
        for holder, min_idle, lease in targets:
            if budget - len(claimed) <= 0:
                break
            claimed.extend(self._claim_from(holder, min_idle, budget - len(claimed), lease))
        if not in_grace:
            self._maybe_prune(holders)
        return claimed

    def _liveness(
        self, consumers: Sequence[str]
    ) -> tuple[dict[str, str | None], set[str], dict[str, str | None]]:
        """Per consumer: its lease value (None: no lease), registered or not, and the
        connection it registered (``liveness.py``), in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for name in consumers:
            pipe.get(self.keys.lease(name))
            pipe.hexists(self.keys.consumers, name)
            pipe.get(registration_key(self.keys, name))
        replies = pipe.execute()
        leases = {name: replies[3 * i] for i, name in enumerate(consumers)}
        registered = {name for i, name in enumerate(consumers) if replies[3 * i + 1]}
        registrations = {name: replies[3 * i + 2] for i, name in enumerate(consumers)}
        return leases, registered, registrations

    def _disconnected(
        self, leases: dict[str, str | None], registrations: dict[str, str | None]
    ) -> set[str]:
        """Holders with a live lease whose registered connection the watch found gone
        twice, :data:`~liveness.CONFIRM_S` apart (a blip re-registers meanwhile)."""
        self.watch.touch()
        if not self.watch.is_alive() and self.watch.enabled:
            if self.watch.ident is not None:  # it ended while the loop was away
                self.watch = self.watch.renewed()
            self.watch.start()
        dead = self.watch.dead(leases, registrations)
        for name in dead:
            self._report_disconnected(name, registrations.get(name))
        return dead

    def _watched(self) -> list[str]:
        """The holders the watch looks at: the other consumers holding messages at the
        last step (dead ones too: a dead holder stays judged while it still holds some)."""
        return [*self.last.alive, *self.last.dead]

    def _read_holders(
        self, names: Sequence[str]
    ) -> tuple[dict[str, str | None], dict[str, str | None]]:
        leases, _registered, registrations = self._liveness(names)
        return leases, registrations

    def _report_disconnected(self, holder: str, registration: str | None) -> None:
        if registration in self._reported:
            return
        if len(self._reported) > 1000:
            self._reported.clear()
        self._reported.add(registration)
        self.log.info(
            "holder_disconnected",
            extra={"holder": holder, "registration": registration},
        )

    def _claim_from(self, holder: str, min_idle: int, budget: int, lease: str) -> list[Delivery]:
        """Claim ``holder``'s pending ids idle ``min_idle``, while its lease is ``lease``."""
        start = self._cursors.get(holder, "-")
        count = min(budget, CLAIM_CHUNK)
        entries = self.client.xpending_range(
            self.keys.stream,
            self.keys.group,
            min=start,
            max="+",
            count=count,
            consumername=holder,
            idle=min_idle,
        )
        if len(entries) < count:
            self._cursors.pop(holder, None)  # reached the end: next scan starts over
        else:
            self._cursors[holder] = "(" + str(entries[-1]["message_id"])
        ids = [str(entry["message_id"]) for entry in entries]
        if holder == self.consumer:
            busy = self.in_hand()
            ids = [message_id for message_id in ids if message_id not in busy]
        if not ids:
            return []
        reply = CLAIM.run(
            self.client,
            [
                self.keys.stream,
                self.keys.lease(self.consumer),
                self.keys.lease(holder),
                *(attempt_key(self.keys, message_id) for message_id in ids),
            ],
            [self.keys.group, self.consumer, min_idle, self.lease_value, holder, lease, *ids],
        )
        deliveries = [
            Delivery(message_id, pairs_to_dict(flat), int(count), holder)
            for message_id, flat, count in reply[0]
        ]
        self._report(holder, deliveries, list(reply[1]))
        return deliveries

    def _report(self, holder: str, deliveries: list[Delivery], trimmed: list[str]) -> None:
        for message_id in trimmed:
            self.metrics.inc("trimmed")
            self.log.warning(
                "trimmed",
                extra={"message_id": message_id, "claimed_from": holder},
            )
        if holder == self.consumer:
            return  # our own retries are logged by the loop
        self.metrics.inc("recovered", len(deliveries))
        for delivery in deliveries:
            self.log.info(
                "recovered",
                extra={
                    "message_id": delivery.id,
                    "claimed_from": holder,
                    "deliveries": delivery.deliveries,
                },
            )

    def _count_skipped_alive(self, alive: Sequence[str]) -> None:
        """Count live consumers' messages idle past the reclaim time that we leave alone."""
        now = time.monotonic()
        if not alive or now < self._next_alive_check:
            return
        self._next_alive_check = now + min(ALIVE_CHECK_INTERVAL_S, self.reclaim_idle_ms / 4000)
        pipe = self.client.pipeline(transaction=False)
        for name in alive:
            pipe.xpending_range(
                self.keys.stream,
                self.keys.group,
                min="-",
                max="+",
                count=100,
                consumername=name,
                idle=self.reclaim_idle_ms,
            )
        for name, entries in zip(alive, pipe.execute(), strict=True):
            if entries:
                self.metrics.inc("skipped_alive", len(entries))
                self.log.info(
                    "skipped_alive",
                    extra={
                        "holder": name,
                        "messages": len(entries),
                        "message_id": entries[0]["message_id"],
                    },
                )

    def _maybe_prune(self, holders: dict[str, int]) -> None:
        """Remove registered consumers that are dead and hold nothing (atomic check + delete)."""
        now = time.monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + PRUNE_INTERVAL_S
        registered = [str(name) for name in self.client.hkeys(self.keys.consumers)]
        for name in registered:
            if name == self.consumer or holders.get(name):
                continue
            keys = [self.keys.stream, self.keys.lease(name), self.keys.consumers]
            if PRUNE.run(self.client, keys, [self.keys.group, name]) == 1:
                self.log.info("consumer_pruned", extra={"pruned": name})
