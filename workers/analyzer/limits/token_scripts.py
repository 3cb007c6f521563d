"""The token budget's two server-side scripts: reserve a call's tokens on every limiter
at once, and settle them from what the API charged
(:class:`~workers.analyzer.limits.token_budget.TokenBudget`). Each runs on keys sharing
one hash tag, so on a Redis Cluster too."""

from __future__ import annotations

from sentinel_platform.streams.plumbing.scripts import LuaScript

#: KEYS[1] the configured tokens' TAT, KEYS[2] the announced requests' TAT (expiry =
#: TAT, value = the sub-ms rest in us), KEYS[3] today's tokens used, KEYS[4..6] the
#: announced tokens', input tokens' and output tokens' TATs, KEYS[7] the hash counting
#: the units reserved of each announced budget. ARGV: us per token (0: no limit), tokens,
#: us per request (0: not announced), longest wait (us), daily budget (0: none), the
#: window (us), then us per unit and units of each of KEYS[4..6]. The configured budget
#: paces strictly (a call waits for the TAT); an announced one is a bucket of one window
#: (a call waits until it holds the call's units). Returns {1, wait us, the counters of
#: requests, tokens, input, output after this call (-1: not paced)} reserved, {0, wait
#: us} too far, {-1, used} the daily budget is spent.
RESERVE_SCRIPT = LuaScript(
    "analyzer_tokens_reserve",
    """
local daily = tonumber(ARGV[5])
if daily > 0 then
  local used = tonumber(redis.call('GET', KEYS[3])) or 0
  if used >= daily then return {-1, used} end
end
local function ahead(key)
  local left = redis.call('PTTL', key)
  if left < 0 then return 0 end
  return left * 1000 + (tonumber(redis.call('GET', key)) or 0)
end
local function push(key, at)
  local ms = math.floor(at / 1000)
  if ms < 1 then redis.call('DEL', key) return end
  redis.call('SET', key, tostring(at - ms * 1000), 'PX', ms)
end
local window = tonumber(ARGV[6])
local paced = {
  {KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), false, ''},
  {KEYS[2], tonumber(ARGV[3]), 1, true, 'requests'},
  {KEYS[4], tonumber(ARGV[7]), tonumber(ARGV[8]), true, 'tokens'},
  {KEYS[5], tonumber(ARGV[9]), tonumber(ARGV[10]), true, 'input_tokens'},
  {KEYS[6], tonumber(ARGV[11]), tonumber(ARGV[12]), true, 'output_tokens'},
}
local wait, at = 0, {}
for i, p in ipairs(paced) do
  if p[2] > 0 then
    at[i] = ahead(p[1])
    local turn = at[i]
    if p[4] then turn = math.max(0, at[i] + math.min(p[2] * p[3], window) - window) end
    wait = math.max(wait, turn)
  end
end
if wait > tonumber(ARGV[4]) then return {0, math.floor(wait)} end
local reply = {1, math.floor(wait)}
for i, p in ipairs(paced) do
  if p[2] > 0 then push(p[1], math.max(at[i], wait) + p[2] * p[3]) end
  if i > 1 then
    local mark = -1
    if p[2] > 0 then mark = redis.call('HINCRBY', KEYS[7], p[5], p[3]) end
    reply[#reply + 1] = mark
  end
end
redis.call('PEXPIRE', KEYS[7], ARGV[13])
return reply
""",
)

#: KEYS[1] tokens' TAT, KEYS[2] today's tokens used. ARGV: us per token (0: no limit),
#: tokens returned (negative: charged on top), tokens used today. Returns today's total.
SETTLE_SCRIPT = LuaScript(
    "analyzer_tokens_settle",
    """
local per = tonumber(ARGV[1])
local back = tonumber(ARGV[2]) * per
if per > 0 and back ~= 0 then
  local left = redis.call('PTTL', KEYS[1])
  local at = -back
  if left >= 0 then at = left * 1000 + (tonumber(redis.call('GET', KEYS[1])) or 0) - back end
  local ms = math.floor(at / 1000)
  if ms < 1 then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], tostring(at - ms * 1000), 'PX', ms)
  end
end
local used = tonumber(ARGV[3])
if used > 0 then
  local total = redis.call('INCRBY', KEYS[2], used)
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return total
end
return tonumber(redis.call('GET', KEYS[2])) or 0
""",
)
