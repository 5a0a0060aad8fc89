-- tenant_lease.lua: one process's lease on one tenant, settled atomically: what the process gives back
-- (the unspent tokens of its previous lease, slots it no longer holds) and what it takes (up to `want`
-- micro-tokens of the bucket, up to n slots of the concurrency set). A lease is not a request: nothing
-- here is rejected, each part grants what exists. The returns are unconditional, so they come first;
-- each grant is checked before it is written. Leased tokens are debited here, before the process spends
-- any of them, so the fleet never admits more than the bucket holds.
--
-- KEYS[1]  <prefix>:{<tenant>}:rate   the bucket (tenant_admit.lua): when it is full again (ns since the epoch)
-- KEYS[2]  <prefix>:{<tenant>}:conc   the tenant's in-flight slot ids scored by start time (us)
-- KEYS[3]  <prefix>:{<tenant>}:ctl    the tenant's control record (tenant_admit.lua): a tenant that has one
--          is never leased (its block, tier or override is read by each of its admits)
-- ARGV[1]  two characters: 'T' tokens are asked for ('-' not), 'S' slots are asked for ('-' not);
--          then, with redis.clock "client" only, '@' and the caller's clock in us since the epoch
-- ARGV[2]  rate, micro-tokens per second      ARGV[3]  burst, micro-tokens
-- ARGV[4]  min: grant no tokens unless the bucket holds at least this many (what the waiting request
--          lacks), micro-tokens, whole tokens
-- ARGV[5]  want: grant at most this many, micro-tokens, whole tokens
-- ARGV[6]  give back: unspent micro-tokens of the process's previous lease (credited, the bucket never
--          above its burst; the process never gives back more than it was granted)
-- ARGV[7]  concurrency limit                  ARGV[8]  concurrency ttl, us
-- ARGV[9]  n, how many slot ids are given back; ARGV[10 .. 9+n] those ids; ARGV[10+n ..] the ids asked for
--          (16 random bytes each; at most kMaxLeasedSlots)
-- Reply:   {micro-tokens granted, micro-tokens left in the bucket after (what it held when it granted
--          none), slots granted (the first ones asked for), the tenant's live slots after, Redis' TIME in
--          us (the instant all this was true, which the client translates to its own clock), 1 when the
--          tenant has a control record (nothing granted then), else 0}
--
-- The bucket's representation, arithmetic and TTL rule are lua/lib/bucket.lua's, shared with
-- tenant_admit.lua; Redis' TIME is the clock (or the caller's, with redis.clock "client").
-- include: lib/bucket.lua
local ASK_TOKENS, ASK_SLOTS = string.byte('T'), string.byte('S')
local a, b = string.byte(ARGV[1], 1, 2)
local tokens_asked, slots_asked = a == ASK_TOKENS, b == ASK_SLOTS
local controlled = rcall('EXISTS', KEYS[3])
if controlled == 1 then tokens_asked, slots_asked = false, false end

local sec, usec = bucket_clock(ARGV[1])

local granted, tokens = 0, 0
local give_m = tonumber(ARGV[6])
if tokens_asked or give_m > 0 then
  local rate_m, burst_m = tonumber(ARGV[2]), tonumber(ARGV[3])
  local debt, full_s
  debt, tokens, full_s = bucket_read(KEYS[1], sec, usec, rate_m, burst_m)
  local changed = false
  if give_m > 0 and debt > 0 and rate_m > 0 then
    debt = debt - math.floor(give_m * 1e9 / rate_m) -- a credit rounds down
    if debt < 0 then debt = 0 end -- full: what does not fit is gone
    tokens = burst_m - math.floor(debt * rate_m / 1e9)
    if tokens < 0 then tokens = 0 end
    changed = true
  end
  if tokens_asked and tokens >= tonumber(ARGV[4]) then
    local whole = math.floor(tokens / 1e6) * 1e6
    local want = tonumber(ARGV[5])
    granted = want < whole and want or whole
    if granted > 0 then
      tokens = tokens - granted
      debt = debt + math.ceil(granted * 1e9 / rate_m) -- a debit rounds up
      changed = true
    end
  end
  if changed then bucket_write(KEYS[1], debt, sec, usec, full_s) end  -- a debt of 0: full, the key goes
end

local n = tonumber(ARGV[9])
if n > 0 then rcall('ZREM', KEYS[2], unpack(ARGV, 10, 9 + n)) end
local slots, live = 0, 0
if slots_asked then
  local now, ttl = sec * 1000000 + usec, tonumber(ARGV[8])
  live = rcall('ZCOUNT', KEYS[2], string.format('(%d', now - ttl), '+inf')
  local free, asked = tonumber(ARGV[7]) - live, #ARGV - 9 - n
  slots = free < asked and free or asked
  if slots > 0 then
    -- Sweep the dead slots, add the leased ones, and let the set expire a second after its last slot would.
    rcall('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%d', now - ttl))
    local score, args = string.format('%d', now), {}
    for i = 1, slots do
      args[2 * i - 1] = score
      args[2 * i] = ARGV[9 + n + i]
    end
    rcall('ZADD', KEYS[2], unpack(args))
    rcall('PEXPIRE', KEYS[2], string.format('%d', math.ceil(ttl / 1000) + 1000))
    live = live + slots
  else
    slots = 0
  end
end
return {granted, tokens, slots, live, sec * 1000000 + usec, controlled}
