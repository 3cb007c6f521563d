"""Lua scripts run by SHA, inside pipelines, on one server or a cluster.

redis-py's ``Script`` objects only preload themselves into plain pipelines, not cluster
pipelines, so the streams core loads its scripts once (SCRIPT LOAD reaches every primary
on a cluster) and sends EVALSHA. If a server forgets them (restart, SCRIPT FLUSH), the
caller reloads and re-runs: every script here is safe to run twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import redis
from redis.typing import EncodableT

from sentinel_platform.streams.plumbing.connection import RedisClient

T = TypeVar("T")

#: Lua prelude for scripts that write more than one key. Redis does not roll back a script
#: that fails half-way, so such a script calls ``wrong_type(key, kind)`` for every key it
#: will write before its first write, and returns the WRONGTYPE error it gives, if any.
WRONG_TYPE_CHECK = """
local function wrong_type(key, kind)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= kind then
    return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. found .. ', not a ' .. kind)
  end
  return false
end
"""


class LuaScript:
    """One script: its source, its SHA, and how to queue or run it."""

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def load(self, client: RedisClient) -> None:
        client.script_load(self.source)

    def queue(self, pipe: Any, keys: Sequence[str], args: Sequence[object]) -> None:
        """Add one call to a pipeline (plain or cluster)."""
        pipe.evalsha(self.sha, len(keys), *keys, *args)

    def run(self, client: RedisClient, keys: Sequence[str], args: Sequence[object]) -> Any:
        # Arguments are str/bytes/int/float in practice; redis-py raises DataError on others.
        values = cast("Sequence[EncodableT]", args)
        return with_scripts(
            client, [self], lambda: client.evalsha(self.sha, len(keys), *keys, *values)
        )


def with_scripts(client: RedisClient, scripts: Sequence[LuaScript], call: Callable[[], T]) -> T:
    """Run ``call``; on NOSCRIPT load ``scripts`` and run it once more."""
    try:
        return call()
    except redis.exceptions.NoScriptError:
        for script in scripts:
            script.load(client)
        return call()
