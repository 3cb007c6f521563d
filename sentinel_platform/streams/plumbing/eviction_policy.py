"""Will the Redis server keep the platform's keys? The decision on ``maxmemory-policy``.

Everything that makes delivery exactly-once lives in Redis keys: the streams with their
unprocessed and pending entries, the idempotency markers and leases (both with a TTL),
the attempt records, the lag key. A server at ``maxmemory`` makes room according to its
policy:

* ``noeviction`` refuses writes instead: commands fail loudly and are retried; nothing
  is lost. The only policy that is **ok**.
* ``volatile-*`` deletes keys with a TTL: an idempotency marker gone lets a redelivered
  message be applied twice, a lease gone hands a live worker's messages to another.
  Platform runs with a **warn**ing.
* ``allkeys-*`` deletes any key, the streams and their unprocessed entries included: it
  is **refuse**d, unless ``SENTINEL_ALLOW_EVICTING_SERVER`` accepts the risk (then a
  warning that says it was accepted).
* A server whose ``INFO memory`` does not report the policy (a proxy or managed service
  hiding it, an ACL denying the section) is **unknown**: a note, never a failure, since
  the platform cannot tell and the operator can.

The policy is judged alone, whatever ``maxmemory`` is now: ``maxmemory 0`` (no limit)
evicts nothing, but whoever runs the server can set a limit at runtime without the
platform noticing. The policy is read from ``INFO memory``, which the README's
least-privilege ACL allows (``+info``), not ``CONFIG GET``, which it does not.

:func:`assess` and :func:`assess_servers` are pure and tested from tables;
:func:`read_policies` is the one read; :func:`server_verdict` joins the two. Each entry
point (workers, ``sentinel up``, the publisher, ``sentinel status``, the stream-health
check) decides what a verdict means for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import redis
from redis.cluster import RedisCluster

from sentinel_platform.streams.plumbing.connection import RedisClient

#: The variable that accepts an ``allkeys-*`` server (``Settings.allow_evicting_server``).
ALLOW_SETTING = "SENTINEL_ALLOW_EVICTING_SERVER"
SAFE_POLICY = "noeviction"

Level = Literal["ok", "unknown", "warn", "refuse"]
#: Worse verdicts rank higher; on a cluster the worst primary decides.
RANK: dict[Level, int] = {"ok": 0, "unknown": 1, "warn": 2, "refuse": 3}

_WHAT_TTL_KEYS_HOLD = (
    "idempotency markers (a redelivered message may be applied twice) and worker leases "
    "(a live worker's messages may be recovered by another)"
)
_REMEDY = (
    f"set maxmemory-policy {SAFE_POLICY} (volatile-* policies run with a warning), or set "
    f"{ALLOW_SETTING}=true to accept the risk of lost and duplicated messages"
)


@dataclass(frozen=True)
class EvictionVerdict:
    """What the platform makes of a server's ``maxmemory-policy``.

    ``policy`` is the policy judged (lower case), ``None`` when the server did not report
    it; ``accepted`` is true when an ``allkeys-*`` policy runs only because the setting
    accepts it; ``message`` says why, naming the policy and the remedy.
    """

    level: Level
    policy: str | None
    message: str
    accepted: bool = False

    @property
    def refused(self) -> bool:
        return self.level == "refuse"


def assess(policy: str | None, allow_evicting: bool) -> EvictionVerdict:
    """The verdict on one server's ``policy`` (``None``/empty: not reported).

    ``allow_evicting`` (``SENTINEL_ALLOW_EVICTING_SERVER``) turns an ``allkeys-*`` refusal
    into a warning; it changes nothing else.
    """
    name = (policy or "").strip().lower() or None
    if name is None:
        return EvictionVerdict(
            "unknown",
            None,
            "the server does not report its maxmemory-policy (INFO memory hides it); the "
            f"platform needs {SAFE_POLICY}: volatile-* policies may evict "
            f"{_WHAT_TTL_KEYS_HOLD}, allkeys-* ones any key, streams included (refused "
            f"unless {ALLOW_SETTING}=true)",
        )
    if name == SAFE_POLICY:
        return EvictionVerdict(
            "ok", name, f"maxmemory-policy {name}: a full server refuses writes, deletes nothing"
        )
    if name.startswith("allkeys-"):
        risk = (
            f"maxmemory-policy {name}: at maxmemory the server may evict any key: the "
            "streams with their unprocessed entries, idempotency markers, leases and "
            "attempt records"
        )
        if allow_evicting:
            return EvictionVerdict(
                "warn",
                name,
                f"{risk}; accepted by {ALLOW_SETTING}=true: messages may be lost or applied "
                f"twice (set maxmemory-policy {SAFE_POLICY} to be safe)",
                accepted=True,
            )
        return EvictionVerdict("refuse", name, f"{risk}; refused: {_REMEDY}")
    if name.startswith("volatile-"):
        return EvictionVerdict(
            "warn",
            name,
            f"maxmemory-policy {name}: at maxmemory the server may evict keys with a TTL: "
            f"{_WHAT_TTL_KEYS_HOLD}; set maxmemory-policy {SAFE_POLICY} to be safe",
        )
    return EvictionVerdict(
        "warn",
        name,
        f"maxmemory-policy {name} is not a policy the platform knows; it may evict keys the "
        f"platform needs: set maxmemory-policy {SAFE_POLICY} to be safe",
    )


def assess_servers(policies: Mapping[str, str | None], allow_evicting: bool) -> EvictionVerdict:
    """The worst verdict over servers (node name -> policy); with several servers the
    message names the node it is about. No server at all is ``unknown``."""
    if not policies:
        return assess(None, allow_evicting)
    verdicts = {node: assess(policy, allow_evicting) for node, policy in policies.items()}
    node, worst = max(verdicts.items(), key=lambda item: RANK[item[1].level])
    if len(verdicts) == 1 and not node:
        return worst
    return EvictionVerdict(
        worst.level, worst.policy, f"primary {node}: {worst.message}", worst.accepted
    )


def _policy_of(info: Mapping[str, Any]) -> str | None:
    value = info.get("maxmemory_policy")
    return str(value) if value else None


def read_policies(client: RedisClient) -> dict[str, str | None]:
    """``maxmemory_policy`` from ``INFO memory``: ``{"": policy}`` for one server, one entry
    per primary (by node name) on a cluster. ``None`` where the server does not report it
    or the user may not read the section (a note, not an error). Connection errors
    propagate."""
    try:
        if isinstance(client, RedisCluster):
            per_node = client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            if per_node and all(isinstance(v, Mapping) for v in per_node.values()):
                return {str(node): _policy_of(info) for node, info in per_node.items()}
            return {"": _policy_of(per_node)}  # redis-py's flat reply of a single primary
        return {"": _policy_of(client.info("memory"))}
    except redis.ResponseError:  # NOPERM, or INFO refused by a proxy
        return {"": None}


def server_verdict(client: RedisClient, allow_evicting: bool) -> EvictionVerdict:
    """The verdict on the server (or the worst primary) behind ``client``."""
    return assess_servers(read_policies(client), allow_evicting)
