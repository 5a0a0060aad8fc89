-- lua/lib/bucket.lua: the token bucket's arithmetic, in one place for every script that touches a
-- bucket (tenant_admit.lua, tenant_lease.lua). The build puts this text where a script says
-- "-- include: lib/bucket.lua" (core/embed_scripts.cmake), so the scripts cannot drift apart.
--
-- A bucket is one string key: the instant it is full again, "<seconds><9 digits of ns>" since the epoch,
-- and on a tenant's own bucket perhaps the bare mark after it (below); an absent key is a full bucket (an unknown tenant starts full). Numbers are integers below 2^53
-- (micro-tokens, ns of debt: a policy rule keeps refills under 90 days), which Lua's doubles hold
-- exactly, and numbers sent back to Redis are formatted with %d, never with Lua's default %.14g.
-- Crediting rounds down and debiting rounds up: never in the tenant's favour.
local rcall = redis.call

-- The clock: Redis' TIME, or with redis.clock "client" the caller's, in us after an '@' in `flags`
-- (the script's first argument). Returns seconds and microseconds.
local function bucket_clock(flags)
  local at = string.find(flags, '@', 1, true)
  if at then
    local us = tonumber(string.sub(flags, at + 1))
    local s = math.floor(us / 1000000)
    return s, us - s * 1000000
  end
  local t = rcall('TIME')
  return tonumber(t[1]), tonumber(t[2])
end

-- A bucket that tenant_admit.lua wrote when the tenant had no control record ends in '.' (the "bare" mark):
-- the next admit reads the bucket alone, where it would also look for the record. Only tenant_admit.lua
-- writes the mark, having found no record or read the mark; the admin API takes it off right after it
-- writes a record, on the same connection (redis_admin.cpp), so that every admit after that looks for it.
-- Every other write of a bucket (a lease, an acquire's reservation, its give-back) leaves it off.
local BARE = string.byte('.')

-- The bucket at sec/usec: its debt (ns until it is full again, 0 when full), the whole second of the instant
-- stored (-1 when none was), which decides whether a write keeps the key's TTL, and whether it had the bare
-- mark. The debt that m micro-tokens are worth is math.ceil(m * 1e9 / rate_m) to take them and
-- math.floor(m * 1e9 / rate_m) to give them back.
local function bucket_load(key, sec, usec)
  local debt, full_s, bare = 0, -1, false
  local full_at = rcall('GET', key)
  if full_at then
    if string.byte(full_at, -1) == BARE then
      bare = true
      full_at = string.sub(full_at, 1, -2)
    end
    local s = tonumber(string.sub(full_at, 1, -10))
    if s then
      full_s = s
      debt = (s - sec) * 1e9 + tonumber(string.sub(full_at, -9)) - usec * 1000
      if debt < 0 then debt = 0 end
    end
  end
  return debt, full_s, bare
end

-- The micro-tokens a bucket with `debt` holds.
local function bucket_tokens(debt, rate_m, burst_m)
  local lack = math.floor(debt * rate_m / 1e9)
  return lack < burst_m and burst_m - lack or 0
end

-- The bucket at sec/usec: its debt, the micro-tokens it holds, full_s and the bare mark (bucket_load).
local function bucket_read(key, sec, usec, rate_m, burst_m)
  local debt, full_s, bare = bucket_load(key, sec, usec)
  return debt, bucket_tokens(debt, rate_m, burst_m), full_s, bare
end

-- Stores a bucket `debt` ns from sec/usec. The key expires at the start of the second after the one in
-- which it is full again, plus a second (2 s after the whole second of full_at). That instant only
-- changes when full_at moves into another second, so most writes keep the TTL (SET KEEPTTL) instead of
-- setting a new one, which costs Redis a third of the SET. A key not written with this rule (an older
-- floodwall wrote full_at + 1 s) is safe too: a full_at in the same second is never later than that.
-- A debt of 0 deletes the key (full again). TTLs only collect garbage, never limit. `bare`: the bare mark
-- (tenant_admit.lua alone).
local function bucket_write(key, debt, sec, usec, full_s, bare)
  if debt == 0 then
    rcall('DEL', key)
    return
  end
  local ns = usec * 1000 + debt
  local s = math.floor(ns / 1e9)
  ns = ns - s * 1e9
  if ns < 0 then s, ns = s - 1, ns + 1e9 elseif ns >= 1e9 then s, ns = s + 1, ns - 1e9 end
  s = sec + s
  local v = string.format(bare and '%d%09d.' or '%d%09d', s, ns)
  if s == full_s then
    rcall('SET', key, v, 'KEEPTTL')
  else
    rcall('SET', key, v, 'PXAT', string.format('%d', (s + 2) * 1000))
  end
end
