#include "scripts.hpp"

#include <initializer_list>
#include <string>

namespace relay::cluster {
namespace {

// Shared by every script: the clock, period starts, token buckets.
constexpr std::string_view kCommon = R"LUA(
local t = redis.call('TIME')
local secs = tonumber(t[1])
local now = secs * 1000000 + tonumber(t[2])
local nowms = math.floor(now / 1000)

-- Start (Unix seconds) of the UTC day (0), month (1) or total (2) period.
local function pstart(p)
  if p == 2 then return 0 end
  local days = math.floor(secs / 86400)
  if p == 0 then return days * 86400 end
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
                          - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  return (days - (doy - math.floor((153 * mp + 2) / 5))) * 86400
end

-- A bucket's level now: refilled at perMin per minute up to cap; a missing
-- bucket is full. A clock that went back (a failover) refills nothing.
local function level(l, ts, cap, perMin)
  if not l then return cap end
  local dt = now - tonumber(ts)
  if dt < 0 then dt = 0 end
  local v = tonumber(l) + dt * perMin / 60000000
  if v > cap then v = cap end
  return v
end

-- Microseconds until a bucket at v holds n.
local function waitFor(v, n, perMin)
  if v >= n then return 0 end
  return math.ceil((n - v) * 60000000 / perMin)
end

local function num(s) return string.format('%.17g', s) end

local function split(s)
  local out = {}
  for w in string.gmatch(s, '%S+') do out[#out + 1] = w end
  return out
end
)LUA";

// KEYS: 1 buckets (hash), 2 slots (zset), 3 ledger (hash), 4 lease expiries
//       (zset), 5 budget hash prefix (the period start is appended)
// ARGV: 1 lease id, 2 lease ms, 3 rpm, 4 rpm burst, 5 tpm, 6 tpm burst,
//       7 tokens, 8 concurrency, 9 hold a slot (0/1), 10 budget mode (0 none,
//       1 reserve, 2 refuse once spent), 11 period (0 day, 1 month, 2 total),
//       12-14 caps usd (nano) / input / output (-1 none), 15-17 ask usd /
//       input / output, 18 the period start this replica knows, 19-21 its
//       last known spend usd / input / output in it (a floor)
// Reply: {status, wait us, requests left, requests full in us, tokens left,
//         tokens full in us, period start, budget left, spent usd, spent
//         input, spent output}
constexpr std::string_view kAdmit = R"LUA(
local id, lease = ARGV[1], tonumber(ARGV[2])
local rpm, rcap, tpm, tcap = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local ask = tonumber(ARGV[7])
local conc, slot = tonumber(ARGV[8]), ARGV[9] == '1'
local mode, period = tonumber(ARGV[10]), tonumber(ARGV[11])
local caps = {tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])}
local asks = {tonumber(ARGV[15]), tonumber(ARGV[16]), tonumber(ARGV[17])}
local fields = {'cu', 'ci', 'co'}

-- Leases of replicas that died: their holds go back to the budget; the
-- ledger keeps a tombstone for an hour so that a late settle still charges.
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', nowms, 'LIMIT', 0, 64)
for _, lid in ipairs(expired) do
  local h = redis.call('HGET', KEYS[3], lid)
  if h and string.sub(h, 1, 1) ~= 'x' and h ~= 'c' then
    local p = split(h)
    local bk = KEYS[5] .. p[4]
    for i = 1, 3 do
      if p[i] ~= '0' then redis.call('HINCRBY', bk, fields[i], '-' .. p[i]) end
    end
    redis.call('HSET', KEYS[3], lid, 'x ' .. h)
    redis.call('ZADD', KEYS[4], num(nowms + 3600000), lid)
  else
    redis.call('HDEL', KEYS[3], lid)
    redis.call('ZREM', KEYS[4], lid)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', nowms)

local ps = pstart(period)
local bk = KEYS[5] .. ps
-- The spend this replica last saw for this period is a floor: a Redis that
-- restarted empty (or lost a write) does not hand a spent budget back.
if tonumber(ARGV[18]) == ps then
  local cur = redis.call('HMGET', bk, 'su', 'si', 'so')
  local sf, cf = {'su', 'si', 'so'}, {'cu', 'ci', 'co'}
  for i = 1, 3 do
    local floor = tonumber(ARGV[18 + i])
    local have = tonumber(cur[i] or 0)
    if floor > have then
      local d = string.format('%.17g', floor - have)
      redis.call('HINCRBY', bk, sf[i], d)
      redis.call('HINCRBY', bk, cf[i], d)
    end
  end
end
local b = redis.call('HMGET', bk, 'cu', 'ci', 'co', 'su', 'si', 'so')
local committed = {tonumber(b[1] or 0), tonumber(b[2] or 0), tonumber(b[3] or 0)}
local spent = {tonumber(b[4] or 0), tonumber(b[5] or 0), tonumber(b[6] or 0)}

local st = redis.call('HMGET', KEYS[1], 'rq', 'rt', 'tq', 'tt')
local rl = rpm > 0 and level(st[1], st[2], rcap, rpm) or 0
local tl = tpm > 0 and level(st[3], st[4], tcap, tpm) or 0

local function reply(status, wait, left)
  local rfull = rpm > 0 and waitFor(rl, rcap, rpm) or 0
  local tfull = tpm > 0 and waitFor(tl, tcap, tpm) or 0
  return {status, wait, math.floor(rl), rfull, math.floor(tl), tfull, ps, left,
          spent[1], spent[2], spent[3]}
end

-- Budget first (as the local gate does): a refusal takes nothing.
if mode ~= 0 then
  for i = 1, 3 do
    local cap = caps[i]
    if cap >= 0 then
      local want = mode == 1 and asks[i] or 0
      if committed[i] + want > cap or (mode == 2 and committed[i] >= cap) then
        local left = cap - committed[i]
        if left < 0 then left = 0 end
        return reply(4 + i, 0, left)
      end
    end
  end
end
if tpm > 0 and ask > tcap then return reply(3, 0, 0) end
local rwait = rpm > 0 and waitFor(rl, 1, rpm) or 0
local twait = tpm > 0 and waitFor(tl, ask, tpm) or 0
if rwait > 0 or twait > 0 then
  if rwait >= twait then return reply(1, rwait, 0) end
  return reply(2, twait, 0)
end
if slot and conc > 0 and redis.call('ZCARD', KEYS[2]) >= conc then
  return reply(4, 0, 0)
end

-- Admitted: take from each, write the lease.
local ttl = 1000
if rpm > 0 then
  rl = rl - 1
  ttl = math.max(ttl, math.ceil(waitFor(rl, rcap, rpm) / 1000))
  redis.call('HSET', KEYS[1], 'rq', num(rl), 'rt', num(now))
end
if tpm > 0 then
  tl = tl - ask
  ttl = math.max(ttl, math.ceil(waitFor(tl, tcap, tpm) / 1000))
  redis.call('HSET', KEYS[1], 'tq', num(tl), 'tt', num(now))
end
if rpm > 0 or tpm > 0 then redis.call('PEXPIRE', KEYS[1], num(ttl + 60000)) end
if slot and conc > 0 then
  redis.call('ZADD', KEYS[2], num(nowms + lease), id)
  redis.call('PEXPIRE', KEYS[2], num(lease * 2))
end
-- Amounts stay strings: Lua would print a number above 1e14 in exponent form.
local held = {'0', '0', '0'}
if mode == 1 then held = {ARGV[15], ARGV[16], ARGV[17]} end
for i = 1, 3 do
  if held[i] ~= '0' then redis.call('HINCRBY', bk, fields[i], held[i]) end
end
if period == 0 then redis.call('EXPIRE', bk, 3 * 86400)
elseif period == 1 then redis.call('EXPIRE', bk, 40 * 86400) end
redis.call('HSET', KEYS[3], id, held[1] .. ' ' .. held[2] .. ' ' .. held[3] .. ' ' .. ps)
redis.call('ZADD', KEYS[4], num(nowms + lease), id)
redis.call('PEXPIRE', KEYS[3], num(lease * 2 + 3600000))
redis.call('PEXPIRE', KEYS[4], num(lease * 2 + 3600000))
return reply(0, 0, 0)
)LUA";

// The spend of one request into the current period; returns the share of a
// cap now spent when this carried spend across 80 % of it (parts per million),
// else -1.
constexpr std::string_view kSpend = R"LUA(
local function spend(bkPrefix, period, amounts, caps)
  local ps = pstart(period)
  local bk = bkPrefix .. ps
  local before = redis.call('HMGET', bk, 'su', 'si', 'so')
  local sf, cf = {'su', 'si', 'so'}, {'cu', 'ci', 'co'}
  local crossed = -1
  for i = 1, 3 do
    local a = tonumber(amounts[i])
    if a > 0 then
      redis.call('HINCRBY', bk, sf[i], amounts[i])
      redis.call('HINCRBY', bk, cf[i], amounts[i])
      local cap = caps[i]
      local b = tonumber(before[i] or 0)
      if cap > 0 and b < 0.8 * cap and b + a >= 0.8 * cap then
        crossed = math.max(crossed, math.floor((b + a) * 1000000 / cap))
      end
    end
  end
  if period == 0 then redis.call('EXPIRE', bk, 3 * 86400)
  elseif period == 1 then redis.call('EXPIRE', bk, 40 * 86400) end
  return crossed
end
)LUA";

// KEYS: as admit. ARGV: 1 lease id, 2 reserved tokens, 3 used tokens, 4 tpm,
// 5 tpm burst, 6 period, 7-9 cost usd (nano) / input / output, 10-12 caps.
// Reply: {applied (0/1), crossed ppm or -1}
constexpr std::string_view kSettle = R"LUA(
local id = ARGV[1]
redis.call('ZREM', KEYS[2], id)
local h = redis.call('HGET', KEYS[3], id)
if not h or h == 'c' then return {0, -1} end
redis.call('HDEL', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
local p = split(h)
if p[1] ~= 'x' then
  local bk = KEYS[5] .. p[4]
  local cf = {'cu', 'ci', 'co'}
  for i = 1, 3 do
    if p[i] ~= '0' then redis.call('HINCRBY', bk, cf[i], '-' .. p[i]) end
  end
end
local reserved, used = tonumber(ARGV[2]), tonumber(ARGV[3])
local tpm, tcap = tonumber(ARGV[4]), tonumber(ARGV[5])
if tpm > 0 and reserved ~= used then
  local st = redis.call('HMGET', KEYS[1], 'tq', 'tt')
  local v = level(st[1], st[2], tcap, tpm) + reserved - used
  if v > tcap then v = tcap end
  redis.call('HSET', KEYS[1], 'tq', num(v), 'tt', now)
  redis.call('PEXPIRE', KEYS[1], num(math.ceil(waitFor(v, tcap, tpm) / 1000) + 60000))
end
local crossed = spend(KEYS[5], tonumber(ARGV[6]), {ARGV[7], ARGV[8], ARGV[9]},
                      {tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])})
return {1, crossed}
)LUA";

// KEYS: 3 ledger, 4 lease expiries, 5 budget prefix (1-2 unused, kept for
// the same key layout). ARGV: 1 id, 2 period, 3-5 cost, 6-8 caps.
constexpr std::string_view kCharge = R"LUA(
local id = ARGV[1]
if redis.call('HSETNX', KEYS[3], id, 'c') == 0 then return {0, -1} end
redis.call('ZADD', KEYS[4], num(nowms + 3600000), id)
redis.call('PEXPIRE', KEYS[3], 7200000)
redis.call('PEXPIRE', KEYS[4], 7200000)
local crossed = spend(KEYS[5], tonumber(ARGV[2]), {ARGV[3], ARGV[4], ARGV[5]},
                      {tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])})
return {1, crossed}
)LUA";

// KEYS: 1 one period's budget hash. ARGV: 1-3 spend usd (nano) / input /
// output that this replica knows of; Redis's figures are raised to them.
constexpr std::string_view kFloor = R"LUA(
local cur = redis.call('HMGET', KEYS[1], 'su', 'si', 'so')
local sf, cf = {'su', 'si', 'so'}, {'cu', 'ci', 'co'}
local raised = 0
for i = 1, 3 do
  local floor = tonumber(ARGV[i])
  local have = tonumber(cur[i] or 0)
  if floor > have then
    local d = string.format('%.17g', floor - have)
    redis.call('HINCRBY', KEYS[1], sf[i], d)
    redis.call('HINCRBY', KEYS[1], cf[i], d)
    raised = 1
  end
end
return raised
)LUA";

// KEYS: 2 slots, 4 lease expiries (others unused). ARGV: 1 id, 2 lease ms.
constexpr std::string_view kRenew = R"LUA(
local t = redis.call('TIME')
local until_ms = string.format('%.17g', math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
                                         + tonumber(ARGV[2]))
redis.call('ZADD', KEYS[2], 'XX', until_ms, ARGV[1])
redis.call('ZADD', KEYS[4], 'XX', until_ms, ARGV[1])
return 1
)LUA";

std::string join(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts)
    out += p;
  return out;
}

const std::string kAdmitText = join({kCommon, kAdmit});
const std::string kSettleText = join({kCommon, kSpend, kSettle});
const std::string kChargeText = join({kCommon, kSpend, kCharge});

}  // namespace

const Script kAdmitScript{"admit", kAdmitText};
const Script kSettleScript{"settle", kSettleText};
const Script kChargeScript{"charge", kChargeText};
const Script kRenewScript{"renew", kRenew};
const Script kFloorScript{"floor", kFloor};

}  // namespace relay::cluster
