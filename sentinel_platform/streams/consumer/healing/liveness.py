"""Connection liveness: a killed worker is known dead as soon as its socket closes.

A lease alone makes survivors wait one lease TTL after a SIGKILL. But the kernel closes
a killed process's sockets at once, and the server drops the client from ``CLIENT LIST``
within milliseconds. So each worker keeps one **dedicated connection** (``Link``)
that lives exactly as long as the process, and registers that connection's ``CLIENT ID``
next to its lease (:func:`registration_key`). A survivor that finds a holder's lease
alive but its registered connection gone treats the holder as dead and claims its
messages at once (``recovery.py``).

The rules that keep a live worker from being robbed:

* **Only the lease holder registers.** The registration script writes only while the
  lease value is the worker's own, and the registration quotes that value: a survivor
  ignores a registration whose lease value is not the current one (another process
  took the name, or the registration is older than the lease).
* **A blip is not a death.** A connection dropped by the network or ``CLIENT KILL``
  reconnects with a new id. The link notices at once (it sits in a blocking read on that
  connection), reconnects and re-registers within milliseconds. A survivor's
  :class:`Watch` (a thread looking every :data:`WATCH_INTERVAL_S`) calls a holder dead
  only if the *same* registration is still missing :data:`CONFIRM_S` after it was first
  seen missing; the worker loop then claims at its next step without waiting.
* **Same node.** ``CLIENT LIST`` is per server: the link registers on the node owning
  the lease key (its hash tag) and names that node; a survivor asks the node owning the
  key now, and a registration made on another node (slot moved, failover) is
  ``unknown``.
* **Unknown falls back to the lease.** No registration (a worker of an older version,
  a legacy consumer), an ACL without ``CLIENT LIST`` (``NOPERM``, logged once), a
  server error: the lease TTL decides, as before. A hung process keeps its connection,
  so hangs are still handled by the hang watchdog, and a vanished host (no FIN/RST) by
  the lease TTL.

The verdict is a pure function (:func:`judge`); the classes only do the I/O.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.plumbing.connection import TRANSIENT_ERRORS, RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.scripts import LuaScript

log = logging.getLogger(__name__)

Verdict = Literal["dead", "alive", "unknown"]

#: A survivor looks again after this long before calling a missing connection dead: a
#: live worker's link reconnects and re-registers well within it.
CONFIRM_S = 0.25
#: The link's blocking read times out this often (it then re-registers, refreshing the TTL).
LINK_BLOCK_S = 1.0
#: Pause between reconnection attempts of the link after the first, immediate one.
LINK_RETRY_S = 0.05
#: Longest pause between reconnection attempts during an outage.
LINK_RETRY_MAX_S = 0.2
#: Life of a registration that is not refreshed (the link refreshes it every LINK_BLOCK_S).
REGISTRATION_TTL_MS = 10_000
#: How often a survivor looks at the connections of the holders it leaves alone.
WATCH_INTERVAL_S = 0.1
#: A watch whose worker loop has not run a recovery step for this long ends.
WATCH_IDLE_EXIT_S = 30.0

#: Register our connection id, only while the lease is ours.
REGISTER = LuaScript(
    "register_connection",
    """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
""",
)


@dataclass(frozen=True, slots=True)
class Registration:
    """What a worker registered: its lease value, its connection id and the node."""

    lease: str
    client_id: int
    node: str

    def encode(self) -> str:
        return json.dumps({"lease": self.lease, "id": self.client_id, "node": self.node})

    @classmethod
    def decode(cls, raw: str | None) -> Registration | None:
        """The registration in ``raw``; None when absent or unreadable."""
        if not raw:
            return None
        try:
            data = json.loads(raw)
            return cls(str(data["lease"]), int(data["id"]), str(data["node"]))
        except (ValueError, TypeError, KeyError):
            return None


@dataclass(frozen=True, slots=True)
class Sighting:
    """A registration first seen without its connection at ``since`` (monotonic seconds)."""

    registration: Registration
    since: float


@dataclass(frozen=True, slots=True)
class Observation:
    """One look at a holder: its lease value, registration, and the node's live ids.

    ``live_ids`` is None when the ids could not be read (permission, error); ``node`` is
    the node that answered (``""`` on a single server).
    """

    lease: str | None
    registration: Registration | None
    live_ids: frozenset[int] | None
    node: str


def judge(
    seen: Observation, sighting: Sighting | None, now: float, confirm_s: float = CONFIRM_S
) -> tuple[Verdict, Sighting | None]:
    """Whether a holder is dead by its connection, and the sighting to keep for next time.

    ``dead`` only when the current lease's registration, made on the node asked, has its
    connection missing now and was already missing ``confirm_s`` earlier (the same
    registration: a re-registration after a blip is a new one). ``alive`` when the
    connection is there; ``unknown`` otherwise, the lease then decides.
    """
    reg = seen.registration
    if seen.lease is None or reg is None or reg.lease != seen.lease or reg.node != seen.node:
        return "unknown", None
    if seen.live_ids is None:
        return "unknown", sighting
    if reg.client_id in seen.live_ids:
        return "alive", None
    if sighting is None or sighting.registration != reg:
        return "unknown", Sighting(reg, now)
    if now - sighting.since >= confirm_s:
        return "dead", sighting
    return "unknown", sighting


def registration_key(keys: StreamKeys, consumer: str) -> str:
    """Where ``consumer`` registers its connection: beside its lease, in the same slot."""
    return f"{keys.lease(consumer)}|connection"


def node_of(client: RedisClient, key: str) -> str:
    """The name of the node serving ``key`` (``""`` on a single server)."""
    if isinstance(client, RedisCluster):
        cluster: Any = client  # redis-py's cluster client is untyped
        return str(cluster.get_node_from_key(key).name)
    return ""


def live_client_ids(client: RedisClient, key: str, ids: Iterable[int]) -> frozenset[int]:
    """Which of ``ids`` are connected to the node serving ``key`` (``CLIENT LIST ID``)."""
    wanted = [str(i) for i in ids]
    if not wanted:
        return frozenset()
    untyped: Any = client  # redis-py's execute_command is untyped
    if isinstance(client, RedisCluster):
        node = untyped.get_node_from_key(key)
        reply = untyped.execute_command("CLIENT LIST", "ID", *wanted, target_nodes=node)
    else:
        reply = untyped.execute_command("CLIENT LIST", "ID", *wanted)
    return frozenset(int(entry["id"]) for entry in _client_entries(reply))


def _client_entries(reply: Any) -> list[dict[str, str]]:
    if isinstance(reply, list):
        return reply
    text = reply.decode() if isinstance(reply, bytes) else str(reply or "")
    entries = []
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "id" in fields:
            entries.append(fields)
    return entries


#: Reads the lease values and registrations of some holders (one round trip).
ReadHolders = Callable[[Sequence[str]], tuple[Mapping[str, str | None], Mapping[str, str | None]]]


class Watch(threading.Thread):
    """A survivor's watch over the connections of the holders it leaves alone.

    It looks every :data:`WATCH_INTERVAL_S` (``CLIENT LIST ID`` of their registered ids)
    from its own thread, so a holder's death is confirmed while the worker loop blocks
    in its read, and the loop only consults :meth:`dead` (no I/O, no waiting).
    """

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        holders: Callable[[], Sequence[str]],
        read: ReadHolders,
        log_fields: Mapping[str, str],
    ) -> None:
        super().__init__(name="liveness-watch", daemon=True)
        self.client = client
        self.keys = keys
        self.holders = holders
        self.read = read
        self.log = BoundLogger(log, log_fields)
        self.enabled = True
        self._sightings: dict[str, Sighting] = {}
        self._dead: dict[str, Registration] = {}
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._touched = time.monotonic()
        #: called (from this thread) when a holder is first judged dead: the consumer
        #: wakes its blocked read so its recovery claims at once
        self.on_death: Callable[[], None] = _nothing

    def touch(self) -> None:
        """The worker loop is running (a watch left untouched for long ends by itself)."""
        self._touched = time.monotonic()

    def renewed(self) -> Watch:
        """A fresh watch (a thread runs once) with the same duties."""
        watch = Watch(self.client, self.keys, self.holders, self.read, self.log.fields)
        watch.on_death = self.on_death
        return watch

    def run(self) -> None:
        while self.enabled and not self._halt.wait(WATCH_INTERVAL_S):
            if time.monotonic() - self._touched > WATCH_IDLE_EXIT_S:
                return  # the loop stopped (worker shut down): do not outlive it
            try:
                self.look()
            except (*TRANSIENT_ERRORS, redis.RedisError) as exc:
                self.log.debug("liveness_watch_failed", extra={"error": str(exc)})
            except Exception:  # the watch must outlive any single bad look
                self.log.exception("liveness_watch_error")

    def look(self) -> None:
        """Observe the current holders once and judge them."""
        names = list(self.holders())
        if not names:
            self._judge({}, time.monotonic())
            return
        leases, registrations = self.read(names)
        self._judge(self.observe(leases, registrations), time.monotonic())

    def observe(
        self, leases: Mapping[str, str | None], registrations: Mapping[str, str | None]
    ) -> dict[str, Observation]:
        """Ask the node for the registered ids of these holders (one ``CLIENT LIST``)."""
        regs = {name: Registration.decode(registrations.get(name)) for name in leases}
        key = registration_key(self.keys, next(iter(leases))) if leases else ""
        ids = [reg.client_id for reg in regs.values() if reg is not None]
        live: frozenset[int] | None = None
        node = ""
        if ids:
            node = node_of(self.client, key)
            try:
                live = live_client_ids(self.client, key, ids)
            except redis.exceptions.NoPermissionError as exc:
                self._disable(exc)
            except redis.ResponseError as exc:
                if "NOPERM" not in str(exc):
                    raise
                self._disable(exc)
        return {name: Observation(leases[name], regs[name], live, node) for name in leases}

    def _judge(self, seen: Mapping[str, Observation], now: float) -> None:
        with self._lock:
            dead: dict[str, Registration] = {}
            for name, observation in seen.items():
                verdict, sighting = judge(observation, self._sightings.get(name), now)
                if sighting is None:
                    self._sightings.pop(name, None)
                else:
                    self._sightings[name] = sighting
                if verdict == "dead" and sighting is not None:
                    dead[name] = sighting.registration
            for name in set(self._sightings) - set(seen):
                del self._sightings[name]
            newly_dead = set(dead) - set(self._dead)
            self._dead = dead
        if newly_dead:
            self.on_death()

    def dead(
        self, leases: Mapping[str, str | None], registrations: Mapping[str, str | None]
    ) -> set[str]:
        """Holders judged dead whose lease and registration, as just read by the loop,
        are still the ones judged."""
        with self._lock:
            return {
                name
                for name, registration in self._dead.items()
                if Registration.decode(registrations.get(name)) == registration
                and leases.get(name) == registration.lease
            }

    def _disable(self, exc: Exception) -> None:
        self.enabled = False
        self.log.warning(
            "liveness_probe_unavailable",
            extra={
                "error": str(exc),
                "fallback": "lease TTL (grant +client|list for recovery at connection close)",
            },
        )

    def stop(self) -> None:
        self._halt.set()


def _nothing() -> None:
    return None


def node_client(client: RedisClient, key: str) -> redis.Redis:
    """The client of the node serving ``key`` (the client itself on a single server)."""
    if isinstance(client, RedisCluster):
        cluster: Any = client  # redis-py's cluster client is untyped
        node: redis.Redis = cluster.get_redis_connection(cluster.get_node_from_key(key))
        return node
    return client


def dedicated_client(client: RedisClient, key: str, name: str) -> redis.Redis:
    """A one-connection client to the node serving ``key``, which never retries.

    A retry would reconnect behind our back with a new id; the link must see every
    reconnection to register the new id.
    """
    pool = node_client(client, key).connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs.update(
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
        client_name=name,
        socket_timeout=max(float(kwargs.get("socket_timeout") or 0), LINK_BLOCK_S + 5),
    )
    kwargs.pop("retry_on_error", None)
    dedicated = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    return redis.Redis(connection_pool=dedicated, single_connection_client=True)
