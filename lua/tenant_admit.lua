-- tenant_admit.lua: one request against the tenant's token bucket, the tenant's concurrency set and
-- the fleet set, decided atomically. Every check happens before the first write, and a request that
-- an enforcing limiter rejects writes nothing at all (no partial consumption).
--
-- KEYS[1]  <prefix>:{<tenant>}:rate   string "<micro-tokens>:<last refill, us>"
-- KEYS[2]  <prefix>:{<tenant>}:conc   sorted set of in-flight slot ids scored by start time (us)
-- KEYS[3]  <prefix>:fleet             sorted set of non-critical in-flight slot ids fleet-wide
-- ARGV[1]  six flags, '1' or '0': rate on, rate enforced, conc on, conc enforced, fleet on, fleet enforced
-- ARGV[2]  rate, micro-tokens per second      ARGV[3]  burst, micro-tokens     ARGV[4]  cost, micro-tokens
-- ARGV[5]  concurrency limit                  ARGV[6]  concurrency ttl, us
-- ARGV[7]  fleet capacity                     ARGV[8]  fleet ttl, us
-- ARGV[9]  the request's slot id (16 random bytes)
-- Reply:   {rate_ok, conc_ok, fleet_ok, committed, micro-tokens left, tenant in-flight, fleet in-flight}
--
-- The clock is Redis' TIME, so every app server of a fleet shares one clock. Numbers are integers
-- below 2^53 (micro-tokens, microseconds), which Lua's doubles hold exactly; numbers sent back to
-- Redis are formatted with %d, never with Lua's default %.14g.
local rcall = redis.call
local flags = ARGV[1]
local function on(i) return string.byte(flags, i) == 49 end
local rate_on, conc_on, fleet_on = on(1), on(3), on(5)

local t = rcall('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local rate_ok, conc_ok, fleet_ok = 1, 1, 1
local tokens, in_flight, fleet_count = 0, 0, 0
local rate_m, burst_m, cost_m
if rate_on then
  rate_m, burst_m, cost_m = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  tokens = burst_m -- an unknown tenant (or one whose key was collected) starts full
  local state = rcall('GET', KEYS[1])
  if state then
    local sep = string.find(state, ':', 1, true)
    tokens = math.min(tonumber(string.sub(state, 1, sep - 1)), burst_m)
    local elapsed = now - tonumber(string.sub(state, sep + 1))
    if elapsed > 0 then
      local gained = math.floor(elapsed * rate_m / 1000000)
      if gained >= burst_m - tokens then tokens = burst_m else tokens = tokens + gained end
    end
  end
  if tokens < cost_m then rate_ok = 0 end
end
-- Slots older than ttl belong to requests whose worker died: they no longer count.
local function live(key, ttl) return rcall('ZCOUNT', key, string.format('(%d', now - ttl), '+inf') end
local conc_ttl, fleet_ttl = tonumber(ARGV[6]), tonumber(ARGV[8])
if conc_on then
  in_flight = live(KEYS[2], conc_ttl)
  if in_flight >= tonumber(ARGV[5]) then conc_ok = 0 end
end
if fleet_on then
  fleet_count = live(KEYS[3], fleet_ttl)
  if fleet_count >= tonumber(ARGV[7]) then fleet_ok = 0 end
end

if (rate_on and on(2) and rate_ok == 0) or (conc_on and on(4) and conc_ok == 0) or
   (fleet_on and on(6) and fleet_ok == 0) then
  return {rate_ok, conc_ok, fleet_ok, 0, tokens, in_flight, fleet_count}
end

-- Writes from here on. TTLs only collect garbage: a bucket key outlives its refill to full.
if rate_on and rate_ok == 1 then
  tokens = tokens - cost_m
  local ttl_ms = math.ceil((burst_m - tokens) * 1000 / rate_m) + 1000
  rcall('SET', KEYS[1], string.format('%d:%d', tokens, now), 'PX', string.format('%d', ttl_ms))
end
-- Sweep the dead slots, add this request's, and let the set expire a second after its last slot would.
local function take_slot(key, ttl)
  rcall('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - ttl))
  rcall('ZADD', key, string.format('%d', now), ARGV[9])
  rcall('PEXPIRE', key, string.format('%d', math.ceil(ttl / 1000) + 1000))
end
if conc_on and conc_ok == 1 then
  take_slot(KEYS[2], conc_ttl)
  in_flight = in_flight + 1
end
if fleet_on and fleet_ok == 1 then
  take_slot(KEYS[3], fleet_ttl)
  fleet_count = fleet_count + 1
end
return {rate_ok, conc_ok, fleet_ok, 1, tokens, in_flight, fleet_count}
