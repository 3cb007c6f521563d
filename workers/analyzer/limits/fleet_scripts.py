"""The fleet limits' two server-side scripts: the shared hold, set only if it ends later,
and the GCRA rate limiter (:class:`~workers.analyzer.limits.fleet_limits.FleetLimits`).
Each touches one key, so it runs on a Redis Cluster."""

from __future__ import annotations

from sentinel_platform.streams.plumbing.scripts import LuaScript

#: KEYS[1] the hold; ARGV[1] its length in ms (0: until released), ARGV[2] its record.
#: Never shortens a hold, and never puts an end to one that has none.
HOLD_SCRIPT = LuaScript(
    "analyzer_hold",
    """
local want = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left == -1 then
  return -1
end
if want == 0 then
  redis.call('SET', KEYS[1], ARGV[2])
  return -1
end
if left >= want then
  return left
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', want)
return want
""",
)

#: KEYS[1] the TAT, kept as the key's expiry time (ms, the server's clock) with the
#: sub-millisecond rest as its value (us); ARGV[1] the emission interval and ARGV[2] the
#: longest acceptable wait, both in us. Returns {reserved, wait in us}. The server's
#: clock is read through PTTL and PEXPIRETIME rather than TIME, which the least-privilege
#: ACL of the platform's Redis user does not grant; a missing key is an idle limiter.
GCRA_SCRIPT = LuaScript(
    "analyzer_gcra",
    """
local interval = tonumber(ARGV[1])
local max_wait = tonumber(ARGV[2])
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  local ms = math.floor(interval / 1000)
  redis.call('SET', KEYS[1], interval - ms * 1000, 'PX', ms)
  return {1, 0}
end
local rest = tonumber(redis.call('GET', KEYS[1])) or 0
local wait = left * 1000 + rest
if wait > max_wait then
  return {0, wait}
end
local tat = redis.call('PEXPIRETIME', KEYS[1]) * 1000 + rest + interval
local at = math.floor(tat / 1000)
redis.call('SET', KEYS[1], tat - at * 1000, 'PXAT', at)
return {1, wait}
""",
)
