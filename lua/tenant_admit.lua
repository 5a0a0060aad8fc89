-- tenant_admit.lua: one request against the tenant's token bucket, the tenant's concurrency set and
-- the fleet set, decided atomically. Every check happens before the first write, and a request that
-- an enforcing limiter rejects writes nothing at all (no partial consumption).
--
-- KEYS[1]  <prefix>:{<tenant>}:rate   the bucket: one integer, when it is full again (ns since the epoch),
--                                     and the bare mark when the tenant had no control record (lib/bucket.lua)
-- KEYS[2]  <prefix>:{<tenant>}:conc   sorted set of in-flight slot ids scored by start time (us)
-- KEYS[3]  <prefix>:fleet             sorted set of non-critical in-flight slot ids fleet-wide
-- KEYS[4]  <prefix>:fleet:reports     (sent only when the policy leases) the fleet usage that clients
--                                     decide in process, reported by fleet_report.lua: its "sum" counts too
-- KEYS[#KEYS-n..#KEYS-1]  with n rules: each rule's key, <prefix>:{<tenant>}:limit:<name> (a bucket, as
--          KEYS[1]) or <prefix>:{<tenant>}:quota:<name> (lib/quota.lua)
-- KEYS[#KEYS]  <prefix>:{<tenant>}:ctl   the tenant's control record (a hash the admin API writes: tier,
--          rate and burst of a runtime override, block: until when, s since the epoch, 0 for good)
-- ARGV[1]  limiters, three characters: request rate, concurrency, fleet; each 'E' (enforce),
--          'D' (dark: decide, never reject) or '-' (not asked); then one character per rule of the policy
--          that applies (request_rate.limits, quotas): 'L' a limit, 'Q' a quota, lower case when dark
--          (before them, '!' when the control record is not read in this call: a Redis Cluster slot in
--          migration, ClusterStore::Split); then, for an acquire, '~' and its max wait in ns (docs/concepts/acquire.md); then, with
--          redis.clock "client" only, '@' and the caller's clock in us since the epoch
-- ARGV[2]  rate, micro-tokens per second      ARGV[3]  burst, micro-tokens     ARGV[4]  cost, micro-tokens
-- ARGV[5]  concurrency limit                  ARGV[6]  concurrency ttl, us
-- ARGV[7]  fleet capacity                     ARGV[8]  fleet ttl, us
-- ARGV[9]  the request's slot id (16 random bytes)
-- ARGV[10..] with rules: a limit's rate and burst (micro-tokens), a quota's limit (units), period (0 hour,
--          1 day, 2 month) and offset from UTC (s); in the order of their characters
-- ARGV[#ARGV]  the tier the client takes the tenant to be in ("" for none)
-- A request-rate-only admit sends KEYS[1], the control key and ARGV[1..4] and the tier; one with a slot or
-- a rule sends three keys (four when the policy leases) and all nine arguments, then the rules' keys and
-- arguments, then the control key and the tier.
-- Reply:   for a request-rate-only admit one integer, the micro-tokens left when the bucket had enough
--          and -1 - (the micro-tokens it has) when it had not (an array costs Redis a table and more
--          reply to write); the client knows the mode it sent, so whether the admit committed follows.
--          With a slot: {committed, rate_ok, micro-tokens left, conc_ok, tenant in-flight, fleet_ok}, then
--          per rule: ok, what it has left (micro-tokens, units), and a quota's seconds until its window ends
--          and that end (s since the epoch), 0 and 0 for a limit; then, when a runtime override of the bucket
--          applied, its rate and burst (a request-rate-only admit too answers with this array then).
--          The control record may answer first, nothing written: {'blocked', until (0: for good)}, or
--          {'tier', the tenant's tier} when it is not the client's (the client decides again with it).
--          An acquire is always answered with the array, and two integers more at its end: its turn (ns
--          from now, 0: go now) and TIME (us).
--
-- An acquire: the tenant's enforcing bucket, when it lacks the tokens now, reserves them from its turn if
-- that is within the max wait: the debt after taking, less a full bucket's refill. Every bucket that passes
-- (the limits' too) takes its tokens at that turn (its debt becomes max(debt, turn) + cost), so that the
-- requests that go in any window fit burst + rate x window. A turn beyond the max wait refuses as an admit
-- does, nothing written. Slots are scored from the turn. Limits, quotas, slots and the fleet never wait.
-- core/src/stores/rule_state.hpp (reserve_turn) is the same for memory:// and shm://.
--
-- The clock is Redis' TIME, so every app server of a fleet shares one clock (unless the policy says
-- redis.clock "client", for services that refuse TIME in scripts). The bucket's representation, its
-- arithmetic and its TTL rule are lua/lib/bucket.lua's, shared with tenant_lease.lua.
-- include: lib/bucket.lua
-- include: lib/quota.lua
local NOT_ASKED, ENFORCE = string.byte('-'), string.byte('E')
local flags = ARGV[1]
local r, c, f = string.byte(flags, 1, 3)
-- After the three: '!' when there is no control record key (a Redis Cluster slot in migration, where the
-- client read it with a call of its own first), then the rules. Most admits have neither.
local no_ctl, rule_spec, max_wait = false, '', 0
if #flags > 3 then
  no_ctl = string.sub(flags, 4, 4) == '!'
  local stop = string.find(flags, '[~@]', 4)
  rule_spec = string.sub(flags, no_ctl and 5 or 4, (stop or 0) - 1)
  if stop and string.sub(flags, stop, stop) == '~' then
    max_wait = tonumber(string.sub(flags, stop + 1, (string.find(flags, '@', stop, true) or 0) - 1)) or 0
  end
end
local rate_on, conc_on, fleet_on = r ~= NOT_ASKED, c ~= NOT_ASKED, f ~= NOT_ASKED

local sec, usec = bucket_clock(flags)

-- The tenant's bucket first: when it has the bare mark (lib/bucket.lua), the tenant has no control record,
-- and the record is not looked for (most tenants have none: one read where there were two).
local debt, full_s, bare = 0, -1, false
if rate_on then debt, full_s, bare = bucket_load(KEYS[1], sec, usec) end

-- The control record, when the tenant has one.
local override_rate, override_burst
if no_ctl then
  bare = false  -- the client read the record itself: this call cannot vouch for its absence
elseif bare or rcall('EXISTS', KEYS[#KEYS]) == 0 then
  if ARGV[#ARGV] ~= '' then return {'tier', ''} end
  bare = rate_on
else
  local ctl = rcall('HMGET', KEYS[#KEYS], 'tier', 'rate', 'burst', 'block')
  if ctl[4] then
    local until_s = tonumber(ctl[4]) or 0
    if until_s == 0 or until_s > sec then return {'blocked', until_s} end
  end
  if (ctl[1] or '') ~= ARGV[#ARGV] then return {'tier', ctl[1] or ''} end
  override_rate, override_burst = tonumber(ctl[2]), tonumber(ctl[3])
end
local override = override_rate and override_burst

local rate_ok, conc_ok, fleet_ok = 1, 1, 1
local tokens, rate_m, burst_m, cost_m = 0, 0, 0, tonumber(ARGV[4])
if rate_on then
  rate_m, burst_m = tonumber(ARGV[2]), tonumber(ARGV[3])
  if override then rate_m, burst_m = override_rate, override_burst end
  tokens = bucket_tokens(debt, rate_m, burst_m)
  if tokens < cost_m then rate_ok = 0 end
end

local now, in_flight, fleet_count, conc_ttl, fleet_ttl = sec * 1000000 + usec, 0, 0, 0, 0
-- Slots older than ttl belong to requests whose worker died: they no longer count.
local function live(key, ttl) return rcall('ZCOUNT', key, string.format('(%d', now - ttl), '+inf') end
if conc_on then
  conc_ttl = tonumber(ARGV[6])
  in_flight = live(KEYS[2], conc_ttl)
  if in_flight >= tonumber(ARGV[5]) then conc_ok = 0 end
end
if fleet_on then
  fleet_ttl = tonumber(ARGV[8])
  fleet_count = live(KEYS[3], fleet_ttl)
  -- The reports key is there only when the policy leases: count the keys before the rules' and the
  -- control record's (KEYS[4] may be a rule's key, or the control record, otherwise).
  if #KEYS - (no_ctl and 0 or 1) - #rule_spec == 4 then
    fleet_count = fleet_count + (tonumber(rcall('HGET', KEYS[4], 'sum')) or 0)
  end
  if fleet_count >= tonumber(ARGV[7]) then fleet_ok = 0 end
end

-- The limits and quotas that apply: each checked as the tenant's bucket is, none written yet.
local rules, rule_refused = nil, false
if #rule_spec > 0 then
  rules = {}
  if string.find(rule_spec, '[Qq]') then quota_window, quota_read, quota_write = quota_lib() end
  local rules_key0, arg = #KEYS - (no_ctl and 0 or 1) - #rule_spec, 10
  for j = 1, #rule_spec do
    local kind = string.sub(rule_spec, j, j)
    local rule = {key = KEYS[rules_key0 + j], enforce = kind == 'L' or kind == 'Q', quota = kind == 'Q' or kind == 'q'}
    if rule.quota then
      rule.limit, rule.start, rule.stop = tonumber(ARGV[arg]), quota_window(tonumber(ARGV[arg + 1]), tonumber(ARGV[arg + 2]), sec)
      rule.used = quota_read(rule.key, rule.start)
      rule.left = rule.limit > rule.used and rule.limit - rule.used or 0
      rule.ok = rule.left >= cost_m / 1000000
      arg = arg + 3
    else
      rule.rate, rule.burst = tonumber(ARGV[arg]), tonumber(ARGV[arg + 1])
      rule.debt, rule.left, rule.full_s = bucket_read(rule.key, sec, usec, rule.rate, rule.burst)
      rule.ok = rule.left >= cost_m
      arg = arg + 2
    end
    if rule.enforce and not rule.ok then rule_refused = true end
    rules[j] = rule
  end
end

-- An acquire: the tenant's enforcing bucket, lacking the tokens now, waits for its turn if it is near.
local turn = 0
if max_wait > 0 and r == ENFORCE and rate_ok == 0 then
  turn = debt + math.ceil(cost_m * 1e9 / rate_m) - math.floor(burst_m * 1e9 / rate_m)
  if turn < 1 then turn = 1 end
  if turn > max_wait then turn = 0 else rate_ok = 1 end
end

local committed = 1
if (r == ENFORCE and rate_ok == 0) or (c == ENFORCE and conc_ok == 0) or (f == ENFORCE and fleet_ok == 0) or rule_refused then
  committed = 0
  turn = 0
else
  -- Writes from here on. TTLs only collect garbage: a bucket key outlives its refill to full.
  if rate_on and rate_ok == 1 and turn > 0 then
    local d = (debt > turn and debt or turn) + math.ceil(cost_m * 1e9 / rate_m)
    local lack = math.floor((d - turn) * rate_m / 1e9)
    tokens = lack < burst_m and burst_m - lack or 0
    bucket_write(KEYS[1], d, sec, usec, full_s)
  elseif rate_on and rate_ok == 1 then
    tokens = tokens - cost_m
    bucket_write(KEYS[1], debt + math.ceil(cost_m * 1e9 / rate_m), sec, usec, full_s, bare)
  end
  -- Sweep the dead slots, add this request's, and let the set expire a second after its last slot would.
  -- (An acquire's slot counts from its turn.)
  local turn_us = math.ceil(turn / 1000)
  local function take_slot(key, ttl)
    rcall('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - ttl))
    rcall('ZADD', key, string.format('%d', now + turn_us), ARGV[9])
    rcall('PEXPIRE', key, string.format('%d', math.ceil((ttl + turn_us) / 1000) + 1000))
  end
  if conc_on and conc_ok == 1 then
    take_slot(KEYS[2], conc_ttl)
    in_flight = in_flight + 1
  end
  if fleet_on and fleet_ok == 1 then
    take_slot(KEYS[3], fleet_ttl)
  end
  for _, rule in ipairs(rules or {}) do
    if rule.ok and rule.quota then
      rule.left = rule.left - cost_m / 1000000
      quota_write(rule.key, rule.start, rule.stop, rule.used + cost_m / 1000000)
    elseif rule.ok and turn > 0 then
      local d = (rule.debt > turn and rule.debt or turn) + math.ceil(cost_m * 1e9 / rule.rate)
      local lack = math.floor((d - turn) * rule.rate / 1e9)
      rule.left = lack < rule.burst and rule.burst - lack or 0
      bucket_write(rule.key, d, sec, usec, rule.full_s)
    elseif rule.ok then
      rule.left = rule.left - cost_m
      bucket_write(rule.key, rule.debt + math.ceil(cost_m * 1e9 / rule.rate), sec, usec, rule.full_s)
    end
  end
end
if #rule_spec > 0 or override or max_wait > 0 then
  local reply = {committed, rate_ok, tokens, conc_ok, in_flight, fleet_ok}
  for _, rule in ipairs(rules or {}) do
    reply[#reply + 1] = rule.ok and 1 or 0
    reply[#reply + 1] = rule.left
    reply[#reply + 1] = rule.quota and rule.stop - sec or 0
    reply[#reply + 1] = rule.quota and rule.stop or 0
  end
  if override then
    reply[#reply + 1] = override_rate
    reply[#reply + 1] = override_burst
  end
  if max_wait > 0 then
    reply[#reply + 1] = turn
    reply[#reply + 1] = now
  end
  return reply
end
if not (conc_on or fleet_on) then
  if rate_ok == 1 then return tokens end
  return -1 - tokens
end
return {committed, rate_ok, tokens, conc_ok, in_flight, fleet_ok}
