#include "scripts.hpp"

#include <initializer_list>
#include <string>

namespace relay::cluster {
namespace {

// Every script's KEYS, all of one API key (hash tag {name}):
//   1 kr:{name}      hash: rq/rt request bucket level and time (µs), tq/tt
//                    the token bucket's, n slots in use, p last purge and
//                    x last expiry refresh (ms)
//   2 kr:{name}:l    sorted set of leases, score = expiry (ms). A running
//                    request's member is "<id> <slot 0/1> <usd> <in> <out>
//                    <period start>" (what it holds); "x <member>" is one
//                    whose lease expired (a late settle still charges, once);
//                    "c <id>" marks a replayed charge as applied
//   3 kr:{name}:b:   prefix of the budget hash of a period (start appended):
//                    su/si/so settled nano-USD / input / output tokens,
//                    cu/ci/co the same plus what running requests hold
//
// Each script makes as few calls as it can (each costs about 1.5 µs of
// Redis's time): values are read once, computed in Lua, written once.

// Shared by the scripts: the clock, period starts, buckets, lease purge.
constexpr std::string_view kCommon = R"LUA(
local t = redis.call('TIME')
local secs = tonumber(t[1])
local now = secs * 1000000 + tonumber(t[2])
local nowms = math.floor(now / 1000)

-- Integers above 1e14 would print in exponent form: format them ourselves.
local function num(s) return string.format('%.17g', s) end

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

local function split(s)
  local out = {}
  for w in string.gmatch(s, '%S+') do out[#out + 1] = w end
  return out
end

local cf, sf = {'cu', 'ci', 'co'}, {'su', 'si', 'so'}

local function expireBudget(bk, period)
  if period == 0 then redis.call('EXPIRE', bk, 3 * 86400)
  elseif period == 1 then redis.call('EXPIRE', bk, 40 * 86400) end
end

-- Leases of replicas that died (at most 64 per call, at most once a second
-- per key): their budget holds come back, their slots are counted free, and
-- each stays an hour as a tombstone so that a late settle still charges.
-- Returns the slots freed.
local function purge()
  local freed = 0
  local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', nowms, 'LIMIT', 0, 64)
  for _, m in ipairs(expired) do
    redis.call('ZREM', KEYS[2], m)
    local kind = string.sub(m, 1, 2)
    if kind ~= 'x ' and kind ~= 'c ' then
      local p = split(m)
      freed = freed + tonumber(p[2])
      local bk = KEYS[3] .. p[6]
      for i = 1, 3 do
        if p[i + 2] ~= '0' then redis.call('HINCRBY', bk, cf[i], '-' .. p[i + 2]) end
      end
      redis.call('ZADD', KEYS[2], num(nowms + 3600000), 'x ' .. m)
    end
  end
  return freed
end
)LUA";

// ARGV: 1 lease id, 2 lease ms, 3 rpm, 4 rpm burst, 5 tpm, 6 tpm burst,
//       7 tokens, 8 concurrency, 9 hold a slot (0/1), 10 budget mode (0
//       none, 1 reserve, 2 refuse once spent), 11 period (0 day, 1 month,
//       2 total), 12-14 caps usd (nano) / input / output (-1 none), 15-17
//       ask usd / input / output, 18 the period start this replica knows,
//       19-21 its last known spend in it (a floor: a Redis that restarted
//       empty does not hand a spent budget back), 22 write a lease (0/1)
// Reply: {status, wait us, requests left, requests full in us, tokens left,
//         tokens full in us, period start, budget left, spent usd, spent
//         input, spent output, the lease's member (admitted with a lease)}
constexpr std::string_view kAdmit = R"LUA(
local id, lease = ARGV[1], tonumber(ARGV[2])
local rpm, rcap, tpm, tcap = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local ask = tonumber(ARGV[7])
local conc = tonumber(ARGV[8])
local slot = (ARGV[9] == '1' and conc > 0) and 1 or 0
local mode, period = tonumber(ARGV[10]), tonumber(ARGV[11])

local st = redis.call('HMGET', KEYS[1], 'rq', 'rt', 'tq', 'tt', 'n', 'p', 'x')
local fields = {}
local freed = 0
if nowms - tonumber(st[6] or 0) >= 1000 then
  freed = purge()
  fields[#fields + 1] = 'p'; fields[#fields + 1] = num(nowms)
end
local inUse = tonumber(st[5] or 0) - freed
if inUse < 0 then inUse = 0 end
if freed > 0 then fields[#fields + 1] = 'n'; fields[#fields + 1] = inUse end
local rl = rpm > 0 and level(st[1], st[2], rcap, rpm) or 0
local tl = tpm > 0 and level(st[3], st[4], tcap, tpm) or 0

local ps, bk = 0, nil
local spent, committed = {0, 0, 0}, {0, 0, 0}
local budgetFields = {}
if mode ~= 0 then
  ps = pstart(period)
  bk = KEYS[3] .. ps
  local b = redis.call('HMGET', bk, 'cu', 'ci', 'co', 'su', 'si', 'so')
  for i = 1, 3 do
    committed[i] = tonumber(b[i] or 0)
    spent[i] = tonumber(b[i + 3] or 0)
  end
  if tonumber(ARGV[18]) == ps then
    for i = 1, 3 do
      local floor = tonumber(ARGV[18 + i])
      if floor > spent[i] then
        committed[i] = committed[i] + floor - spent[i]
        spent[i] = floor
        budgetFields[#budgetFields + 1] = sf[i]; budgetFields[#budgetFields + 1] = num(spent[i])
        budgetFields[#budgetFields + 1] = cf[i]; budgetFields[#budgetFields + 1] = num(committed[i])
      end
    end
  end
end

local function finish(status, wait, left, member)
  if #fields > 0 then redis.call('HSET', KEYS[1], unpack(fields)) end
  if #budgetFields > 0 then redis.call('HSET', bk, unpack(budgetFields)) end
  -- Expiries are refreshed every 10 s per key, not on every call.
  if nowms - tonumber(st[7] or 0) >= 10000 then
    redis.call('HSET', KEYS[1], 'x', num(nowms))
    local ttl = lease * 2 + 120000
    if rpm > 0 then ttl = ttl + math.ceil(rcap * 60000 / rpm) end
    if tpm > 0 then ttl = ttl + math.ceil(tcap * 60000 / tpm) end
    redis.call('PEXPIRE', KEYS[1], num(ttl))
    redis.call('PEXPIRE', KEYS[2], num(lease * 2 + 3720000))
    if bk then expireBudget(bk, period) end
  end
  local rfull = rpm > 0 and waitFor(rl, rcap, rpm) or 0
  local tfull = tpm > 0 and waitFor(tl, tcap, tpm) or 0
  return {status, wait, math.floor(rl), rfull, math.floor(tl), tfull, ps, left,
          spent[1], spent[2], spent[3], member}
end

-- Everything is checked before anything is taken: a refusal leaves no trace.
if mode ~= 0 then
  for i = 1, 3 do
    local cap = tonumber(ARGV[11 + i])
    if cap >= 0 then
      local want = mode == 1 and tonumber(ARGV[14 + i]) or 0
      if committed[i] + want > cap or (mode == 2 and committed[i] >= cap) then
        local left = cap - committed[i]
        if left < 0 then left = 0 end
        return finish(4 + i, 0, left, '')
      end
    end
  end
end
if tpm > 0 and ask > tcap then return finish(3, 0, 0, '') end
local rwait = rpm > 0 and waitFor(rl, 1, rpm) or 0
local twait = tpm > 0 and waitFor(tl, ask, tpm) or 0
if rwait > 0 or twait > 0 then
  if rwait >= twait then return finish(1, rwait, 0, '') end
  return finish(2, twait, 0, '')
end
if slot == 1 and inUse >= conc then return finish(4, 0, 0, '') end

-- Admitted: take from each; a lease when something must be given back.
if rpm > 0 then
  rl = rl - 1
  fields[#fields + 1] = 'rq'; fields[#fields + 1] = num(rl)
  fields[#fields + 1] = 'rt'; fields[#fields + 1] = num(now)
end
if tpm > 0 then
  tl = tl - ask
  fields[#fields + 1] = 'tq'; fields[#fields + 1] = num(tl)
  fields[#fields + 1] = 'tt'; fields[#fields + 1] = num(now)
end
if slot == 1 then
  fields[#fields + 1] = 'n'; fields[#fields + 1] = inUse + 1
end
local held = {'0', '0', '0'}
if mode == 1 then
  held = {ARGV[15], ARGV[16], ARGV[17]}
  for i = 1, 3 do
    if held[i] ~= '0' then
      committed[i] = committed[i] + tonumber(held[i])
      budgetFields[#budgetFields + 1] = cf[i]; budgetFields[#budgetFields + 1] = num(committed[i])
    end
  end
end
local member = ''
if ARGV[22] == '1' then
  member = id .. ' ' .. slot .. ' ' .. held[1] .. ' ' .. held[2] .. ' ' .. held[3] .. ' ' .. ps
  redis.call('ZADD', KEYS[2], num(nowms + lease), member)
end
return finish(0, 0, 0, member)
)LUA";

// Adds one request's cost to the current period's budget hash (read once,
// written once). `heldIn`: the period its hold was taken in, whose
// committed figures give the hold back (nil for none). `settledIn`: the
// start of the period the settlement was made in, by the replica's clock:
// an earlier one than Redis's (a settlement replayed after an outage that
// crossed a period's end, or one made in a period's last instant) is
// charged there, as the replica's own budget charged it; never one before
// `admittedIn`, the period Redis admitted the request in (a replica whose
// clock is behind must not move spend out of the period that admitted it,
// past its cap). Returns the share of a cap now spent when this carried
// spend across 80 % of it (parts per million), else -1 (always for an
// earlier period: that period is over).
constexpr std::string_view kSpend = R"LUA(
local function spend(period, amounts, caps, held, heldIn, settledIn, admittedIn)
  local ps = pstart(period)
  local at = tonumber(settledIn)
  local admitted = tonumber(admittedIn)
  if at ~= nil and admitted ~= nil and at < admitted then at = admitted end
  local earlier = at ~= nil and at >= 0 and at < ps
  if earlier then ps = at end
  local bk = KEYS[3] .. ps
  local sameHold = heldIn ~= nil and tonumber(heldIn) == ps
  if heldIn ~= nil and not sameHold then
    local old = KEYS[3] .. heldIn
    for i = 1, 3 do
      if held[i] ~= '0' then redis.call('HINCRBY', old, cf[i], '-' .. held[i]) end
    end
  end
  local b = redis.call('HMGET', bk, 'su', 'si', 'so', 'cu', 'ci', 'co')
  local out = {}
  local crossed = -1
  for i = 1, 3 do
    local a = tonumber(amounts[i])
    local h = sameHold and tonumber(held[i]) or 0
    if a ~= 0 or h ~= 0 then
      local before = tonumber(b[i] or 0)
      local after = before + a
      out[#out + 1] = sf[i]; out[#out + 1] = num(after)
      out[#out + 1] = cf[i]; out[#out + 1] = num(tonumber(b[i + 3] or 0) + a - h)
      local cap = tonumber(caps[i])
      if cap > 0 and a > 0 and before < 0.8 * cap and after >= 0.8 * cap then
        crossed = math.max(crossed, math.floor(after * 1000000 / cap))
      end
    end
  end
  if earlier then crossed = -1 end
  if #out > 0 then
    redis.call('HSET', bk, unpack(out))
    -- A period's first spend gives its hash an expiry (admissions refresh it).
    if not b[1] and not b[4] then expireBudget(bk, period) end
  end
  return crossed
end
)LUA";

// ARGV: 1 the lease's member (or "?<id>": find it, for an admission whose
// answer never came), 2 reserved tokens, 3 used tokens, 4 tpm, 5 tpm burst,
// 6 period, 7-9 cost usd (nano) / input / output, 10-12 caps, 13 budget
// (0/1: whether the key has one), 14 the period start the settlement was
// made in (Unix seconds, the replica's clock).
// Reply: {applied (0/1), crossed ppm or -1}
constexpr std::string_view kSettle = R"LUA(
local member = ARGV[1]
if string.sub(member, 1, 1) == '?' then
  local id = string.sub(member, 2) .. ' '
  member = nil
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if string.sub(m, 1, #id) == id then member = m break end
  end
  if not member then return {0, -1} end
end
local tomb = false
if redis.call('ZREM', KEYS[2], member) == 0 then
  if redis.call('ZREM', KEYS[2], 'x ' .. member) == 0 then return {0, -1} end
  tomb = true  -- its slot and hold went back when the lease expired
end
local p = split(member)
local fields = {}
local reserved, used = tonumber(ARGV[2]), tonumber(ARGV[3])
local tpm, tcap = tonumber(ARGV[4]), tonumber(ARGV[5])
local freeSlot = not tomb and p[2] == '1'
if freeSlot or (tpm > 0 and reserved ~= used) then
  local st = redis.call('HMGET', KEYS[1], 'n', 'tq', 'tt')
  if freeSlot then
    local n = tonumber(st[1] or 1) - 1
    if n < 0 then n = 0 end
    fields[#fields + 1] = 'n'; fields[#fields + 1] = n
  end
  if tpm > 0 and reserved ~= used then
    local v = level(st[2], st[3], tcap, tpm) + reserved - used
    if v > tcap then v = tcap end
    fields[#fields + 1] = 'tq'; fields[#fields + 1] = num(v)
    fields[#fields + 1] = 'tt'; fields[#fields + 1] = num(now)
  end
  redis.call('HSET', KEYS[1], unpack(fields))
end
local crossed = -1
if ARGV[13] == '1' then
  local held = {p[3], p[4], p[5]}
  crossed = spend(tonumber(ARGV[6]), {ARGV[7], ARGV[8], ARGV[9]}, {ARGV[10], ARGV[11], ARGV[12]},
                  held, (not tomb) and p[6] or nil, ARGV[14], p[6])
end
return {1, crossed}
)LUA";

// ARGV: 1 id, 2 period, 3-5 cost, 6-8 caps, 9 the period start the
// settlement was made in (as kSettle's 14).
constexpr std::string_view kCharge = R"LUA(
if redis.call('ZADD', KEYS[2], 'NX', num(nowms + 3600000), 'c ' .. ARGV[1]) == 0 then
  return {0, -1}
end
local crossed = spend(tonumber(ARGV[2]), {ARGV[3], ARGV[4], ARGV[5]},
                      {ARGV[6], ARGV[7], ARGV[8]}, {'0', '0', '0'}, nil, ARGV[9], nil)
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

// KEYS: 1 the key's hash, 2 its leases. ARGV: 1 the lease's member, 2 lease
// ms. Keeps the key's state from expiring while the request runs.
constexpr std::string_view kRenew = R"LUA(
local t = redis.call('TIME')
local ms = math.floor(tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], 'XX', string.format('%.17g', ms + lease), ARGV[1])
redis.call('PEXPIRE', KEYS[2], string.format('%.17g', lease * 2 + 3720000))
if redis.call('PTTL', KEYS[1]) < lease * 2 then
  redis.call('PEXPIRE', KEYS[1], string.format('%.17g', lease * 2 + 120000))
end
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
