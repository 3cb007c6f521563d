"""The alert cool-down, kept in Redis so a restarted sensor process does not re-send.

One key per condition holds the severity rank last sent and expires after the
cool-down. The decision is one Lua script, so two sensor processes racing on the same
condition send it once.
"""

from __future__ import annotations

from sentinel_platform.streams.plumbing.connection import RedisClient

COOLDOWN_PREFIX = "sentinel:alert_cooldown:"

_ADMIT = """
local current = redis.call('GET', KEYS[1])
if (not current) or tonumber(ARGV[1]) > tonumber(current) then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  return 1
end
return 0
"""


class Cooldown:
    """Admit a condition once per window, or again when its severity worsens."""

    def __init__(self, client: RedisClient, cooldown_s: int, prefix: str = COOLDOWN_PREFIX):
        self._client = client
        self._cooldown_s = cooldown_s
        self._prefix = prefix
        self._script = client.register_script(_ADMIT) if cooldown_s > 0 else None

    def key(self, fingerprint: str) -> str:
        return f"{self._prefix}{fingerprint}"

    def admit(self, fingerprint: str, rank: int) -> bool:
        """True when the alert should be delivered now (and records that it was)."""
        if self._script is None:
            return True
        return bool(self._script(keys=[self.key(fingerprint)], args=[rank, self._cooldown_s]))
